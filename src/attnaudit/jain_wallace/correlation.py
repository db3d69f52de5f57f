"""Correlation audit (J&W §4.1, Algorithm 1, Table 2, Fig. 2, App. C Figs. 6–8).

Per instance: the scores of every importance method in ``correlation.methods`` (read from the importance stage,
which computes each method once per model) and Kendall τ-b with its two-sided p-value (``scipy.stats.kendalltau``,
variant "b", which corrects for ties) for every pair of methods, over the real positions without the sentence
markers (``exclude_markers``, as J&W's code never scores <s>, </s>). Signed scores are ranked by absolute value
when ``absolute`` (the J&W gradient is already an absolute value; LOO TVDs and attention are non-negative).
"""

from __future__ import annotations

import itertools
import logging

import numpy as np
import pandas as pd

from attnaudit import AttnauditError
from attnaudit.data import encode_split, load_examples
from attnaudit.io import read_parquet, write_parquet
from attnaudit.metrics import kendall_tau_rows
from attnaudit.specials import marker_ids

log = logging.getLogger(__name__)


def method_pairs(methods: list[str]) -> list[tuple[str, str]]:
    return list(itertools.combinations(methods, 2))


def pair_name(a: str, b: str) -> str:
    """Table spelling of a pair, e.g. ``attention~gradient``."""
    return f"{a}~{b}"


def content_flags(sequences: list[np.ndarray], markers: tuple[int, ...], exclude_markers: bool) -> list[np.ndarray]:
    """Per instance, the positions that are ranked: real tokens without the markers (all of them if an instance
    has nothing else, or when ``exclude_markers`` is off) — :func:`attnaudit.masks.content_mask` on arrays."""
    flags = []
    for seq in sequences:
        keep = ~np.isin(seq, markers) if exclude_markers and markers else np.ones(len(seq), bool)
        flags.append(keep if keep.any() else np.ones(len(seq), bool))
    return flags


def correlation_frame(scores: dict[str, pd.DataFrame], content: list[np.ndarray], options: dict) -> pd.DataFrame:
    """``scores``: method → its importance frame (rows in instance order); ``content``: ranked positions per row."""
    methods = list(options["methods"])
    first = scores[methods[0]]
    for name in methods[1:]:
        if not np.array_equal(scores[name]["row"].to_numpy(), first["row"].to_numpy()):
            raise AttnauditError(f"importance scores of {name} and {methods[0]} cover different instances")
    rows = first["row"].to_numpy()
    flags = [content[r] for r in rows]
    columns = {
        "id": first["id"].tolist(),
        "row": rows,
        "label": first["label"].to_numpy(),
        "predicted_class": first["predicted"].to_numpy(),
        "n_tokens": first["length"].to_numpy(),
        "n_positions": np.array([f.sum() for f in flags], dtype=np.int64),
    }
    arrays = {}
    for name in methods:
        frame = scores[name]
        values = [np.asarray(v, dtype=np.float32) for v in frame["scores"]]
        columns[name] = values
        absolute = bool(frame["signed"].iloc[0]) and options["absolute"]
        arrays[name] = [np.abs(v.astype(np.float64)) if absolute else v.astype(np.float64) for v in values]
    for a, b in method_pairs(methods):
        ranked = [[arrays[name][i][f] for i, f in enumerate(flags)] for name in (a, b)]
        columns[f"tau_{a}_{b}"], columns[f"p_{a}_{b}"] = kendall_tau_rows(*ranked)
    return pd.DataFrame(columns)


def run(
    importance_paths: list[str], dataset_dir: str, out: str, *, split: str = "test", options: dict | None = None
) -> pd.DataFrame:
    from attnaudit.jain_wallace.options import resolve

    opts = resolve(options)["correlation"]
    scores = {}
    for path in importance_paths:
        frame = read_parquet(path)
        scores[str(frame["method"].iloc[0])] = frame
    missing = [m for m in opts["methods"] if m not in scores]
    if missing:
        raise AttnauditError(f"jain_wallace.correlation.methods: no importance scores given for {missing}")
    examples, vocab = load_examples(dataset_dir)
    encoded = encode_split(examples, vocab, split)
    content = content_flags(encoded.sequences, marker_ids(vocab), opts["exclude_markers"])
    frame = correlation_frame(scores, content, opts)
    write_parquet(out, frame)
    log.info(
        "correlation of %d instances: mean τ %s",
        len(frame),
        ", ".join(f"{a}~{b} {np.nanmean(frame[f'tau_{a}_{b}']):.3f}" for a, b in method_pairs(opts["methods"])),
    )
    return frame
