rule corpora:
    """Raw corpus (local mirror or official URL, or the user's own file) → verified documents.parquet + manifest.json."""
    input:
        user_corpus_file,
    output:
        documents="results/corpora/{corpus}/documents.parquet",
        manifest="results/corpora/{corpus}/manifest.json",
    log:
        "logs/corpora/{corpus}.log",
    benchmark:
        "benchmarks/corpora/{corpus}.tsv"
    conda:
        "../envs/attnaudit.yaml"
    resources:
        # where the raw files are read from or downloaded to: sha256-verified either way, so they are resources,
        # which Snakemake does not track, and moving them reruns nothing
        raw_dir=lambda wc: f"{config['corpora']['raw_dir']}/{wc.corpus}",
        mirror=MIRROR,
    params:
        options=lambda wc: as_json(corpus_options(wc.corpus)),
        user=lambda wc: as_json(user_corpus_entry(wc.corpus)),
        seed=config["seed"],
    shell:
        "python -m attnaudit corpora --corpus {wildcards.corpus} --out {output.documents:q}"
        " --manifest {output.manifest:q} --raw-dir {resources.raw_dir:q} --options {params.options:q}"
        " --user-corpora {params.user:q} --seed {params.seed} --mirror={resources.mirror:q} > {log:q} 2>&1"
