# The offline explorer: a static site (results/explorer/index.html, no server, no network) over every model's card
# and its test instances, coloured by attention, each saliency method, the best adversarial attention and T&Š's
# per-token probability; instance data paged into JS files loaded on demand (see attnaudit.explorer).


rule explorer:
    """The explorer site: index of datasets × models (card numbers), per-model instance lists and paged tokens."""
    input:
        explorer_inputs(),
    output:
        report(
            directory("results/explorer"),
            htmlindex="index.html",
            caption="../report/cards/explorer.rst",
            category=CARDS_REPORT,
            labels={"figure": "explorer"},
        ),
    log:
        "logs/explorer/explorer.log",
    benchmark:
        "benchmarks/explorer/explorer.tsv"
    conda:
        "../envs/attnaudit.yaml"
    params:
        plan=lambda wildcards: as_json(explorer_plan()),  # a function: the templates hold {dataset}, {model}
        options=as_json(EXPLORER),
        split=AUDITS["split"],
    shell:
        "python -m attnaudit explorer build --models {params.plan:q} --split {params.split}"
        " --options {params.options:q} --out-dir {output:q} > {log:q} 2>&1"


# After a run that stopped part way (a failed job; `--keep-going` finishes the others): the explorer over the files
# that exist, in results/explorer-partial; a model without its card gets one from its summaries that exist, the
# missing audits named. Not part of `all`: `snakemake --cores all explorer_partial`.
use rule explorer as explorer_partial with:
    input:
        lambda wildcards: explorer_partial_inputs(),
    output:
        directory("results/explorer-partial"),
    log:
        "logs/explorer/explorer-partial.log",
    benchmark:
        "benchmarks/explorer/explorer-partial.tsv"
