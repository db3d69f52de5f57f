# Bastings & Filippova (2020): input saliency methods (§3) against attention (§4) — per-instance scores of every
# importance method (timed), their pairwise agreement, ERASER faithfulness (§3.3, §6) and, on planted corpora,
# precision against the planted tokens. Sharded like the J&W audits: an explicit {chunk}-of-{n_chunks} wildcard
# with per-dataset chunk counts (audits.chunks_per_dataset), gathered per model, then tables and figures.
#
# scores → agreement and scores → faithfulness are separate rules with their own options, so changing the
# top-k or the ERASER bins reruns only those steps, not the (expensive) attributions.

SAL = config["saliency"]
SAL_PARTS = ["scores", "agreement", "faithfulness"]
SAL_CHUNK = "results/audits/{dataset}/{model}/saliency_{part}/chunk-{chunk}-of-{n_chunks}.parquet"
SAL_TABLES = ["agreement", "faithfulness", "cost", "ig_convergence"]
SAL_REPORT = "Bastings & Filippova 2020"
SAL_DATASETS = dataset_subset("saliency.datasets", SAL["datasets"])
sal_models = lambda dataset: [
    m for m in model_ids(dataset) if SAL["seeds"] is None or parse_model_id(m)["seed"] in SAL["seeds"]
]
SAL_PLANTED = [d for d in SAL_DATASETS if corpus_of(d) == "planted"]


# Helpers are name-bound lambdas (`snakemake --lint` flags `def` functions in a file that also has rules).
sal_gathered = lambda part: [
    f"results/audits/{d}/{m}/saliency_{part}.parquet" for d in SAL_DATASETS for m in sal_models(d)
]
saliency_targets = lambda: (
    [f"results/tables/bastings_filippova/{t}.csv" for t in SAL_TABLES]
    + (["results/tables/bastings_filippova/planted.csv"] if SAL_PLANTED else [])
    + [
        f"results/figures/bastings_filippova/{d}/{m}/{f}.png"
        for d in SAL_DATASETS
        for m in sal_models(d)
        for f in ("agreement", "faithfulness")
    ]
)


rule saliency:
    """Every configured importance method on one chunk of the audited split, timed (B&F §3; cost)."""
    input:
        model="results/models/{dataset}/{model}/model.pt",
        examples="results/datasets/{dataset}/examples.parquet",
        vocab="results/datasets/{dataset}/vocab.json",
    output:
        "results/audits/{dataset}/{model}/saliency_scores/chunk-{chunk}-of-{n_chunks}.parquet",
    log:
        "logs/saliency/{dataset}/{model}/scores-{chunk}-of-{n_chunks}.log",
    benchmark:
        "benchmarks/saliency/{dataset}/{model}/scores-{chunk}-of-{n_chunks}.tsv"
    wildcard_constraints:
        chunk=r"\d+",
        n_chunks=r"\d+",
    conda:
        "../envs/attnaudit.yaml"
    resources:
        gpu=0,
    params:
        methods=as_json(SAL["methods"]),
        method_options=as_json(SAL["method_options"]),
        dataset_dir=subpath(input.examples, parent=True),
        model_dir=subpath(input.model, parent=True),
        split=AUDITS["split"],
        batch_size=AUDITS["batch_size"],
        seed=config["seed"],
    shell:
        "python -m attnaudit saliency scores --dataset-dir {params.dataset_dir:q} --model-dir {params.model_dir:q}"
        " --out {output:q} --chunk {wildcards.chunk} --n-chunks {wildcards.n_chunks} --split {params.split}"
        " --batch-size {params.batch_size} --methods {params.methods:q} --method-options {params.method_options:q}"
        " --seed {params.seed} --threads {threads} > {log:q} 2>&1"


rule saliency_agreement:
    """Kendall τ-b and top-k overlap between every pair of methods, per instance (B&F §4)."""
    input:
        scores="results/audits/{dataset}/{model}/saliency_scores/chunk-{chunk}-of-{n_chunks}.parquet",
        examples="results/datasets/{dataset}/examples.parquet",
        vocab="results/datasets/{dataset}/vocab.json",
    output:
        "results/audits/{dataset}/{model}/saliency_agreement/chunk-{chunk}-of-{n_chunks}.parquet",
    log:
        "logs/saliency_agreement/{dataset}/{model}/chunk-{chunk}-of-{n_chunks}.log",
    benchmark:
        "benchmarks/saliency_agreement/{dataset}/{model}/chunk-{chunk}-of-{n_chunks}.tsv"
    wildcard_constraints:
        chunk=r"\d+",
        n_chunks=r"\d+",
    conda:
        "../envs/attnaudit.yaml"
    params:
        options=as_json({"methods": SAL["methods"], "topk": SAL["topk"], "rankings": SAL["rankings"]}),
        dataset_dir=subpath(input.examples, parent=True),
        split=AUDITS["split"],
    shell:
        "python -m attnaudit saliency agreement --dataset-dir {params.dataset_dir:q} --scores {input.scores:q}"
        " --split {params.split} --options {params.options:q} --out {output:q} > {log:q} 2>&1"


rule saliency_faithfulness:
    """ERASER comprehensiveness/sufficiency at k% by deletion and replacement, per instance (B&F §3.3, §6)."""
    input:
        scores="results/audits/{dataset}/{model}/saliency_scores/chunk-{chunk}-of-{n_chunks}.parquet",
        model="results/models/{dataset}/{model}/model.pt",
        examples="results/datasets/{dataset}/examples.parquet",
        vocab="results/datasets/{dataset}/vocab.json",
    output:
        "results/audits/{dataset}/{model}/saliency_faithfulness/chunk-{chunk}-of-{n_chunks}.parquet",
    log:
        "logs/saliency_faithfulness/{dataset}/{model}/chunk-{chunk}-of-{n_chunks}.log",
    benchmark:
        "benchmarks/saliency_faithfulness/{dataset}/{model}/chunk-{chunk}-of-{n_chunks}.tsv"
    wildcard_constraints:
        chunk=r"\d+",
        n_chunks=r"\d+",
    conda:
        "../envs/attnaudit.yaml"
    resources:
        gpu=0,
    params:
        options=as_json({k: SAL[k] for k in ("methods", "fractions", "variants", "rankings")}),
        dataset_dir=subpath(input.examples, parent=True),
        model_dir=subpath(input.model, parent=True),
        split=AUDITS["split"],
        batch_size=AUDITS["batch_size"],
    shell:
        "python -m attnaudit saliency faithfulness --dataset-dir {params.dataset_dir:q}"
        " --model-dir {params.model_dir:q} --scores {input.scores:q} --out {output:q} --chunk {wildcards.chunk}"
        " --n-chunks {wildcards.n_chunks} --split {params.split} --batch-size {params.batch_size}"
        " --options {params.options:q} --threads {threads} > {log:q} 2>&1"


rule saliency_gather:
    """Concatenate one model's chunks in instance order (identical whatever the chunk count)."""
    input:
        lambda wc: chunk_paths(SAL_CHUNK, wc.dataset, model=wc.model, part=wc.part),
    output:
        "results/audits/{dataset}/{model}/saliency_{part}.parquet",
    log:
        "logs/saliency_gather/{dataset}/{model}/{part}.log",
    benchmark:
        "benchmarks/saliency_gather/{dataset}/{model}/{part}.tsv"
    wildcard_constraints:
        part="|".join(SAL_PARTS),
    conda:
        "../envs/attnaudit.yaml"
    shell:
        "python -m attnaudit saliency gather --out {output:q} {input:q} > {log:q} 2>&1"


rule saliency_tables:
    """Agreement, faithfulness (with AOPC), cost and IG convergence over every dataset × model."""
    input:
        sal_gathered("scores"),
        sal_gathered("agreement"),
        sal_gathered("faithfulness"),
    output:
        **{
            name: report(
                f"results/tables/bastings_filippova/{name}.csv",
                category=SAL_REPORT,
                subcategory="Tables",
                labels={"table": name},
            )
            for name in SAL_TABLES
        },
    log:
        "logs/saliency_tables/tables.log",
    benchmark:
        "benchmarks/saliency_tables/tables.tsv"
    conda:
        "../envs/attnaudit.yaml"
    params:
        runs=as_json([[d, m] for d in SAL_DATASETS for m in sal_models(d)]),
        out_dir=subpath(output.agreement, parent=True),
    shell:
        "python -m attnaudit saliency tables --audits-dir results/audits --runs {params.runs:q}"
        " --out-dir {params.out_dir:q} > {log:q} 2>&1"


rule saliency_planted:
    """Precision@k of the planted tokens for every method (the ground truth of the planted corpus)."""
    input:
        scores=[f"results/audits/{d}/{m}/saliency_scores.parquet" for d in SAL_PLANTED for m in sal_models(d)],
        examples=[f"results/datasets/{d}/examples.parquet" for d in SAL_PLANTED],
    output:
        report(
            "results/tables/bastings_filippova/planted.csv",
            category=SAL_REPORT,
            subcategory="Tables",
            labels={"table": "planted precision@k"},
        ),
    log:
        "logs/saliency_planted/planted.log",
    benchmark:
        "benchmarks/saliency_planted/planted.tsv"
    conda:
        "../envs/attnaudit.yaml"
    params:
        runs=as_json(
            [
                {
                    "dataset": d,
                    "dataset_dir": f"results/datasets/{d}",
                    "model": m,
                    "scores": f"results/audits/{d}/{m}/saliency_scores.parquet",
                }
                for d in SAL_PLANTED
                for m in sal_models(d)
            ]
        ),
        options=as_json({"planted_k": SAL["planted_k"], "rankings": SAL["rankings"]}),
        split=AUDITS["split"],
    shell:
        "python -m attnaudit saliency planted --runs {params.runs:q} --split {params.split}"
        " --options {params.options:q} --out {output:q} > {log:q} 2>&1"


rule saliency_figures:
    """Agreement heatmap (τ-b, top-k overlap) and faithfulness curves (drop vs k per method) of one model."""
    input:
        agreement="results/audits/{dataset}/{model}/saliency_agreement.parquet",
        faithfulness="results/audits/{dataset}/{model}/saliency_faithfulness.parquet",
    output:
        heatmap=report(
            "results/figures/bastings_filippova/{dataset}/{model}/agreement.png",
            category=SAL_REPORT,
            subcategory="{dataset}",
            labels={"model": "{model}", "figure": "agreement between methods"},
        ),
        curves=report(
            "results/figures/bastings_filippova/{dataset}/{model}/faithfulness.png",
            category=SAL_REPORT,
            subcategory="{dataset}",
            labels={"model": "{model}", "figure": "faithfulness curves"},
        ),
    log:
        "logs/saliency_figures/{dataset}/{model}.log",
    benchmark:
        "benchmarks/saliency_figures/{dataset}/{model}.tsv"
    conda:
        "../envs/attnaudit.yaml"
    params:
        ranking=SAL["rankings"][0],
    shell:
        "python -m attnaudit saliency figures --agreement {input.agreement:q} --faithfulness {input.faithfulness:q}"
        " --heatmap {output.heatmap:q} --curves {output.curves:q} --ranking {params.ranking}"
        " --title '{wildcards.dataset} / {wildcards.model}' > {log:q} 2>&1"
