# Jain & Wallace (2019) audits (§4): correlation (Alg. 1), permutation (Alg. 2) and adversarial attention
# (Eq. 1–2, Alg. 3) per instance chunk, gathered per model, then tables, figures and heatmaps.
#
# Sharding uses an explicit {chunk}-of-{n_chunks} wildcard rather than Snakemake's global `scattergather:`
# directive because the chunk count is per dataset (audits.chunks_per_dataset: a long-document corpus needs more
# shards than SST), which `scattergather:` (one count per name for the whole workflow) cannot express.

JW = config["jain_wallace"]
JW_AUDITS = ["jw_correlation", "jw_permutation", "jw_adversarial"]
JW_CHUNK = "results/audits/{dataset}/{model}/{audit}/chunk-{chunk}-of-{n_chunks}.parquet"
JW_TABLES = [
    "correlation.csv",
    "permutation.csv",
    "adversarial.csv",
    "table2.csv",
    "table2.md",
    "seeds.csv",
    "seeds.md",
]
JW_FIGURES = [
    "fig2_tau_gradient",
    "fig2_tau_loo",
    "fig3_permutation",
    "fig4_adversarial_jsd",
    "fig5_jsd_vs_max_attention",
    "fig6_7_appendix_c",
    "fig8_average_vs_lstm",
]
JW_REPORT = "Jain & Wallace 2019"


# Helpers are name-bound lambdas: `snakemake --lint` flags `def` functions in a file that also has rules.
# the option section an audit reads, so changing one audit's options reruns only that audit
jw_options = lambda section: as_json({section: JW[section]})
jw_gathered = lambda dataset: [
    f"results/audits/{dataset}/{m}/{a}.parquet" for m in model_ids(dataset) for a in JW_AUDITS
]
jw_runs = lambda: as_json(
    [
        {"dataset": d, "model": m, "corpus": corpus_of(d), "selection": train_spec(d, m).get("selection", "best")}
        for d in DATASETS
        for m in model_ids(d)
    ]
)
jain_wallace_targets = lambda: (
    [f"results/tables/jain_wallace/{t}" for t in JW_TABLES]
    + [f"results/figures/jain_wallace/{d}/{f}.png" for d in DATASETS for f in JW_FIGURES]
    + [f"results/figures/jain_wallace/{d}/heatmaps/{m}.html" for d in DATASETS for m in model_ids(d)]
)


JW_AUDIT_INPUT = {
    "model": "results/models/{dataset}/{model}/model.pt",
    "examples": "results/datasets/{dataset}/examples.parquet",
    "vocab": "results/datasets/{dataset}/vocab.json",
}
JW_AUDIT_SHELL = (
    "python -m attnaudit jain-wallace audit {params.audit} --dataset-dir {params.dataset_dir:q}"
    " --model-dir {params.model_dir:q} --out {output:q} --chunk {wildcards.chunk} --n-chunks {wildcards.n_chunks}"
    " --split {params.split} --batch-size {params.batch_size} --seed {params.seed} --options {params.options:q}"
    " --threads {threads} > {log:q} 2>&1"
)


rule jw_correlation:
    """Kendall τ-b between attention, gradient and LOO importance, per instance (J&W §4.1, Alg. 1)."""
    input:
        **JW_AUDIT_INPUT,
    output:
        "results/audits/{dataset}/{model}/jw_correlation/chunk-{chunk}-of-{n_chunks}.parquet",
    log:
        "logs/jw_correlation/{dataset}/{model}/chunk-{chunk}-of-{n_chunks}.log",
    benchmark:
        "benchmarks/jw_correlation/{dataset}/{model}/chunk-{chunk}-of-{n_chunks}.tsv"
    wildcard_constraints:
        chunk=r"\d+",
        n_chunks=r"\d+",
    conda:
        "../envs/attnaudit.yaml"
    resources:
        gpu=0,
    params:
        audit="correlation",
        options=jw_options("correlation"),
        dataset_dir=subpath(input.examples, parent=True),
        model_dir=subpath(input.model, parent=True),
        split=AUDITS["split"],
        batch_size=AUDITS["batch_size"],
        seed=config["seed"],
    shell:
        JW_AUDIT_SHELL


rule jw_permutation:
    """100 seeded permutations of α̂ through the decoder with h fixed; median Δŷ per instance (J&W Alg. 2)."""
    input:
        **JW_AUDIT_INPUT,
    output:
        "results/audits/{dataset}/{model}/jw_permutation/chunk-{chunk}-of-{n_chunks}.parquet",
    log:
        "logs/jw_permutation/{dataset}/{model}/chunk-{chunk}-of-{n_chunks}.log",
    benchmark:
        "benchmarks/jw_permutation/{dataset}/{model}/chunk-{chunk}-of-{n_chunks}.tsv"
    wildcard_constraints:
        chunk=r"\d+",
        n_chunks=r"\d+",
    conda:
        "../envs/attnaudit.yaml"
    resources:
        gpu=0,
    params:
        audit="permutation",
        options=jw_options("permutation"),
        dataset_dir=subpath(input.examples, parent=True),
        model_dir=subpath(input.model, parent=True),
        split=AUDITS["split"],
        batch_size=AUDITS["batch_size"],
        seed=config["seed"],
    shell:
        JW_AUDIT_SHELL


rule jw_adversarial:
    """k adversarial attention distributions within ε of the output; ε-max JSD per instance (J&W Eq. 1–2, Alg. 3)."""
    input:
        **JW_AUDIT_INPUT,
    output:
        "results/audits/{dataset}/{model}/jw_adversarial/chunk-{chunk}-of-{n_chunks}.parquet",
    log:
        "logs/jw_adversarial/{dataset}/{model}/chunk-{chunk}-of-{n_chunks}.log",
    benchmark:
        "benchmarks/jw_adversarial/{dataset}/{model}/chunk-{chunk}-of-{n_chunks}.tsv"
    wildcard_constraints:
        chunk=r"\d+",
        n_chunks=r"\d+",
    conda:
        "../envs/attnaudit.yaml"
    resources:
        gpu=0,
    params:
        audit="adversarial",
        options=jw_options("adversarial"),
        dataset_dir=subpath(input.examples, parent=True),
        model_dir=subpath(input.model, parent=True),
        split=AUDITS["split"],
        batch_size=AUDITS["batch_size"],
        seed=config["seed"],
    shell:
        JW_AUDIT_SHELL


rule jw_gather:
    """Concatenate one model's audit chunks in instance order (identical whatever the chunk count)."""
    input:
        lambda wc: chunk_paths(JW_CHUNK, wc.dataset, model=wc.model, audit=wc.audit),
    output:
        "results/audits/{dataset}/{model}/{audit}.parquet",
    log:
        "logs/jw_gather/{dataset}/{model}/{audit}.log",
    benchmark:
        "benchmarks/jw_gather/{dataset}/{model}/{audit}.tsv"
    wildcard_constraints:
        audit="|".join(JW_AUDITS),
    conda:
        "../envs/attnaudit.yaml"
    shell:
        "python -m attnaudit jain-wallace gather --out {output:q} {input:q} > {log:q} 2>&1"


rule jw_tables:
    """Per dataset × model × predicted class summaries (J&W Table 2 layout) and ours next to J&W Table 2."""
    input:
        [p for d in DATASETS for p in jw_gathered(d)],
    output:
        correlation=report(
            "results/tables/jain_wallace/correlation.csv",
            category=JW_REPORT,
            subcategory="Tables",
            labels={"table": "correlation (τ per pair and predicted class)"},
        ),
        permutation=report(
            "results/tables/jain_wallace/permutation.csv",
            category=JW_REPORT,
            subcategory="Tables",
            labels={"table": "permutation (median Δŷ)"},
        ),
        adversarial=report(
            "results/tables/jain_wallace/adversarial.csv",
            category=JW_REPORT,
            subcategory="Tables",
            labels={"table": "adversarial (ε-max JSD)"},
        ),
        table2=report(
            "results/tables/jain_wallace/table2.csv",
            category=JW_REPORT,
            subcategory="Tables",
            labels={"table": "Table 2: ours vs J&W (csv)"},
        ),
        table2_md=report(
            "results/tables/jain_wallace/table2.md",
            category=JW_REPORT,
            subcategory="Tables",
            labels={"table": "Table 2: ours vs J&W (markdown)"},
        ),
        seeds=report(
            "results/tables/jain_wallace/seeds.csv",
            category=JW_REPORT,
            subcategory="Tables",
            labels={"table": "τ over seeds and selection rules (csv)"},
        ),
        seeds_md=report(
            "results/tables/jain_wallace/seeds.md",
            category=JW_REPORT,
            subcategory="Tables",
            labels={"table": "τ over seeds and selection rules (markdown)"},
        ),
    log:
        "logs/jw_tables/tables.log",
    benchmark:
        "benchmarks/jw_tables/tables.tsv"
    conda:
        "../envs/attnaudit.yaml"
    params:
        runs=jw_runs(),
        options=as_json(JW),
        out_dir=subpath(output.correlation, parent=True),
    shell:
        "python -m attnaudit jain-wallace tables --audits-root results/audits --runs {params.runs:q}"
        " --out-dir {params.out_dir:q} --options {params.options:q} > {log:q} 2>&1"


rule jw_figures:
    """J&W Figs. 2–8 for one dataset, one panel per model."""
    input:
        lambda wc: jw_gathered(wc.dataset),
    output:
        **{
            name: report(
                f"results/figures/jain_wallace/{{dataset}}/{name}.png",
                category=JW_REPORT,
                subcategory="{dataset}",
                labels={"figure": name},
            )
            for name in JW_FIGURES
        },
    log:
        "logs/jw_figures/{dataset}.log",
    benchmark:
        "benchmarks/jw_figures/{dataset}.tsv"
    conda:
        "../envs/attnaudit.yaml"
    params:
        models=lambda wc: " ".join(model_ids(wc.dataset)),
        audits_dir=lambda wc: f"results/audits/{wc.dataset}",
        out_dir=lambda wc: f"results/figures/jain_wallace/{wc.dataset}",
    shell:
        "python -m attnaudit jain-wallace figures --dataset {wildcards.dataset} --models {params.models}"
        " --audits-dir {params.audits_dir:q} --out-dir {params.out_dir:q} > {log:q} 2>&1"


rule jw_heatmaps:
    """Original vs adversarial attention over the text with Δŷ (J&W Fig. 1, App. E), self-contained HTML."""
    input:
        adversarial="results/audits/{dataset}/{model}/jw_adversarial.parquet",
        examples="results/datasets/{dataset}/examples.parquet",
    output:
        report(
            "results/figures/jain_wallace/{dataset}/heatmaps/{model}.html",
            category=JW_REPORT,
            subcategory="{dataset}",
            labels={"figure": "adversarial heatmaps", "model": "{model}"},
        ),
    log:
        "logs/jw_heatmaps/{dataset}/{model}.log",
    benchmark:
        "benchmarks/jw_heatmaps/{dataset}/{model}.tsv"
    conda:
        "../envs/attnaudit.yaml"
    params:
        options=as_json({"adversarial": JW["adversarial"], "heatmaps": JW["heatmaps"]}),
        dataset_dir=subpath(input.examples, parent=True),
        seed=config["seed"],
    shell:
        "python -m attnaudit jain-wallace heatmaps --dataset {wildcards.dataset} --model {wildcards.model}"
        " --adversarial {input.adversarial:q} --dataset-dir {params.dataset_dir:q} --out {output:q}"
        " --options {params.options:q} --seed {params.seed} > {log:q} 2>&1"
