# attnaudit: raw corpora → datasets → embeddings → attention classifiers → audits. Wiring only.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config.yaml"


include: "rules/common.smk"
include: "rules/corpora.smk"
include: "rules/tokenise.smk"
include: "rules/embeddings.smk"
include: "rules/train.smk"
include: "rules/jain_wallace.smk"
include: "rules/saliency.smk"


rule all:
    default_target: True
    input:
        all_targets(),
        jain_wallace_targets(),
        saliency_targets(),
