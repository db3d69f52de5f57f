"""Attention fragility (T&Š §4.1, Table 1): test F1 of the trained model, unchanged, when its attention is
replaced post hoc.

- Tr.: F1 with the trained attention α̂.
- Un.: α replaced by the uniform distribution over the real non-marker tokens (``<s>``, ``</s>`` get 0; an
  instance made only of markers is uniform over its real tokens).
- Pm.: α̂ randomly permuted among the non-marker positions (marker weights stay in place), P times per instance
  with seeds from ``instance_seed(seed, id)`` (so batching does not change them); permutation index p over all
  instances forms one permuted test set, whose F1 is reported per p, then as mean and std over p.

Deltas are modified − trained in F1 points (×100), as T&Š print them. One encoder pass per batch; the uniform
and all P permuted distributions go through one ``model.decode(h, α [B, 1+P, T])`` call with h fixed.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.metrics import accuracy_score, f1_score
from tqdm import tqdm

from attnaudit.auditing import batch_plan, iterate_chunk, load_audit_inputs
from attnaudit.io import write_json
from attnaudit.jain_wallace.common import batch_seeds
from attnaudit.jain_wallace.permutation import permute
from attnaudit.masks import content_mask, marker_ids
from attnaudit.models import Batch, uniform_over

log = logging.getLogger(__name__)

POSITIVE_CLASS = 1
UNITS = "F1 in [0, 1]; delta = modified − trained in F1 points (×100), as T&Š Table 1"


@torch.no_grad()
def fragility_logits(
    model, batch: Batch, markers: tuple[int, ...], seeds: torch.Tensor, n_permutations: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits of one batch with the trained attention ``[B, C]`` and with the uniform (index 0) and the P
    permuted distributions (1..P) ``[B, 1 + P, C]``: one encoder pass, one decoder call."""
    out = model(batch)
    support = content_mask(batch, markers)
    uniform = uniform_over(support, out.attention.dtype)
    permuted = permute(out.attention, support, seeds, n_permutations)
    alphas = torch.cat([uniform[:, None, :], permuted], dim=1)  # [B, 1 + P, T]
    return out.logits, model.decode(out.hidden, alphas, out.query)


def fragility_batch(
    model, batch: Batch, markers: tuple[int, ...], seeds: torch.Tensor, n_permutations: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Predicted classes of one batch: trained ``[B]``, uniform ``[B]`` and permuted ``[B, P]``."""
    trained, modified = fragility_logits(model, batch, markers, seeds, n_permutations)
    predicted = modified.argmax(dim=-1)
    return trained.argmax(dim=-1), predicted[:, 0], predicted[:, 1:]


def scores(labels: np.ndarray, predicted: np.ndarray, num_classes: int) -> dict:
    """Macro F1, positive-class F1 (class 1 of a binary task; null otherwise) and accuracy."""
    positive = (
        float(f1_score(labels, predicted, labels=[POSITIVE_CLASS], average="macro", zero_division=0))
        if num_classes == 2
        else None
    )
    return {
        "macro_f1": float(
            f1_score(labels, predicted, labels=list(range(num_classes)), average="macro", zero_division=0)
        ),
        "positive_f1": positive,
        "accuracy": float(accuracy_score(labels, predicted)),
    }


def _delta(modified: float | None, trained: float | None) -> float | None:
    return None if modified is None or trained is None else 100.0 * (modified - trained)


def summarise(labels: np.ndarray, trained: np.ndarray, uniform: np.ndarray, permuted: np.ndarray, num_classes: int):
    """The result dict from per-instance predictions (``permuted`` is ``[N, P]``)."""
    tr = scores(labels, trained, num_classes)
    un = scores(labels, uniform, num_classes)
    per_p = [scores(labels, permuted[:, p], num_classes) for p in range(permuted.shape[1])]
    pm: dict = {"changed_fraction": float(np.mean(permuted != trained[:, None]))}
    delta: dict = {"units": "F1 points (×100), modified − trained"}
    for metric in ("macro_f1", "positive_f1", "accuracy"):
        values = [s[metric] for s in per_p]
        defined = None not in values
        pm[metric] = values if defined else None
        pm[f"{metric}_mean"] = float(np.mean(values)) if defined else None
        pm[f"{metric}_std"] = float(np.std(values, ddof=1)) if defined and len(values) > 1 else None
        delta[f"uniform_{metric}"] = _delta(un[metric], tr[metric])
        pm_deltas = [_delta(v, tr[metric]) for v in values] if defined else None
        delta[f"permutation_{metric}_mean"] = float(np.mean(pm_deltas)) if defined else None
        delta[f"permutation_{metric}_std"] = float(np.std(pm_deltas, ddof=1)) if defined and len(values) > 1 else None
    un["changed_fraction"] = float(np.mean(uniform != trained))
    return {"trained": tr, "uniform": un, "permutation": pm, "delta": delta}


def run_fragility(
    dataset_dir: str | Path,
    model_dir: str | Path,
    out: str | Path,
    *,
    split: str = "test",
    n_permutations: int = 100,
    seed: int = 0,
    batch_size: int = 64,
    threads: int = 1,
    progress: bool = True,
) -> dict:
    torch.set_num_threads(max(1, threads))
    started = time.time()
    inputs = load_audit_inputs(dataset_dir, model_dir, split)
    model, markers = inputs.model, marker_ids(inputs.vocab)
    n = len(inputs.encoded)
    trained = np.zeros(n, dtype=np.int64)
    uniform = np.zeros(n, dtype=np.int64)
    permuted = np.zeros((n, n_permutations), dtype=np.int64)
    n_batches = len(batch_plan(inputs.encoded, batch_size))
    for rows, batch in tqdm(
        iterate_chunk(inputs, batch_size), total=n_batches, desc="fragility", disable=not progress, mininterval=5
    ):
        tr, un, pm = fragility_batch(model, batch, markers, batch_seeds(seed, batch.ids), n_permutations)
        trained[rows], uniform[rows], permuted[rows] = tr.cpu().numpy(), un.cpu().numpy(), pm.cpu().numpy()
    num_classes = int(model.cfg.num_classes)
    result = {
        "paper": "Tutek & Šnajder (2020), §4.1, Table 1",
        "dataset_dir": str(dataset_dir),
        "model_dir": str(model_dir),
        "split": split,
        "n": n,
        "num_classes": num_classes,
        "positive_class": POSITIVE_CLASS if num_classes == 2 else None,
        "n_permutations": n_permutations,
        "seed": seed,
        "support": "real tokens without <s>, </s> (uniform: weight 0 on markers; permutation: markers keep theirs)",
        "units": UNITS,
        **summarise(inputs.encoded.labels, trained, uniform, permuted, num_classes),
        "seconds": round(time.time() - started, 2),
    }
    write_json(out, result)
    d = result["delta"]
    log.info(
        "fragility of %s (%s, n=%d, P=%d): macro F1 %.3f, Δ uniform %+.1f, Δ permutation %+.1f ± %.1f → %s",
        model_dir,
        split,
        n,
        n_permutations,
        result["trained"]["macro_f1"],
        d["uniform_macro_f1"],
        d["permutation_macro_f1_mean"],
        d["permutation_macro_f1_std"] or 0.0,
        out,
    )
    return result
