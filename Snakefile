# attnaudit: raw corpora → datasets → embeddings → models (the model sheet) → importance scores → the four papers'
# audits → tables and figures. Wiring only; helpers live in rules/common.smk.
from snakemake.utils import min_version

from attnaudit.config_errors import check_config_files, config_errors_end_the_run

min_version("9.0")

# a config error ends the run with its message alone (file:line: config <key>: ...), not under a traceback
with config_errors_end_the_run():
    check_config_files(["config.yaml"])  # before Snakemake reads it: its syntax error names neither file nor line

    configfile: "config.yaml"

    include: "rules/common.smk"
    include: "rules/corpora.smk"
    include: "rules/tokenise.smk"
    include: "rules/embeddings.smk"
    include: "rules/train.smk"
    include: "rules/importance.smk"
    include: "rules/jain_wallace.smk"
    include: "rules/saliency.smk"
    include: "rules/wiegreffe_pinter.smk"
    include: "rules/tutek_snajder.smk"
    include: "rules/tables.smk"
    include: "rules/cards.smk"
    include: "rules/explorer.smk"

    keep_freed_memory_in_jobs()
    stop_reevaluation_timers_at_exit()
    check_profile_rule_names()
    check_slurm_placeholders()


# gathers and tables take seconds: run them where Snakemake runs, not as cluster jobs
localrules:
    importance_gather,
    jw_gather,
    jw_tables,
    saliency_gather,
    saliency_tables,
    saliency_planted,
    wp_uniform,
    wp_seed_table,
    wp_diagnostic,
    ts_tables,
    ts_summary,
    jw_card_summary,
    saliency_card_summary,
    wp_card_summary,
    ts_card_summary,
    card,
    explorer,


rule all:
    default_target: True
    input:
        all_targets(),
        jain_wallace_targets(),
        saliency_targets(),
        wiegreffe_pinter_targets(),
        tutek_snajder_targets(),
        cards_targets(),
