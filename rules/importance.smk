# Importance scores once per dataset × model × method (attention, J&W's gradient and deletion LOO, B&F's saliency
# methods, the random baseline), per instance chunk, gathered per method; every audit reads these files.

IMPORTANCE_CHUNK = "results/importance/{dataset}/{model}/{method}/chunk-{chunk}-of-{n_chunks}.parquet"


rule importance:
    """One importance method on one instance chunk of the audited split, timed (its cost)."""
    input:
        model="results/models/{dataset}/{model}/model.pt",
        examples="results/datasets/{dataset}/examples.parquet",
        vocab="results/datasets/{dataset}/vocab.json",
    output:
        temp(IMPORTANCE_CHUNK),
    log:
        "logs/importance/{dataset}/{model}/{method}-{chunk}-of-{n_chunks}.log",
    benchmark:
        "benchmarks/importance/{dataset}/{model}/{method}-{chunk}-of-{n_chunks}.tsv"
    conda:
        "../envs/attnaudit.yaml"
    resources:
        gpu=0,
        memory_options=lambda wc: as_json(importance_memory_options(wc.method)),
    params:
        options=lambda wc: as_json(importance_options(wc.method)),
        dataset_dir=subpath(input.examples, parent=True),
        model_dir=subpath(input.model, parent=True),
        split=AUDITS["split"],
        batch_size=AUDITS["batch_size"],
        max_batch_tokens=as_json(AUDITS["max_batch_tokens"]),
        seed=config["seed"],
    shell:
        "python -m attnaudit importance score --method {wildcards.method} --options {params.options:q}"
        " --memory-options {resources.memory_options:q}"
        " --dataset-dir {params.dataset_dir:q} --model-dir {params.model_dir:q} --out {output:q}"
        " --split {params.split} --batch-size {params.batch_size} --max-batch-tokens {params.max_batch_tokens:q}"
        " --chunk {wildcards.chunk}"
        " --n-chunks {wildcards.n_chunks} --seed {params.seed} --threads {threads} > {log:q} 2>&1"


rule importance_gather:
    """One method's chunks in instance order (identical whatever the chunk count)."""
    input:
        gathered_chunks(IMPORTANCE_CHUNK),
    output:
        "results/importance/{dataset}/{model}/{method}.parquet",
    log:
        "logs/importance_gather/{dataset}/{model}/{method}.log",
    benchmark:
        "benchmarks/importance_gather/{dataset}/{model}/{method}.tsv"
    conda:
        "../envs/attnaudit.yaml"
    shell:
        "python -m attnaudit importance gather --out {output:q} {input:q} > {log:q} 2>&1"
