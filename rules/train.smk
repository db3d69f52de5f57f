rule train:
    """One model of the model sheet (J&W App. A; T&Š regularisers; W&P uniform, guided and imitating models); uses
    CUDA when the job sees a GPU. A guided or imitating model reads its teacher's predictions."""
    input:
        unpack(teacher_predictions),
        examples="results/datasets/{dataset}/examples.parquet",
        vocab="results/datasets/{dataset}/vocab.json",
        matrix="results/embeddings/{dataset}/matrix.npy",
    output:
        model="results/models/{dataset}/{model}/model.pt",
        metrics="results/models/{dataset}/{model}/metrics.json",
        predictions="results/models/{dataset}/{model}/predictions.parquet",
    log:
        "logs/train/{dataset}/{model}.log",
    benchmark:
        "benchmarks/train/{dataset}/{model}.tsv"
    conda:
        "../envs/attnaudit.yaml"
    resources:
        gpu=0,
    params:
        spec=lambda wc: as_json(train_spec(wc.dataset, wc.model)),
        teachers=teacher_args,
        final_epoch=final_epoch_arg,
        dataset_dir=subpath(input.examples, parent=True),
        out_dir=subpath(output.model, parent=True),
    shell:
        "python -m attnaudit train --dataset-dir {params.dataset_dir:q} --embeddings {input.matrix:q}"
        " --out-dir {params.out_dir:q} --spec {params.spec:q} {params.teachers} {params.final_epoch}"
        " --threads {threads} > {log:q} 2>&1"


use rule train as train_keeping_final_epoch with:
    output:
        model="results/models/{dataset}/{model}/model.pt",
        metrics="results/models/{dataset}/{model}/metrics.json",
        predictions="results/models/{dataset}/{model}/predictions.parquet",
        final_epoch="results/models/{dataset}/{model}/final_epoch.pt",
    wildcard_constraints:
        model=alternatives(runs_with_final_epoch()),


rule read_off_final_epoch:
    """A selection: last model whose fields are another model's but for the selection rule: that model's run is
    this model's, so its final epoch is read off the run's job instead of training again (one run, two rules)."""
    input:
        examples="results/datasets/{dataset}/examples.parquet",
        vocab="results/datasets/{dataset}/vocab.json",
        final_epoch=final_epoch_of_run,
    output:
        model="results/models/{dataset}/{model}/model.pt",
        metrics="results/models/{dataset}/{model}/metrics.json",
        predictions="results/models/{dataset}/{model}/predictions.parquet",
    log:
        "logs/read_off_final_epoch/{dataset}/{model}.log",
    benchmark:
        "benchmarks/read_off_final_epoch/{dataset}/{model}.tsv"
    wildcard_constraints:
        model=alternatives(models_read_off_a_run()),
    conda:
        "../envs/attnaudit.yaml"
    params:
        spec=lambda wc: as_json(train_spec(wc.dataset, wc.model)),
        dataset_dir=subpath(input.examples, parent=True),
        out_dir=subpath(output.model, parent=True),
    shell:
        "python -m attnaudit train --dataset-dir {params.dataset_dir:q} --from-final-epoch {input.final_epoch:q}"
        " --out-dir {params.out_dir:q} --spec {params.spec:q} --threads {threads} > {log:q} 2>&1"


ruleorder: read_off_final_epoch > train_keeping_final_epoch > train
