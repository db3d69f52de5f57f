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
        dataset_dir=subpath(input.examples, parent=True),
        out_dir=subpath(output.model, parent=True),
    shell:
        "python -m attnaudit train --dataset-dir {params.dataset_dir:q} --embeddings {input.matrix:q}"
        " --out-dir {params.out_dir:q} --spec {params.spec:q} {params.teachers} --threads {threads} > {log:q} 2>&1"
