"""Ground truth on the planted-token corpus: the one setting where "faithful" has a right answer.

The label of a planted document is decided by its marker words, whose positions are known (``important``). For
every method: precision@k = |top-k candidates ∩ planted positions| / k, with k the number of planted tokens of
the instance (``n_planted``, i.e. R-precision) and any configured fixed k (capped at the candidate count).
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import torch

from attnaudit.data import load_examples
from attnaudit.importance import METHODS
from attnaudit.importance._stage import read_scores
from attnaudit.saliency.agreement import candidates_of_split
from attnaudit.saliency.ranking import (
    RANKINGS,
    k_tokens,
    rank_positions,
    ranking_key,
    scores_by_row,
    stack_rows,
    undefined_rankings,
)

log = logging.getLogger(__name__)


def planted_positions(dataset_dir: str, split: str) -> dict[int, np.ndarray]:
    examples, _ = load_examples(dataset_dir)
    if "important" not in examples.columns:
        raise ValueError(f"{dataset_dir}/examples.parquet has no 'important' column: not a planted dataset")
    rows = examples[examples["split"] == split].reset_index(drop=True)
    return {i: np.array(p, dtype=np.int64) for i, p in enumerate(rows["important"])}  # writable copies


def precision_frame(
    table: dict[int, np.ndarray],
    important: dict[int, np.ndarray],
    candidates: dict[int, np.ndarray],
    methods: list[str],
    ks=(1,),
    rankings=RANKINGS,
    group_size: int = 512,
) -> pd.DataFrame:
    """Per-instance precision@k: ``row, method, ranking, k, k_tokens, precision_at_k``; NaN where the instance has
    no candidate or the method no ranking (NaN scores: :func:`undefined_rankings`), as in agreement and
    faithfulness."""
    frames = []
    rows = sorted(table, key=lambda r: (table[r].shape[1], r))
    for start in range(0, len(rows), group_size):
        group = rows[start : start + group_size]
        scores = stack_rows(table, group)  # [G, M, T]
        width = scores.shape[-1]
        cand = torch.zeros(len(group), width, dtype=torch.bool)
        planted = torch.zeros(len(group), width, dtype=torch.bool)
        for i, r in enumerate(group):
            cand[i, : len(candidates[r])] = torch.from_numpy(candidates[r])
            planted[i, torch.from_numpy(important[r])] = True
        n = cand.sum(dim=1)
        unranked = undefined_rankings(scores, cand)  # [G, M]
        specs = [("n_planted", (planted & cand).sum(dim=1))] + [(str(k), k_tokens(n, k)) for k in ks]
        for ranking in rankings:
            ranks = rank_positions(ranking_key(scores, cand[:, None], ranking))  # [G, M, T]
            for label, kk in specs:
                top = ranks < kk[:, None, None]
                hits = (top & planted[:, None]).sum(dim=-1).double()
                precision = (hits / kk.clamp(min=1)[:, None]).masked_fill((kk == 0)[:, None] | unranked, torch.nan)
                frames.append(
                    pd.DataFrame(
                        {
                            "row": np.repeat(group, len(methods)),
                            "method": np.tile(methods, len(group)),
                            "ranking": ranking,
                            "k": label,
                            "k_tokens": np.repeat(kk.numpy(), len(methods)),
                            "precision_at_k": precision.numpy().ravel(),
                        }
                    )
                )
    return pd.concat(frames, ignore_index=True)


def run(runs: list[dict], out: str, *, split: str = "test", ks=(1,), rankings=RANKINGS) -> pd.DataFrame:
    """``runs``: ``[{dataset, dataset_dir, model, scores: [importance parquet per method]}]`` → planted.csv
    (``dataset, model, method, signed, ranking, k, precision_at_k, n_instances``)."""
    from attnaudit.io import atomic_path

    tables = []
    for spec in runs:
        frame = read_scores(spec["scores"])
        methods = list(dict.fromkeys(frame["method"]))
        table = scores_by_row(frame, methods)
        important = planted_positions(spec["dataset_dir"], split)
        candidates = candidates_of_split(spec["dataset_dir"], split)
        per_instance = precision_frame(table, important, candidates, methods, ks, rankings)
        summary = (
            per_instance.groupby(["method", "ranking", "k"], sort=False)["precision_at_k"]
            .agg(precision_at_k="mean", n_instances="count")
            .reset_index()
        )
        summary.insert(1, "signed", summary["method"].map(lambda m: METHODS[m].signed if m in METHODS else None))
        summary.insert(0, "model", spec["model"])
        summary.insert(0, "dataset", spec["dataset"])
        tables.append(summary)
        best = summary[(summary["k"] == "n_planted") & (summary["ranking"] == rankings[0])]
        log.info(
            "%s/%s precision@n_planted (%s): %s",
            spec["dataset"],
            spec["model"],
            rankings[0],
            ", ".join(f"{m} {p:.3f}" for m, p in zip(best["method"], best["precision_at_k"])),
        )
    columns = ["dataset", "model", "method", "signed", "ranking", "k", "precision_at_k", "n_instances"]
    result = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=columns)
    with atomic_path(out) as tmp:
        result[columns].to_csv(tmp, index=False, float_format="%.6g")
    return result
