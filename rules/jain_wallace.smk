# Jain & Wallace (2019) audits (§4): correlation (Alg. 1) from the importance stage's scores, permutation (Alg. 2)
# and adversarial attention (Eq. 1–2, Alg. 3) per instance chunk, gathered per model, then tables, figures and
# heatmaps. They run on every model with learned attention (common.smk: audited_models).
#
# Sharding uses an explicit {chunk}-of-{n_chunks} wildcard rather than Snakemake's global `scattergather:`
# directive because the chunk count is per dataset (audits.chunks_per_dataset: a long-document corpus needs more
# shards than SST), which `scattergather:` (one count per name for the whole workflow) cannot express.

JW = config["jain_wallace"]
for _dataset in DATASETS:
    check_jw_overrides(_dataset)
JW_AUDITS = ["jw_correlation", "jw_permutation", "jw_adversarial"]
JW_CHUNK = "results/audits/{dataset}/{model}/{audit}/chunk-{chunk}-of-{n_chunks}.parquet"
JW_TABLES = [
    "table1.csv",
    "table1.md",
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


rule jw_correlation:
    """Kendall τ-b between attention, gradient and LOO importance, per instance (J&W §4.1, Alg. 1)."""
    input:
        importance=lambda wc: [importance_path(wc.dataset, wc.model, m) for m in JW["correlation"]["methods"]],
        examples="results/datasets/{dataset}/examples.parquet",
        vocab="results/datasets/{dataset}/vocab.json",
    output:
        "results/audits/{dataset}/{model}/jw_correlation.parquet",
    log:
        "logs/jw_correlation/{dataset}/{model}.log",
    benchmark:
        "benchmarks/jw_correlation/{dataset}/{model}.tsv"
    conda:
        "../envs/attnaudit.yaml"
    params:
        options=lambda wc: jw_options(wc.dataset, "correlation"),
        dataset_dir=subpath(input.examples, parent=True),
        split=AUDITS["split"],
    shell:
        "python -m attnaudit jain-wallace correlation --importance {input.importance:q}"
        " --dataset-dir {params.dataset_dir:q} --split {params.split} --options {params.options:q}"
        " --out {output:q} > {log:q} 2>&1"


rule jw_permutation:
    """100 seeded permutations of α̂ through the decoder with h fixed; median Δŷ per instance (J&W Alg. 2)."""
    input:
        model="results/models/{dataset}/{model}/model.pt",
        examples="results/datasets/{dataset}/examples.parquet",
        vocab="results/datasets/{dataset}/vocab.json",
    output:
        temp("results/audits/{dataset}/{model}/jw_permutation/chunk-{chunk}-of-{n_chunks}.parquet"),
    log:
        "logs/jw_permutation/{dataset}/{model}/chunk-{chunk}-of-{n_chunks}.log",
    benchmark:
        "benchmarks/jw_permutation/{dataset}/{model}/chunk-{chunk}-of-{n_chunks}.tsv"
    conda:
        "../envs/attnaudit.yaml"
    resources:
        gpu=0,
    params:
        audit="permutation",
        options=lambda wc: jw_options(wc.dataset, "permutation"),
        dataset_dir=subpath(input.examples, parent=True),
        model_dir=subpath(input.model, parent=True),
        split=AUDITS["split"],
        batch_size=AUDITS["batch_size"],
        max_batch_tokens=as_json(AUDITS["max_batch_tokens"]),
        seed=config["seed"],
    shell:
        "python -m attnaudit jain-wallace audit {params.audit} --dataset-dir {params.dataset_dir:q}"
        " --model-dir {params.model_dir:q} --out {output:q} --chunk {wildcards.chunk} --n-chunks {wildcards.n_chunks}"
        " --split {params.split} --batch-size {params.batch_size} --max-batch-tokens {params.max_batch_tokens:q}"
        " --seed {params.seed} --options {params.options:q}"
        " --threads {threads} > {log:q} 2>&1"


use rule jw_permutation as jw_adversarial with:
    output:
        temp("results/audits/{dataset}/{model}/jw_adversarial/chunk-{chunk}-of-{n_chunks}.parquet"),
    log:
        "logs/jw_adversarial/{dataset}/{model}/chunk-{chunk}-of-{n_chunks}.log",
    benchmark:
        "benchmarks/jw_adversarial/{dataset}/{model}/chunk-{chunk}-of-{n_chunks}.tsv"
    params:
        audit="adversarial",
        options=lambda wc: jw_options(wc.dataset, "adversarial"),
        dataset_dir=subpath(input.examples, parent=True),
        model_dir=subpath(input.model, parent=True),
        split=AUDITS["split"],
        batch_size=AUDITS["batch_size"],
        max_batch_tokens=as_json(AUDITS["max_batch_tokens"]),
        seed=config["seed"],


rule jw_gather:
    """Concatenate one model's audit chunks in instance order (identical whatever the chunk count)."""
    input:
        gathered_chunks(JW_CHUNK),
    output:
        "results/audits/{dataset}/{model}/{audit}.parquet",
    log:
        "logs/jw_gather/{dataset}/{model}/{audit}.log",
    benchmark:
        "benchmarks/jw_gather/{dataset}/{model}/{audit}.tsv"
    wildcard_constraints:
        audit="jw_permutation|jw_adversarial",
    conda:
        "../envs/attnaudit.yaml"
    shell:
        "python -m attnaudit jain-wallace gather --out {output:q} {input:q} > {log:q} 2>&1"


rule jw_tables:
    """One dataset's per model × predicted class summaries (J&W Table 2 layout) and ours next to J&W Table 2."""
    input:
        jw_run_files,
    output:
        [f"results/tables/jain_wallace/{{dataset}}/{name}" for name in JW_TABLES],
    log:
        "logs/jw_tables/{dataset}.log",
    benchmark:
        "benchmarks/jw_tables/{dataset}.tsv"
    conda:
        "../envs/attnaudit.yaml"
    params:
        runs=lambda wc: as_json(jw_runs(wc.dataset)),
        options=lambda wc: jw_table_options(wc.dataset),
        out_dir=lambda wc, output: Path(output[0]).parent,
    shell:
        "python -m attnaudit jain-wallace tables --runs {params.runs:q} --out-dir {params.out_dir:q}"
        " --options {params.options:q} > {log:q} 2>&1"


combined_tables("jain_wallace", JW_REPORT, {name: jw_table_datasets() for name in JW_TABLES})


rule jw_figures:
    """J&W Figs. 2–8 for one dataset, one panel per model (J&W's base variants)."""
    input:
        correlation=lambda wc: [jw_audit_path(wc.dataset, m, "jw_correlation") for m in jw_figure_models(wc.dataset)],
        permutation=lambda wc: [jw_audit_path(wc.dataset, m, "jw_permutation") for m in jw_figure_models(wc.dataset)],
        adversarial=lambda wc: [jw_audit_path(wc.dataset, m, "jw_adversarial") for m in jw_figure_models(wc.dataset)],
        manifest=lambda wc: manifest_path(wc.dataset),
    output:
        **{
            name: report(
                f"results/figures/jain_wallace/{{dataset}}/{name}.png",
                caption=f"../report/jain_wallace/{name}.rst",
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
        models=lambda wc: " ".join(jw_figure_models(wc.dataset)),
        variants=lambda wc: as_json({m: variant(wc.dataset, m) for m in jw_figure_models(wc.dataset)}),
        out_dir=subpath(output.fig2_tau_gradient, parent=True),
    shell:
        "python -m attnaudit jain-wallace figures --dataset {wildcards.dataset} --models {params.models}"
        " --correlation {input.correlation:q} --permutation {input.permutation:q}"
        " --adversarial {input.adversarial:q} --variants {params.variants:q} --out-dir {params.out_dir:q}"
        " --manifest {input.manifest:q} > {log:q} 2>&1"


rule jw_heatmaps:
    """Original vs adversarial attention over the text with Δŷ (J&W Fig. 1, App. E), self-contained HTML."""
    input:
        adversarial="results/audits/{dataset}/{model}/jw_adversarial.parquet",
        examples="results/datasets/{dataset}/examples.parquet",
        manifest=lambda wc: manifest_path(wc.dataset),
    output:
        report(
            "results/figures/jain_wallace/{dataset}/heatmaps/{model}.html",
            caption="../report/jain_wallace/heatmaps.rst",
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
        options=lambda wc: jw_heatmap_options(wc.dataset),
        dataset_dir=subpath(input.examples, parent=True),
        seed=config["seed"],
    shell:
        "python -m attnaudit jain-wallace heatmaps --dataset {wildcards.dataset} --model {wildcards.model}"
        " --adversarial {input.adversarial:q} --dataset-dir {params.dataset_dir:q} --out {output:q}"
        " --options {params.options:q} --seed {params.seed} --manifest {input.manifest:q} > {log:q} 2>&1"


# the audit card's part of this stage (rules/cards.smk gathers the summaries of every stage registered here)
card_summary(
    "jain_wallace",
    "Jain & Wallace (2019)",
    audited_models,
    explorer=jw_explorer_sources,
    not_run=jw_not_run,
)


rule jw_card_summary:
    """J&W §4.1–4.2: τ with bootstrap CIs, permutation and adversary summaries of one model for its audit card."""
    input:
        unpack(jw_summary_inputs),
    output:
        "results/summaries/jain_wallace/{dataset}/{model}.json",
    log:
        "logs/jw_card_summary/{dataset}/{model}.log",
    benchmark:
        "benchmarks/jw_card_summary/{dataset}/{model}.tsv"
    conda:
        "../envs/attnaudit.yaml"
    params:
        inputs=summary_inputs_json,
        options=lambda wc: as_json(card_options(wc.dataset, "jain_wallace")),
    shell:
        "python -m attnaudit cards summary --stage jain_wallace --dataset {wildcards.dataset} --model {wildcards.model}"
        " --inputs {params.inputs:q} --options {params.options:q} --out {output:q} > {log:q} 2>&1"
