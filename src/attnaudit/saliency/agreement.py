"""Agreement between importance methods (B&F §4: do attention and saliency point at the same tokens?).

For every instance and every pair of methods: Kendall τ-b between their scores over the candidate tokens (real
tokens except sentence markers), and the top-k overlap |top_k(a) ∩ top_k(b)| / k (NaN, as τ, where a method has a
NaN score: an architecture it does not support). τ-b is computed for all
pairs of a group of instances at once from the sign matrices sign(s_i − s_j) —
τ_b = Σ_{i<j} sgn_a·sgn_b / √((n₀ − n₁)(n₀ − n₂)) — the statistic of ``scipy.stats.kendalltau(variant="b")``
(``attnaudit.metrics.kendall_tau_b``, equal to ``kendall_tau`` in the tests), NaN when either ranking is constant, fewer
than two candidates exist, or a score is NaN. The p-values are not computed here.
"""

from __future__ import annotations

import itertools
import logging
from collections import defaultdict

import numpy as np
import pandas as pd
import torch

from attnaudit.auditing import length_batches
from attnaudit.data import encode_split, load_examples
from attnaudit.importance._stage import read_scores
from attnaudit.io import write_parquet
from attnaudit.masks import marker_ids
from attnaudit.metrics import kendall_tau_b
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


def topk_overlap(
    scores: torch.Tensor, candidates: torch.Tensor, k: float, ranking: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """``[B, M, M]`` overlap of the top-k candidate sets and the k used per instance ``[B]``; NaN without
    candidates or where either method has no ranking (:func:`undefined_rankings`)."""
    n = candidates.sum(dim=1)
    kk = k_tokens(n, k)
    ranks = rank_positions(ranking_key(scores, candidates[:, None], ranking))
    top = (ranks < kk[:, None, None]).double()
    overlap = torch.einsum("bmt,bnt->bmn", top, top) / kk.clamp(min=1)[:, None, None]
    undefined = undefined_rankings(scores, candidates)
    undefined = (kk == 0)[:, None, None] | undefined[:, :, None] | undefined[:, None, :]
    return overlap.masked_fill(undefined, torch.nan), kk


def agreement_frame(
    table: dict[int, np.ndarray],
    ids: dict[int, str],
    candidates: dict[int, np.ndarray],
    methods: list[str],
    *,
    k: float = 3,
    rankings=RANKINGS,
    max_elements: int = 1 << 24,
) -> pd.DataFrame:
    """Long frame ``row, id, ranking, method_a, method_b, tau, topk_overlap, k, n_tokens`` over all method pairs
    (a before b in ``methods`` order). Instances are grouped by length so a group's sign tensor stays within
    ``max_elements`` (a document too long for it alone is built in blocks: :func:`kendall_tau_b`)."""
    rows = np.asarray(sorted(table))
    widths = np.array([table[r].shape[1] for r in rows])
    pairs = list(itertools.combinations(range(len(methods)), 2))
    ia, ib = (torch.tensor([p[i] for p in pairs], dtype=torch.long) for i in (0, 1))
    columns = defaultdict(list)
    # groups of rows × M × width² ≤ max_elements (the sign tensor), by length; a longer row is a group of its own
    for batch in length_batches(widths**2, None, max(1, max_elements // len(methods))):
        group, width = rows[batch].tolist(), int(widths[batch].max())
        scores = stack_rows(table, group, width)
        cand = torch.zeros(len(group), width, dtype=torch.bool)
        for i, r in enumerate(group):
            cand[i, : len(candidates[r])] = torch.from_numpy(candidates[r])
        n_tokens = cand.sum(dim=1).numpy()
        for ranking in rankings:
            key = scores.abs() if ranking == "abs" else scores
            tau = kendall_tau_b(key, cand, max_elements)[:, ia, ib].numpy()
            overlap, kk = topk_overlap(scores, cand, k, ranking)
            overlap = overlap[:, ia, ib].numpy()
            n_pairs = len(pairs)
            columns["row"].append(np.repeat(np.asarray(group), n_pairs))
            columns["ranking"].append(np.full(len(group) * n_pairs, ranking))
            columns["method_a"].append(np.tile(np.asarray(methods)[ia.numpy()], len(group)))
            columns["method_b"].append(np.tile(np.asarray(methods)[ib.numpy()], len(group)))
            columns["tau"].append(tau.reshape(-1))
            columns["topk_overlap"].append(overlap.reshape(-1))
            columns["k"].append(np.repeat(kk.numpy(), n_pairs))
            columns["n_tokens"].append(np.repeat(n_tokens, n_pairs))
    frame = pd.DataFrame({key: np.concatenate(values) for key, values in columns.items()})
    frame.insert(1, "id", frame["row"].map(ids))
    return frame.sort_values(["row", "ranking"], kind="stable").reset_index(drop=True)


def candidates_of_split(dataset_dir: str, split: str) -> dict[int, np.ndarray]:
    """``row → bool[length]`` candidate flags (not a sentence marker) for the audited split."""
    examples, vocab = load_examples(dataset_dir)
    encoded = encode_split(examples, vocab, split)
    markers = np.asarray(marker_ids(vocab))
    return {i: ~np.isin(seq, markers) for i, seq in enumerate(encoded.sequences)}


def run(
    dataset_dir: str,
    scores_paths: list[str],
    out: str,
    *,
    split: str = "test",
    methods: list[str] | None = None,
    k: float = 3,
    rankings=RANKINGS,
) -> pd.DataFrame:
    frame = read_scores(scores_paths)
    methods = methods or list(dict.fromkeys(frame["method"]))
    table = scores_by_row(frame, methods)
    ids = dict(zip(frame["row"], frame["id"]))
    candidates = candidates_of_split(dataset_dir, split)
    for r, values in table.items():
        if values.shape[1] != len(candidates[r]):
            raise ValueError(f"row {r}: {values.shape[1]} scores but {len(candidates[r])} tokens")
    result = agreement_frame(table, ids, {r: candidates[r] for r in table}, methods, k=k, rankings=rankings)
    write_parquet(out, result)
    summary = result[result["ranking"] == rankings[0]].groupby(["method_a", "method_b"])["tau"].mean()
    if "attention" in methods:
        log.info(
            "mean τ with attention (%s ranking): %s",
            rankings[0],
            ", ".join(
                f"{b if a == 'attention' else a} {v:.3f}" for (a, b), v in summary.items() if "attention" in (a, b)
            ),
        )
    log.info(
        "agreement: %d instances × %d method pairs × %d rankings",
        len(table),
        len(methods) * (len(methods) - 1) // 2,
        len(rankings),
    )
    return result
