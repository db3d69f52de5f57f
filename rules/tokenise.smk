rule tokenise:
    """spaCy tokenisation, J&W splits and filters, vocabulary from train (J&W App. A, §3)."""
    input:
        documents=lambda wc: f"results/corpora/{corpus_of(wc.dataset)}/documents.parquet",
    output:
        examples="results/datasets/{dataset}/examples.parquet",
        vocab="results/datasets/{dataset}/vocab.json",
        stats="results/datasets/{dataset}/stats.json",
    log:
        "logs/tokenise/{dataset}.log",
    benchmark:
        "benchmarks/tokenise/{dataset}.tsv"
    conda:
        "../envs/attnaudit.yaml"
    params:
        options=lambda wc: as_json(tokenise_options(wc.dataset)),
        out_dir=subpath(output.examples, parent=True),
        seed=config["seed"],
    shell:
        "python -m attnaudit tokenise --documents {input.documents:q} --out-dir {params.out_dir:q}"
        " --options {params.options:q} --seed {params.seed} > {log:q} 2>&1"
