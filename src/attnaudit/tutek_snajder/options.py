"""Options of the Tutek & Šnajder (2020) audits: the defaults here mirror the ``tutek_snajder:`` block of
``schemas/config.schema.yaml`` (the schema documents every key), so the CLI runs without Snakemake too."""

from __future__ import annotations

from attnaudit import AttnauditError
from attnaudit.io import resolve_options

DEFAULTS: dict = {
    "fragility": {
        # random permutations of the trained attention per instance (§4.1 "a random permutation"; T&Š give no
        # count: each permutation index makes one permuted test set, whose F1 we average)
        "n_permutations": 100,
        "batch_size": None,  # instances per batch; null: audits.batch_size
    },
    "mutual_information": {
        "n_words": 1000,  # vocabulary sample per word set, MF and RS (§3.4)
        "k": 1000,  # clusters per space (§3.4)
        # MiniBatchKMeans batch (§3.4: 100, also scikit-learn's default in 2020). A larger batch is not an
        # equivalent shortcut: it changes the MI by far more than 0.05 nats (see mutual_information.py)
        "kmeans_batch": 100,
        "n_init": 3,  # k-means++ restarts: scikit-learn's MiniBatchKMeans default in 2020 (1 since 1.4)
        "max_points": 1_000_000,  # at most this many occurrences per word set (§3.4: "at most 1M")
        "unigram_power": 0.75,  # RS samples words from the unigram distribution raised to 3/4 (§3.4, fn. 6)
        "batch_size": None,  # instances per encoder batch while gathering; null: audits.batch_size
    },
    "figures": {
        "n_examples": 3,  # test instances in the per-token probability figure (Fig. 2; App. D shows a few)
        "max_tokens": 30,  # only instances this short, so the words on the x axis stay readable
    },
    "tables": {
        # which F1 the tables compare with T&Š: the positive class (their Diabetes remark, "every modification
        # gives F1 = 0", only fits a positive-class F1) or macro
        "f1": "positive",
    },
}


def resolve(options: dict | None) -> dict:
    """Defaults overridden by ``options`` (one level deep per section); unknown keys are rejected by name."""
    merged = resolve_options("tutek_snajder", DEFAULTS, options)
    if merged["tables"]["f1"] not in ("positive", "macro"):
        raise AttnauditError("tutek_snajder.tables.f1 must be 'positive' or 'macro'")
    if merged["fragility"]["n_permutations"] < 1:
        raise AttnauditError("tutek_snajder.fragility.n_permutations must be ≥ 1")
    return merged
