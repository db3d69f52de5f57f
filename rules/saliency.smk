# Bastings & Filippova (2020): input saliency methods (§3) against attention (§4) — the importance stage's scores of
# every method, their pairwise agreement, ERASER faithfulness (§3.3, §6) and, on planted corpora, precision against
# the planted tokens. Faithfulness is sharded like the J&W audits and gathered per model, then tables and figures.
#
# agreement and faithfulness are separate rules with their own options, so changing the top-k or the ERASER bins
# reruns only those steps, not the (expensive) attributions.

SAL = config["saliency"]
SAL_CHUNK = "results/audits/{dataset}/{model}/saliency_faithfulness/chunk-{chunk}-of-{n_chunks}.parquet"
SAL_TABLES = ["agreement", "faithfulness", "cost", "ig_convergence"]
SAL_REPORT = "Bastings & Filippova 2020"
SAL_DATASETS = dataset_subset("saliency.datasets", SAL["datasets"])
SAL_PLANTED = [d for d in SAL_DATASETS if corpus_of(d) == "planted"]
# a typo in saliency.models or .seeds would drop models from B&F's tables and cards without a word: say so, and stop
# if a dataset named in saliency.datasets (or, with null, every dataset) is left without models
warn_unselected("saliency", SAL["models"], SAL["seeds"], SAL_DATASETS)
SAL_SELECTS_ANY = any(map(saliency_models, SAL_DATASETS))
check_stage_selects(
    "saliency",
    {"models": SAL["models"], "seeds": SAL["seeds"]},
    SAL_DATASETS if SAL["datasets"] is not None or not SAL_SELECTS_ANY else [],
    saliency_models,
)


rule saliency_agreement:
    """Kendall τ-b and top-k overlap between every pair of methods, per instance (B&F §4)."""
    input:
        importance=lambda wc: saliency_importance(wc.dataset, wc.model),
        examples="results/datasets/{dataset}/examples.parquet",
        vocab="results/datasets/{dataset}/vocab.json",
    output:
        "results/audits/{dataset}/{model}/saliency_agreement.parquet",
    log:
        "logs/saliency_agreement/{dataset}/{model}.log",
    benchmark:
        "benchmarks/saliency_agreement/{dataset}/{model}.tsv"
    conda:
        "../envs/attnaudit.yaml"
    params:
        options=as_json({"methods": SAL["methods"], "topk": SAL["topk"], "rankings": SAL["rankings"]}),
        dataset_dir=subpath(input.examples, parent=True),
        split=AUDITS["split"],
    shell:
        "python -m attnaudit saliency agreement --dataset-dir {params.dataset_dir:q} --importance {input.importance:q}"
        " --split {params.split} --options {params.options:q} --out {output:q} > {log:q} 2>&1"


rule saliency_faithfulness:
    """ERASER comprehensiveness/sufficiency at k% by deletion and replacement, per instance (B&F §3.3, §6)."""
    input:
        importance=lambda wc: saliency_importance(wc.dataset, wc.model),
        model="results/models/{dataset}/{model}/model.pt",
        examples="results/datasets/{dataset}/examples.parquet",
        vocab="results/datasets/{dataset}/vocab.json",
    output:
        temp(SAL_CHUNK),
    log:
        "logs/saliency_faithfulness/{dataset}/{model}/chunk-{chunk}-of-{n_chunks}.log",
    benchmark:
        "benchmarks/saliency_faithfulness/{dataset}/{model}/chunk-{chunk}-of-{n_chunks}.tsv"
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
        max_batch_tokens=as_json(AUDITS["max_batch_tokens"]),
    shell:
        "python -m attnaudit saliency faithfulness --dataset-dir {params.dataset_dir:q}"
        " --model-dir {params.model_dir:q} --importance {input.importance:q} --out {output:q}"
        " --chunk {wildcards.chunk} --n-chunks {wildcards.n_chunks} --split {params.split}"
        " --batch-size {params.batch_size} --max-batch-tokens {params.max_batch_tokens:q} --options {params.options:q}"
        " --threads {threads} > {log:q} 2>&1"


rule saliency_gather:
    """Concatenate one model's faithfulness chunks in instance order (identical whatever the chunk count)."""
    input:
        gathered_chunks(SAL_CHUNK),
    output:
        "results/audits/{dataset}/{model}/saliency_faithfulness.parquet",
    log:
        "logs/saliency_gather/{dataset}/{model}.log",
    benchmark:
        "benchmarks/saliency_gather/{dataset}/{model}.tsv"
    conda:
        "../envs/attnaudit.yaml"
    shell:
        "python -m attnaudit saliency gather --out {output:q} {input:q} > {log:q} 2>&1"


rule saliency_tables:
    """One dataset's agreement, faithfulness (with AOPC), cost and IG convergence over its audited models."""
    input:
        saliency_run_files,
    output:
        [f"results/tables/bastings_filippova/{{dataset}}/{name}.csv" for name in SAL_TABLES],
    log:
        "logs/saliency_tables/{dataset}.log",
    benchmark:
        "benchmarks/saliency_tables/{dataset}.tsv"
    conda:
        "../envs/attnaudit.yaml"
    params:
        runs=lambda wc: as_json(saliency_runs(wc.dataset)),
        out_dir=lambda wc, output: Path(output[0]).parent,
    shell:
        "python -m attnaudit saliency tables --runs {params.runs:q} --out-dir {params.out_dir:q} > {log:q} 2>&1"


rule saliency_planted:
    """Precision@k of the planted tokens for every method (the ground truth of a planted corpus)."""
    input:
        scores=lambda wc: [p for m in saliency_models(wc.dataset) for p in saliency_importance(wc.dataset, m)],
        examples="results/datasets/{dataset}/examples.parquet",
        vocab="results/datasets/{dataset}/vocab.json",
    output:
        "results/tables/bastings_filippova/{dataset}/planted.csv",
    log:
        "logs/saliency_planted/{dataset}.log",
    benchmark:
        "benchmarks/saliency_planted/{dataset}.tsv"
    conda:
        "../envs/attnaudit.yaml"
    params:
        runs=lambda wc: as_json(
            [
                {
                    "dataset": wc.dataset,
                    "dataset_dir": f"results/datasets/{wc.dataset}",
                    "model": m,
                    "scores": saliency_importance(wc.dataset, m),
                }
                for m in saliency_models(wc.dataset)
            ]
        ),
        options=as_json({"planted_k": SAL["planted_k"], "rankings": SAL["rankings"]}),
        split=AUDITS["split"],
    shell:
        "python -m attnaudit saliency planted --runs {params.runs:q} --split {params.split}"
        " --options {params.options:q} --out {output:q} > {log:q} 2>&1"


combined_tables(
    "bastings_filippova",
    SAL_REPORT,
    {f"{name}.csv": saliency_table_datasets() for name in SAL_TABLES}
    | ({"planted.csv": SAL_PLANTED} if SAL_PLANTED else {}),
)


rule saliency_figures:
    """Agreement heatmap (τ-b, top-k overlap) and faithfulness curves (drop vs k per method) of one model."""
    input:
        agreement="results/audits/{dataset}/{model}/saliency_agreement.parquet",
        faithfulness="results/audits/{dataset}/{model}/saliency_faithfulness.parquet",
    output:
        heatmap=report(
            "results/figures/bastings_filippova/{dataset}/{model}/agreement.png",
            caption="../report/bastings_filippova/agreement_figure.rst",
            category=SAL_REPORT,
            subcategory="{dataset}",
            labels={"model": "{model}", "figure": "agreement between methods"},
        ),
        curves=report(
            "results/figures/bastings_filippova/{dataset}/{model}/faithfulness.png",
            caption="../report/bastings_filippova/faithfulness_figure.rst",
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


# the audit card's part of this stage (rules/cards.smk gathers the summaries of every stage registered here)
card_summary(
    "saliency",
    "Bastings & Filippova (2020)",
    saliency_card_models,
    explorer=saliency_explorer_sources,
    not_run=saliency_not_run,
)


rule saliency_card_summary:
    """B&F §3.3: attention's AOPC rank among the importance methods (and planted precision@k) for the audit card."""
    input:
        unpack(saliency_summary_inputs),
    output:
        "results/summaries/saliency/{dataset}/{model}.json",
    log:
        "logs/saliency_card_summary/{dataset}/{model}.log",
    benchmark:
        "benchmarks/saliency_card_summary/{dataset}/{model}.tsv"
    conda:
        "../envs/attnaudit.yaml"
    params:
        inputs=summary_inputs_json,
        options=lambda wc: as_json(card_options(wc.dataset, "saliency")),
    shell:
        "python -m attnaudit cards summary --stage saliency --dataset {wildcards.dataset} --model {wildcards.model}"
        " --inputs {params.inputs:q} --options {params.options:q} --out {output:q} > {log:q} 2>&1"
