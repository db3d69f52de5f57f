"""Faithfulness by erasure, ERASER's comprehensiveness and sufficiency (DeYoung et al. 2020, §4), the
evaluation B&F §3.3 name for any saliency method, with the out-of-distribution caveat of B&F §6 (Hooker et al.
2019) made measurable by a replacement variant.

For an instance with predicted class c, candidate tokens (real tokens except sentence markers) ranked by a
method, and k% of them (at least one token, rounded half up, at most all):

* comprehensiveness_k = p_c(x) − p_c(x without its top-k tokens)   (high = the ranking found what mattered)
* sufficiency_k       = p_c(x) − p_c(only the top-k tokens, plus the markers)   (low = they suffice)
* AOPC = the mean over the k bins (DeYoung et al. §4; their formula also averages the empty bin k = 0, whose
  value is 0, which only scales AOPC by |B|/(|B|+1); their released scorer, ``rationale_benchmark/metrics.py``
  ``_instances_aopc``, averages the given bins only, as here).

Variants: ``deletion`` removes the tokens and re-encodes the shorter sequence (ERASER); ``unk`` and ``pad``
replace them by ``<unk>`` or the pad (all-zero) embedding and keep the length, the replacement B&F §6 suggest
contrasting with deletion. A random ranking seeded per instance (the ``random`` method) is the baseline.

Batched: the perturbations of every ranking, every k and both metrics of a batch are built as one tensor of
``[B·S·K·2, T]`` token rows (duplicates removed), pushed through the model in slices of bounded size.
"""

from __future__ import annotations

import logging
from collections import defaultdict

import numpy as np
import pandas as pd
import torch

from attnaudit import AttnauditError
from attnaudit.auditing import length_batches, load_audit_inputs, run_chunked, token_budget
from attnaudit.data import UNK
from attnaudit.importance import METHODS
from attnaudit.importance._stage import read_scores
from attnaudit.masks import candidate_mask, marker_ids
from attnaudit.models import Batch
from attnaudit.saliency.ranking import (
    RANKINGS,
    fraction_label,
    k_tokens,
    rank_positions,
    ranking_key,
    scores_by_row,
    stack_rows,
    undefined_rankings,
)

log = logging.getLogger(__name__)

VARIANTS = ("deletion", "unk", "pad")
FRACTIONS = (0.01, 0.05, 0.1, 0.2, 0.5)
ROW_TOKENS = 4096  # token positions per forward pass of erased rows when no budget is given (the CPU default)


def perturb(
    batch: Batch, source: torch.Tensor, keep: torch.Tensor, variant: str, unk_index: int, pad_index: int = 0
) -> tuple[Batch, torch.Tensor]:
    """Rows ``source[n]`` of ``batch`` keeping only the positions ``keep[n]``; returns the batch and the rows left
    empty (only possible for ``deletion``; they hold one pad token and must be scored NaN)."""
    mask = batch.mask[source]
    keep = keep & mask
    if variant == "deletion":
        order = torch.argsort((~keep).to(torch.int8), dim=1, stable=True)  # kept positions first, in order
        n_keep = keep.sum(dim=1)
        width = max(1, int(n_keep.max()))
        new_mask = torch.arange(width, device=mask.device)[None, :] < n_keep[:, None]
        empty = n_keep == 0
        new_mask[empty, 0] = True
        rows = batch.with_positions(source, order[:, :width], new_mask)
        rows.tokens = rows.tokens.masked_fill(~(new_mask & ~empty[:, None]), pad_index)
    elif variant in ("unk", "pad"):
        positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
        rows = batch.with_positions(source, positions, mask)
        replacement = unk_index if variant == "unk" else pad_index
        rows.tokens = torch.where(keep | ~mask, rows.tokens, torch.full_like(rows.tokens, replacement))
        empty = torch.zeros(len(source), dtype=torch.bool, device=mask.device)
    else:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    return rows, empty


@torch.no_grad()
def predict_rows(model, batch: Batch, target: torch.Tensor, max_tokens: int) -> torch.Tensor:
    """p_target of every row. The rows (erasures of very different lengths: top-1 % kept or top-1 % removed) are
    sorted by length and scored in slices of at most ``max_tokens`` token positions (rows × the slice's longest
    row), each slice cut to its longest row. Padding is on the right and the encoders ignore it (the CNN zeroes
    it, the BiLSTM reverses within the length), so each row's probability is the one it has alone; but encoding
    padding is not free, and one slice of rows sorted by length pads little (with :func:`distinct_rows`, the SST
    BiLSTM's faithfulness stage took 0.47× the CPU time of 2^25-float slices of the rows as built)."""
    lengths = batch.mask.sum(dim=1).cpu().numpy()
    out = torch.empty(len(target), device=target.device)
    for plan in length_batches(lengths, None, max_tokens):
        rows, width = torch.from_numpy(plan).to(target.device), int(lengths[plan[-1]])
        sliced = batch.select(rows)
        sliced.tokens, sliced.mask = sliced.tokens[:, :width], sliced.mask[:, :width]
        if sliced.guide is not None:
            sliced.guide = sliced.guide[:, :width]
        out[rows] = model(sliced).probs.gather(1, target[rows, None]).squeeze(1)
    return out


def distinct_rows(source: torch.Tensor, keep: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The distinct (source instance, kept positions) rows ``(source [U], keep [U, T])`` and each row's index
    among them ``[N]``: short instances give the same erasure at several k. The rows are compared as packed bytes
    (``torch.unique(dim=0)`` compares them one pair at a time: ~10 % of the stage)."""
    packed = np.packbits(keep.cpu().numpy(), axis=1)
    key = np.concatenate([source.cpu().numpy().astype(np.int64)[:, None].view(np.uint8), packed], axis=1)
    rows = key.view(np.dtype((np.void, key.shape[1])))[:, 0]
    _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
    first = torch.from_numpy(first).to(source.device)
    return source[first], keep[first], torch.from_numpy(inverse.reshape(-1)).to(source.device)


@torch.no_grad()
def faithfulness_batch(
    model,
    batch: Batch,
    keys: torch.Tensor,
    candidates: torch.Tensor,
    fractions=FRACTIONS,
    variants=("deletion", "unk"),
    unk_index: int = 1,
    pad_index: int = 0,
    max_tokens: int = ROW_TOKENS,
) -> dict[str, torch.Tensor]:
    """Comprehensiveness and sufficiency for ``keys [B, S, T]`` (S rankings, higher = more important; see
    :func:`~attnaudit.saliency.ranking.ranking_key`): ``comprehensiveness``/``sufficiency`` ``[B, S, K, V]``,
    ``k_tokens [B, K]``, ``p_full [B]``, ``predicted [B]``. The erased rows are encoded ``max_tokens`` token
    positions at a time (the audits' per-device budget)."""
    probs = model(batch).probs
    target = probs.argmax(dim=-1)
    p_full = probs.gather(1, target[:, None]).squeeze(1)
    n_batch, n_rank, width = keys.shape
    n = candidates.sum(dim=1)
    kk = torch.stack([k_tokens(n, f, fraction=True) for f in fractions], dim=1)  # [B, K]
    ranks = rank_positions(keys)  # [B, S, T]
    selected = ranks[:, :, None, :] < kk[:, None, :, None]  # [B, S, K, T]; only candidates rank < n
    mask = batch.mask[:, None, None, :]
    keep = torch.stack([mask & ~selected, mask & (~candidates[:, None, None, :] | selected)], dim=3)
    keep = keep.reshape(-1, width)  # [B·S·K·2, T]
    source = torch.arange(n_batch, device=keys.device).repeat_interleave(n_rank * len(fractions) * 2)
    u_source, u_keep, inverse = distinct_rows(source, keep)
    shape = (n_batch, n_rank, len(fractions), 2)
    comp, suff = [], []
    for variant in variants:
        rows, empty = perturb(batch, u_source, u_keep, variant, unk_index, pad_index)
        p = predict_rows(model, rows, target[u_source], max_tokens).masked_fill(empty, torch.nan)
        p = p[inverse].reshape(shape)
        drop = p_full[:, None, None, None] - p
        drop = drop.masked_fill((n == 0)[:, None, None, None], torch.nan)
        comp.append(drop[..., 0])
        suff.append(drop[..., 1])
    return {
        "comprehensiveness": torch.stack(comp, dim=-1),
        "sufficiency": torch.stack(suff, dim=-1),
        "k_tokens": kk,
        "p_full": p_full,
        "predicted": target,
    }


def ranking_plan(methods: list[str], rankings) -> tuple[list[tuple[str, str]], list[tuple[str, str, int]]]:
    """Distinct (method, ranking) keys to compute, and every (method, ranking, index of its key) to report:
    an unsigned method's ``abs`` ranking is its ``signed`` ranking."""
    computed, report = [], []
    for method in methods:
        signed = METHODS[method].signed if method in METHODS else True
        for ranking in rankings:
            effective = ranking if signed else "signed"
            if (method, effective) not in computed:
                computed.append((method, effective))
            report.append((method, ranking, computed.index((method, effective))))
    return computed, report


def run(
    dataset_dir: str,
    model_dir: str,
    scores_paths: list[str],
    out: str,
    *,
    split: str = "test",
    batch_size: int = 64,
    max_tokens: int | None = None,
    chunk: int = 0,
    n_chunks: int = 1,
    methods: list[str] | None = None,
    fractions=FRACTIONS,
    variants=("deletion", "unk"),
    rankings=RANKINGS,
    threads: int = 1,
) -> pd.DataFrame:
    """ERASER metrics for every (method, ranking) on one chunk; ``scores_paths`` are the importance stage's
    gathered parquets of the methods."""
    torch.set_num_threads(threads)
    inputs = load_audit_inputs(dataset_dir, model_dir, split)
    model = inputs.model
    frame = read_scores(scores_paths)
    methods = methods or list(dict.fromkeys(frame["method"]))
    table = scores_by_row(frame, methods)
    markers = marker_ids(inputs.vocab)
    unk_index = inputs.vocab.get(UNK, 1)
    computed, report = ranking_plan(methods, rankings)
    method_index = {m: i for i, m in enumerate(methods)}
    log.info(
        "faithfulness: %s, chunk %d/%d, %d methods × %d rankings, k = %s, variants %s",
        model_dir,
        chunk + 1,
        n_chunks,
        len(methods),
        len(rankings),
        [fraction_label(f) for f in fractions],
        list(variants),
    )
    labels = np.array([fraction_label(f) for f in fractions])
    row_tokens = token_budget(max_tokens, inputs.device) or ROW_TOKENS

    def per_batch(rows, batch) -> dict:
        missing = [int(r) for r in rows if int(r) not in table]
        if missing:
            raise AttnauditError(f"{scores_paths[0]} has no scores for rows {missing[:5]}: rerun the importance stage")
        scores = stack_rows(table, rows, batch.tokens.shape[1]).to(inputs.device)  # [B, M, T]
        lengths = np.array([table[int(r)].shape[1] for r in rows])
        if not np.array_equal(lengths, batch.mask.sum(dim=1).cpu().numpy()):
            raise AttnauditError(f"{scores_paths[0]}: score lengths differ from the tokenised instances")
        cand = candidate_mask(batch.tokens, batch.mask, markers)
        keys = torch.stack([ranking_key(scores[:, method_index[m]], cand, r) for m, r in computed], dim=1)
        result = faithfulness_batch(
            model, batch, keys, cand, fractions, variants, unk_index, model.cfg.pad_index, row_tokens
        )
        comp = result["comprehensiveness"].cpu().numpy()  # [B, S, K, V]
        suff = result["sufficiency"].cpu().numpy()
        undefined = undefined_rankings(scores, cand).cpu().numpy()  # [B, M]: no ranking, no metric
        kk = result["k_tokens"].cpu().numpy()
        n_tokens = cand.sum(dim=1).cpu().numpy()
        p_full = result["p_full"].cpu().numpy()
        b, k, v = len(rows), len(fractions), len(variants)
        columns = defaultdict(list)
        for method, ranking, index in report:  # vectorised over instances × k × variants
            shape = (b, k, v)
            columns["row"].append(np.broadcast_to(np.asarray(rows)[:, None, None], shape).ravel())
            columns["id"].append(np.broadcast_to(np.asarray(batch.ids)[:, None, None], shape).ravel())
            columns["method"].append(np.full(b * k * v, method))
            columns["ranking"].append(np.full(b * k * v, ranking))
            columns["variant"].append(np.broadcast_to(np.asarray(variants)[None, None, :], shape).ravel())
            columns["k"].append(np.broadcast_to(labels[None, :, None], shape).ravel())
            columns["fraction"].append(np.broadcast_to(np.asarray(fractions)[None, :, None], shape).ravel())
            columns["k_tokens"].append(np.broadcast_to(kk[:, :, None], shape).ravel())
            columns["n_tokens"].append(np.broadcast_to(n_tokens[:, None, None], shape).ravel())
            columns["p_full"].append(np.broadcast_to(p_full[:, None, None], shape).ravel())
            unranked = undefined[:, method_index[method], None, None]
            columns["comprehensiveness"].append(np.where(unranked, np.nan, comp[:, index]).ravel())
            columns["sufficiency"].append(np.where(unranked, np.nan, suff[:, index]).ravel())
        return {key: np.concatenate(values) for key, values in columns.items()}

    frame = run_chunked(
        inputs,
        per_batch,
        out,
        batch_size=batch_size,
        max_tokens=max_tokens,
        chunk=chunk,
        n_chunks=n_chunks,
        desc="faithfulness",
    )
    if len(frame):  # a chunk can be empty when a small test split has fewer batches than chunks
        summary = frame[(frame["ranking"] == rankings[0]) & (frame["variant"] == variants[0])]
        summary = summary.groupby("method", sort=False)[["comprehensiveness", "sufficiency"]].mean()
        log.info("faithfulness (AOPC, %s ranking, %s):\n%s", rankings[0], variants[0], summary.round(4).to_string())
    return frame
