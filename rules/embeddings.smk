rule embeddings:
    """gensim Word2Vec/FastText on the train split (or user vectors), aligned to the vocabulary."""
    input:
        examples="results/datasets/{dataset}/examples.parquet",
        vocab="results/datasets/{dataset}/vocab.json",
        pretrained=pretrained_vectors_file,
    output:
        vectors="results/embeddings/{dataset}/vectors.kv",
        matrix="results/embeddings/{dataset}/matrix.npy",
        coverage="results/embeddings/{dataset}/coverage.json",
    log:
        "logs/embeddings/{dataset}.log",
    benchmark:
        "benchmarks/embeddings/{dataset}.tsv"
    conda:
        "../envs/attnaudit.yaml"
    params:
        options=lambda wc: as_json(embedding_options(wc.dataset)),
        dataset_dir=subpath(input.examples, parent=True),
        out_dir=subpath(output.matrix, parent=True),
        seed=config["seed"],
    shell:
        "python -m attnaudit embeddings --dataset-dir {params.dataset_dir:q} --out-dir {params.out_dir:q}"
        " --options {params.options:q} --seed {params.seed} > {log:q} 2>&1"
