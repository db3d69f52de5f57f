# Wiegreffe & Pinter (2019): the baselines J&W's adversary lacked — uniform attention (§3.2, Table 2), variance over
# seeds (§3.3, Fig. 3, beside J&W's ε-max adversaries), the diagnostic MLP guided by each attention (§3.4) and the
# model trained to be consistently adversarial (§4, a λ sweep). The models come from the model sheet; which
# variant plays which part is wiegreffe_pinter.roles (checked in common.smk: wp_roles).

WP_REPORT = "Wiegreffe & Pinter 2019"
WP_TABLES = "results/tables/wiegreffe_pinter"


rule wp_uniform:
    """Base vs uniform-attention F1 over seeds next to J&W's and W&P's numbers (W&P §3.2, Table 2)."""
    input:
        wp_run_metrics(wp_uniform_runs),
    output:
        csv=f"{WP_TABLES}/{{dataset}}/table2_uniform.csv",
        md=f"{WP_TABLES}/{{dataset}}/table2_uniform.md",
    log:
        "logs/wp_uniform/{dataset}.log",
    benchmark:
        "benchmarks/wp_uniform/{dataset}.tsv"
    conda:
        "../envs/attnaudit.yaml"
    params:
        runs=lambda wc: as_json(wp_uniform_runs(wc.dataset)),
        options=as_json(wp_options("uniform", "spread_k")),
    shell:
        "python -m attnaudit wiegreffe-pinter uniform --runs {params.runs:q} --options {params.options:q}"
        " --out-csv {output.csv:q} --out-md {output.md:q} > {log:q} 2>&1"


rule wp_seed_variance:
    """Per test instance, JSD of each seed's attention and TVD of its prediction to the base model's (W&P §3.3)."""
    input:
        base=lambda wc: f"{model_dir(wc.dataset, wp_roles(wc.dataset)['base'])}/predictions.parquet",
        seeds=lambda wc: [f"{model_dir(wc.dataset, m)}/predictions.parquet" for m in wp_roles(wc.dataset)["seeds"]],
        adversarial=lambda wc: jw_audit_path(wc.dataset, wp_roles(wc.dataset)["base"], "jw_adversarial"),
        examples="results/datasets/{dataset}/examples.parquet",
        vocab="results/datasets/{dataset}/vocab.json",
    output:
        "results/audits/{dataset}/wp_seed_variance.parquet",
    log:
        "logs/wp_seed_variance/{dataset}.log",
    benchmark:
        "benchmarks/wp_seed_variance/{dataset}.tsv"
    conda:
        "../envs/attnaudit.yaml"
    params:
        options=as_json(wp_options("seeds", "min_seeds")),
        dataset_dir=subpath(input.examples, parent=True),
        split=AUDITS["split"],
    shell:
        "python -m attnaudit wiegreffe-pinter seed-variance --base-predictions {input.base:q}"
        " --seed-predictions {input.seeds:q} --dataset-dir {params.dataset_dir:q} --adversarial {input.adversarial:q}"
        " --split {params.split} --options {params.options:q} --out {output:q} > {log:q} 2>&1"


rule wp_seed_figures:
    """W&P Fig. 3 in J&W Fig. 8's plane: seeds and J&W's adversaries, same axes; JSD vs TVD scatter."""
    input:
        seed_variance="results/audits/{dataset}/wp_seed_variance.parquet",
        manifest=lambda wc: manifest_path(wc.dataset),
    output:
        violin=report(
            "results/figures/wiegreffe_pinter/{dataset}/fig3_seed_variance.png",
            caption="../report/wiegreffe_pinter/fig3_seed_variance.rst",
            category=WP_REPORT,
            subcategory="{dataset}",
        ),
        scatter=report(
            "results/figures/wiegreffe_pinter/{dataset}/fig3_seed_variance_scatter.png",
            caption="../report/wiegreffe_pinter/fig3_seed_variance_scatter.rst",
            category=WP_REPORT,
            subcategory="{dataset}",
        ),
    log:
        "logs/wp_seed_figures/{dataset}.log",
    benchmark:
        "benchmarks/wp_seed_figures/{dataset}.tsv"
    conda:
        "../envs/attnaudit.yaml"
    params:
        options=as_json(wp_options("seeds", "attention_bins")),
    shell:
        "python -m attnaudit wiegreffe-pinter seed-figures --seed-variance {input.seed_variance:q}"
        " --out-violin {output.violin:q} --out-scatter {output.scatter:q} --title {wildcards.dataset}"
        " --options {params.options:q} --manifest {input.manifest:q} > {log:q} 2>&1"


rule wp_seed_table:
    """Mean seed JSD vs mean J&W adversarial JSD; how often the adversary lies beyond every seed."""
    input:
        "results/audits/{dataset}/wp_seed_variance.parquet",
    output:
        csv=f"{WP_TABLES}/{{dataset}}/seed_variance.csv",
        md=f"{WP_TABLES}/{{dataset}}/seed_variance.md",
    log:
        "logs/wp_seed_table/{dataset}.log",
    benchmark:
        "benchmarks/wp_seed_table/{dataset}.tsv"
    conda:
        "../envs/attnaudit.yaml"
    params:
        inputs=lambda wc, input: as_json(
            [
                {
                    "dataset": wc.dataset,
                    "model": wp_roles(wc.dataset)["base"],
                    "seed_variance": str(input[0]),
                    "n_seeds": len(wp_roles(wc.dataset)["seeds"]),
                }
            ]
        ),
    shell:
        "python -m attnaudit wiegreffe-pinter seed-table --inputs {params.inputs:q} --out-csv {output.csv:q}"
        " --out-md {output.md:q} > {log:q} 2>&1"


rule wp_diagnostic:
    """The diagnostic MLP's F1 with each guide (uniform, trained, base LSTM, adversary) next to W&P (§3.4)."""
    input:
        wp_run_metrics(wp_diagnostic_runs),
    output:
        csv=f"{WP_TABLES}/{{dataset}}/diagnostic_mlp.csv",
        md=f"{WP_TABLES}/{{dataset}}/diagnostic_mlp.md",
    log:
        "logs/wp_diagnostic/{dataset}.log",
    benchmark:
        "benchmarks/wp_diagnostic/{dataset}.tsv"
    conda:
        "../envs/attnaudit.yaml"
    params:
        runs=lambda wc: as_json(wp_diagnostic_runs(wc.dataset)),
    shell:
        "python -m attnaudit wiegreffe-pinter diagnostic --runs {params.runs:q} --out-csv {output.csv:q}"
        " --out-md {output.md:q} > {log:q} 2>&1"


rule wp_imitation:
    """An imitating model against its teacher on the test split: JSD of attention, TVD of predictions, F1 (§4)."""
    input:
        student="results/models/{dataset}/{model}/predictions.parquet",
        teacher=lambda wc: f"{model_dir(wc.dataset, variant(wc.dataset, wc.model)['teacher'])}/predictions.parquet",
        examples="results/datasets/{dataset}/examples.parquet",
        vocab="results/datasets/{dataset}/vocab.json",
    output:
        "results/audits/{dataset}/{model}/wp_imitation.json",
    log:
        "logs/wp_imitation/{dataset}/{model}.log",
    benchmark:
        "benchmarks/wp_imitation/{dataset}/{model}.tsv"
    conda:
        "../envs/attnaudit.yaml"
    params:
        lam=lambda wc: variant(wc.dataset, wc.model)["lambda"],
        teacher=lambda wc: variant(wc.dataset, wc.model)["teacher"],
        dataset_dir=subpath(input.examples, parent=True),
        split=AUDITS["split"],
    shell:
        "python -m attnaudit wiegreffe-pinter imitation --student-predictions {input.student:q}"
        " --teacher-predictions {input.teacher:q} --dataset-dir {params.dataset_dir:q} --split {params.split}"
        " --lambda {params.lam} --student {wildcards.model} --teacher {params.teacher} --dataset {wildcards.dataset}"
        " --out {output:q} > {log:q} 2>&1"


rule wp_adversary:
    """JSD vs TVD per λ of the consistently adversarial models, with the seed-variance point and J&W's post-hoc
    adversary in the same axes (W&P §4)."""
    input:
        imitations=lambda wc: [wp_imitation_path(wc.dataset, m) for m in wp_roles(wc.dataset)["adversaries"]],
        seed_variance="results/audits/{dataset}/wp_seed_variance.parquet",
        adversarial=lambda wc: jw_audit_path(wc.dataset, wp_roles(wc.dataset)["base"], "jw_adversarial"),
    output:
        csv=f"{WP_TABLES}/{{dataset}}/adversary.csv",
        png=report(
            "results/figures/wiegreffe_pinter/{dataset}/fig_adversary_jsd_tvd.png",
            caption="../report/wiegreffe_pinter/fig_adversary_jsd_tvd.rst",
            category=WP_REPORT,
            subcategory="{dataset}",
        ),
    log:
        "logs/wp_adversary/{dataset}.log",
    benchmark:
        "benchmarks/wp_adversary/{dataset}.tsv"
    conda:
        "../envs/attnaudit.yaml"
    shell:
        "python -m attnaudit wiegreffe-pinter adversary --imitations {input.imitations:q}"
        " --seed-variance {input.seed_variance:q} --adversarial {input.adversarial:q} --out-csv {output.csv:q}"
        " --out-png {output.png:q} --title {wildcards.dataset} > {log:q} 2>&1"


combined_tables(
    "wiegreffe_pinter",
    WP_REPORT,
    {
        f"{name}.{ext}": WP_DATASETS
        for name in ("table2_uniform", "seed_variance", "diagnostic_mlp", "adversary")
        for ext in ("csv", "md")
        if (name, ext) != ("adversary", "md")
    },
)


# the audit card's part of this stage (rules/cards.smk gathers the summaries of every stage registered here)
card_summary(
    "wiegreffe_pinter",
    "Wiegreffe & Pinter (2019)",
    wp_card_models,
    not_run=wp_not_run,
)


rule wp_card_summary:
    """W&P §3.2–3.3 for the base model's card (uniform twin vs seed spread, adversaries vs seed variance); W&P §4 for
    an imitating model's (JSD of attention and TVD of predictions to its teacher's)."""
    input:
        unpack(wp_summary_inputs),
    output:
        "results/summaries/wiegreffe_pinter/{dataset}/{model}.json",
    log:
        "logs/wp_card_summary/{dataset}/{model}.log",
    benchmark:
        "benchmarks/wp_card_summary/{dataset}/{model}.tsv"
    conda:
        "../envs/attnaudit.yaml"
    params:
        inputs=summary_inputs_json,
        options=wp_card_options,
    shell:
        "python -m attnaudit cards summary --stage wiegreffe_pinter --dataset {wildcards.dataset} --model {wildcards.model}"
        " --inputs {params.inputs:q} --options {params.options:q} --out {output:q} > {log:q} 2>&1"
