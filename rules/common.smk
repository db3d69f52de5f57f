# Helpers for the rules: config validation, target lists, model ids, per-branch parameters.
import json
import shlex
from itertools import product
from pathlib import Path

from snakemake.utils import validate

from attnaudit.corpora.registry import get_spec
from attnaudit.modelid import format_model_id, parse_model_id

validate(config, "../schemas/config.schema.yaml")

DATASETS = config["datasets"]
USER_CORPORA = config["corpora"].get("user", {})
GRID_DEFAULTS = {
    "encoders": ["lstm", "cnn", "average"],
    "attentions": ["additive", "dot"],
    "regularisers": ["base"],
    "seeds": [0],
}

# corpora.mirror goes to the corpus stage as --mirror; without it the stage falls back to env ATTNAUDIT_MIRROR
# (read by the package, so CI and clusters can point at a mirror without editing config), then the official URLs.
MIRROR_ARG = (
    f"--mirror {shlex.quote(str(Path(config['corpora']['mirror']).resolve()))}"
    if config["corpora"].get("mirror")
    else ""
)


wildcard_constraints:
    dataset="|".join(DATASETS),
    corpus="[A-Za-z0-9_]+",
    model=r"[a-z]+-[a-z]+-[a-z]+-s\d+",


def dataset_subset(key, names):
    """The datasets a stage audits: ``names`` from config key ``key`` (all datasets if null), each checked."""
    if names is None:
        return list(DATASETS)
    unknown = [n for n in names if n not in DATASETS]
    if unknown:
        raise ValueError(f"config {key}: {unknown} not under datasets: (expected some of {list(DATASETS)})")
    return list(names)


def corpus_of(dataset):
    return DATASETS[dataset]["corpus"]


def corpus_spec(corpus):
    """Registry entry (name, URLs, checksums, J&W defaults) of a built-in or user corpus."""
    return get_spec(corpus, USER_CORPORA)


def as_json(obj):
    return json.dumps(obj, sort_keys=True)


def corpus_options(corpus):
    return config["corpora"].get("options", {}).get(corpus, {})


def tokenise_options(dataset):
    """The corpus registry's J&W defaults, overridden by datasets.<name>.tokenise."""
    defaults = corpus_spec(corpus_of(dataset)).defaults
    keys = ("min_count", "max_tokens", "dev_fraction", "test_fraction", "test_sample")
    return {**{k: defaults[k] for k in keys if k in defaults}, **DATASETS[dataset].get("tokenise", {})}


def embedding_options(dataset):
    return DATASETS[dataset].get("embeddings", {})


def model_ids(dataset):
    """Model ids of a dataset's grid: the product of each block's lists, blocks united in order."""
    blocks = DATASETS[dataset].get("grid", {})
    ids = {}
    for block in blocks if isinstance(blocks, list) else [blocks]:
        grid = {**GRID_DEFAULTS, **block}
        variants = product(grid["encoders"], grid["attentions"], grid["regularisers"], grid["seeds"])
        ids.update((format_model_id(*variant), None) for variant in variants)
    return list(ids)


def train_spec(dataset, model):
    """Hyper-parameters of one branch, most specific last: train < train_per_encoder.<encoder>
    < datasets.<name>.train < datasets.<name>.train_per_encoder.<encoder>."""
    variant = parse_model_id(model)
    encoder = variant["encoder"]
    defaults = corpus_spec(corpus_of(dataset)).defaults
    return {
        "class_weighting": defaults.get("class_weighting", False),
        **config.get("train", {}),
        **config.get("train_per_encoder", {}).get(encoder, {}),
        **DATASETS[dataset].get("train", {}),
        **DATASETS[dataset].get("train_per_encoder", {}).get(encoder, {}),
        **variant,
    }


def model_dirs():
    return [f"results/models/{d}/{m}" for d in DATASETS for m in model_ids(d)]


def all_targets():
    targets = [f"results/datasets/{d}/stats.json" for d in DATASETS]
    targets += [f"results/embeddings/{d}/coverage.json" for d in DATASETS]
    targets += [f"{m}/metrics.json" for m in model_dirs()]
    return targets


# -- audits (shared by every audit stage) ---------------------------------------------------------------------
AUDITS = config.get("audits", {})


def audit_chunks(dataset):
    """Instance chunks for one dataset's audits: audits.chunks_per_dataset.<name>, else audits.chunks."""
    return AUDITS.get("chunks_per_dataset", {}).get(dataset, AUDITS.get("chunks", 2))


def chunk_paths(pattern, dataset, **wildcards):
    """Expand a per-chunk path pattern containing {chunk} and {n_chunks} for one dataset."""
    n = audit_chunks(dataset)
    return [pattern.format(dataset=dataset, chunk=i, n_chunks=n, **wildcards) for i in range(n)]
