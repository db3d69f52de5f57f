# Tutek & Šnajder (2020): do regularisers that keep hidden states close to their words make attention faithful?
# Post-hoc fragility (§4.1, Table 1), mutual information of clustered embeddings and hidden states (§3.4, Table 2),
# per-token prediction probabilities (§5, Eq. 9, Table 3, Fig. 2), imitating adversaries against regularised models
# (§4.3, Fig. 1), layers (App. B, Table 6), and — beyond the paper — the J&W and B&F audits of the same models.

TS_REPORT = "Tutek & Šnajder 2020"
TS_TABLES = "results/tables/tutek_snajder"
TS_TABLE_NAMES = [
    "table1_fragility",
    "table2_mutual_information",
    "table3_token_probability",
    "table6_layers",
    "directions",
]
# a typo in tutek_snajder.models would leave models out of T&Š's tables without a word: say so, stop if none is left
warn_unselected("tutek_snajder", TS["models"], None, TS_DATASETS)
check_stage_selects("tutek_snajder", {"models": TS["models"]}, TS_DATASETS, ts_models)
TS_MODEL_INPUT = {
    "model": "results/models/{dataset}/{model}/model.pt",
    "examples": "results/datasets/{dataset}/examples.parquet",
    "vocab": "results/datasets/{dataset}/vocab.json",
}


rule ts_fragility:
    """Test F1 with the trained, a uniform and permuted attention, the model unchanged (T&Š §4.1)."""
    input:
        **TS_MODEL_INPUT,
    output:
        "results/audits/{dataset}/{model}/ts_fragility.json",
    log:
        "logs/ts_fragility/{dataset}/{model}.log",
    benchmark:
        "benchmarks/ts_fragility/{dataset}/{model}.tsv"
    conda:
        "../envs/attnaudit.yaml"
    params:
        dataset_dir=subpath(input.examples, parent=True),
        model_dir=subpath(input.model, parent=True),
        split=AUDITS["split"],
        n_permutations=TS["fragility"]["n_permutations"],
        batch_size=TS["fragility"]["batch_size"] or AUDITS["batch_size"],
        seed=config["seed"],
    shell:
        "python -m attnaudit tutek-snajder fragility --dataset-dir {params.dataset_dir:q} --model-dir {params.model_dir:q}"
        " --split {params.split} --n-permutations {params.n_permutations} --seed {params.seed}"
        " --batch-size {params.batch_size} --threads {threads} --out {output:q} > {log:q} 2>&1"


rule ts_mutual_information:
    """MI between k-means clusters of input embeddings and hidden states of 1,000 MF / RS words (T&Š §3.4)."""
    input:
        **TS_MODEL_INPUT,
    output:
        "results/audits/{dataset}/{model}/ts_mutual_information.json",
    log:
        "logs/ts_mutual_information/{dataset}/{model}.log",
    benchmark:
        "benchmarks/ts_mutual_information/{dataset}/{model}.tsv"
    conda:
        "../envs/attnaudit.yaml"
    params:
        dataset_dir=subpath(input.examples, parent=True),
        model_dir=subpath(input.model, parent=True),
        mi=dict(sorted(TS["mutual_information"].items())),  # a stable order: params changes are tracked
        batch_size=TS["mutual_information"]["batch_size"] or AUDITS["batch_size"],
        seed=config["seed"],
    shell:
        "python -m attnaudit tutek-snajder mutual-information --dataset-dir {params.dataset_dir:q}"
        " --model-dir {params.model_dir:q} --n-words {params.mi[n_words]} --k {params.mi[k]}"
        " --kmeans-batch {params.mi[kmeans_batch]} --max-points {params.mi[max_points]} --n-init {params.mi[n_init]}"
        " --unigram-power {params.mi[unigram_power]} --seed {params.seed} --batch-size {params.batch_size}"
        " --threads {threads} --out {output:q} > {log:q} 2>&1"


rule ts_token_probability:
    """Per-token prediction probabilities: the decoder on each hidden state alone (T&Š §5, Eq. 9)."""
    input:
        **TS_MODEL_INPUT,
    output:
        "results/audits/{dataset}/{model}/ts_token_probability.parquet",
    log:
        "logs/ts_token_probability/{dataset}/{model}.log",
    benchmark:
        "benchmarks/ts_token_probability/{dataset}/{model}.tsv"
    conda:
        "../envs/attnaudit.yaml"
    params:
        dataset_dir=subpath(input.examples, parent=True),
        model_dir=subpath(input.model, parent=True),
        split=AUDITS["split"],
        batch_size=AUDITS["batch_size"],
    shell:
        "python -m attnaudit tutek-snajder token-probability --dataset-dir {params.dataset_dir:q}"
        " --model-dir {params.model_dir:q} --split {params.split} --batch-size {params.batch_size}"
        " --threads {threads} --out {output:q} > {log:q} 2>&1"


rule ts_tables:
    """T&Š Tables 1, 2, 3 and 6 of one dataset with the paper's numbers beside ours, and whether its claims hold."""
    input:
        ts_run_files("ts_tables"),
    output:
        [f"{TS_TABLES}/{{dataset}}/{name}.{ext}" for name in TS_TABLE_NAMES for ext in ("csv", "md")],
    log:
        "logs/ts_tables/{dataset}.log",
    benchmark:
        "benchmarks/ts_tables/{dataset}.tsv"
    conda:
        "../envs/attnaudit.yaml"
    params:
        runs=ts_runs_param("ts_tables"),
        f1=TS["tables"]["f1"],
        out_dir=lambda wc, output: Path(output[0]).parent,
    shell:
        "python -m attnaudit tutek-snajder tables --runs {params.runs:q} --out-dir {params.out_dir:q}"
        " --f1 {params.f1} > {log:q} 2>&1"


rule ts_figures:
    """ΔF1 per regulariser, T&Š Fig. 2 (per-token probability) and Fig. 1 (imitating adversaries, JSD vs TVD)."""
    input:
        ts_run_files("ts_figures"),
        imitations=ts_imitations,
        examples="results/datasets/{dataset}/examples.parquet",  # Fig. 2's tokens
        manifest=lambda wc: manifest_path(wc.dataset),
    output:
        fragility=report(
            "results/figures/tutek_snajder/{dataset}/fragility.png",
            caption="../report/tutek_snajder/fragility_figure.rst",
            category=TS_REPORT,
            subcategory="{dataset}",
        ),
        token_probability=report(
            "results/figures/tutek_snajder/{dataset}/fig2_token_probability.png",
            caption="../report/tutek_snajder/fig2_token_probability.rst",
            category=TS_REPORT,
            subcategory="{dataset}",
        ),
        adversary=report(
            "results/figures/tutek_snajder/{dataset}/fig1_adversary.png",
            caption="../report/tutek_snajder/fig1_adversary.rst",
            category=TS_REPORT,
            subcategory="{dataset}",
        ),
    log:
        "logs/ts_figures/{dataset}.log",
    benchmark:
        "benchmarks/ts_figures/{dataset}.tsv"
    conda:
        "../envs/attnaudit.yaml"
    params:
        runs=ts_runs_param("ts_figures"),
        figures=dict(sorted(TS["figures"].items())),
        f1=TS["tables"]["f1"],
    shell:
        "python -m attnaudit tutek-snajder figures --runs {params.runs:q} --out-fragility {output.fragility:q}"
        " --out-token-probability {output.token_probability:q} --out-adversary {output.adversary:q}"
        " --imitations {input.imitations:q} --n-examples {params.figures[n_examples]}"
        " --max-tokens {params.figures[max_tokens]} --dataset {wildcards.dataset} --f1 {params.f1}"
        " --manifest {input.manifest:q} > {log:q} 2>&1"


rule ts_summary:
    """Beyond the paper: τ(attention, LOO), ε-max JSD and attention's AOPC rank per regulariser (J&W, B&F audits),
    beside T&Š's own Pm. ΔF1, MI and per-token probability."""
    input:
        ts_run_files("ts_summary"),
    output:
        csv=f"{TS_TABLES}/{{dataset}}/summary.csv",
        md=f"{TS_TABLES}/{{dataset}}/summary.md",
    log:
        "logs/ts_summary/{dataset}.log",
    benchmark:
        "benchmarks/ts_summary/{dataset}.tsv"
    conda:
        "../envs/attnaudit.yaml"
    params:
        runs=ts_runs_param("ts_summary"),
        f1=TS["tables"]["f1"],
    shell:
        "python -m attnaudit tutek-snajder summary --runs {params.runs:q} --out-csv {output.csv:q}"
        " --out-md {output.md:q} --f1 {params.f1} > {log:q} 2>&1"


combined_tables(
    "tutek_snajder",
    TS_REPORT,
    {f"{name}.{ext}": TS_DATASETS for name in [*TS_TABLE_NAMES, "summary"] for ext in ("csv", "md")},
)


# the audit card's part of this stage (rules/cards.smk gathers the summaries of every stage registered here)
card_summary(
    "tutek_snajder",
    "Tutek & Šnajder (2020)",
    ts_card_models,
    explorer=ts_explorer_sources,
    not_run=ts_not_run,
)


rule ts_card_summary:
    """T&Š §4.1, §3.4, §5: fragility, MI and per-token probability of one model for its audit card."""
    input:
        unpack(ts_summary_inputs),
    output:
        "results/summaries/tutek_snajder/{dataset}/{model}.json",
    log:
        "logs/ts_card_summary/{dataset}/{model}.log",
    benchmark:
        "benchmarks/ts_card_summary/{dataset}/{model}.tsv"
    conda:
        "../envs/attnaudit.yaml"
    params:
        inputs=summary_inputs_json,
        options=lambda wc: as_json(card_options(wc.dataset, "tutek_snajder")),
    shell:
        "python -m attnaudit cards summary --stage tutek_snajder --dataset {wildcards.dataset} --model {wildcards.model}"
        " --inputs {params.inputs:q} --options {params.options:q} --out {output:q} > {log:q} 2>&1"
