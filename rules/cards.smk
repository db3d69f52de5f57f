# Audit cards (one per model, at the end of the DAG): each audit stage registers its summary rule with
# card_summary() in its own rules file; the card gathers the summaries that stage list declares for the model and
# renders them generically, so a new stage adds to the card without editing the card code.

CARDS_REPORT = "Audit cards"


rule card:
    """One model's audit card: test F1, every stage summary (bootstrap CIs), the verdict by its stated rule."""
    input:
        unpack(card_inputs),
    output:
        json="results/cards/{dataset}/{model}.json",
        html=report(
            "results/cards/{dataset}/{model}.html",
            caption="../report/cards/card.rst",
            category=CARDS_REPORT,
            subcategory="{dataset}",
            labels={"model": "{model}"},
        ),
        md="results/cards/{dataset}/{model}.md",
    log:
        "logs/card/{dataset}/{model}.log",
    benchmark:
        "benchmarks/card/{dataset}/{model}.tsv"
    conda:
        "../envs/attnaudit.yaml"
    params:
        summaries=lambda wc: as_json(card_summaries(wc.dataset, wc.model)),
        not_run=lambda wc: as_json(card_not_run(wc.dataset, wc.model)),
        fields=lambda wc: as_json(variant(wc.dataset, wc.model)),
    shell:
        "python -m attnaudit cards card --dataset {wildcards.dataset} --model {wildcards.model}"
        " --metrics {input.metrics:q} --manifest {input.manifest:q} --summaries {params.summaries:q}"
        " --not-run {params.not_run:q} --fields {params.fields:q} --out-json {output.json:q}"
        " --out-html {output.html:q} --out-md {output.md:q} > {log:q} 2>&1"
