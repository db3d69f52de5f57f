"""Distances between output/attention distributions and rank agreement.

TVD(ŷ₁, ŷ₂) = ½‖ŷ₁ − ŷ₂‖₁ and JSD in nats (≤ ln 2), as in J&W §4 (Eq. 1–2, Alg. 2–3). Both are batched over
leading dimensions. Kendall τ-b with its p-value comes from ``scipy.stats.kendalltau``; :func:`kendall_tau_b`
computes the same statistic for all pairs of many rankings at once (B&F agreement matrices).

PyTorch is imported by the functions that call it, not with the module: the jobs that only read ``LN2`` (the
figures) or rank with ``kendall_tau_rows`` (J&W's correlation) need no PyTorch, which takes 1.5–2 CPU s to import.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

LN2 = math.log(2.0)


def tvd(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Total variation distance over the last dimension (of PyTorch tensors or NumPy arrays alike)."""
    return 0.5 * abs(p - q).sum(-1)


def kl(p: torch.Tensor, q: torch.Tensor, eps: float = 1e-10) -> torch.Tensor:
    """KL(p‖q) in nats over the last dimension; 0·log 0 = 0."""
    import torch

    return torch.where(p > 0, p * (torch.log(p + eps) - torch.log(q + eps)), torch.zeros_like(p)).sum(dim=-1)


def jsd(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Jensen–Shannon divergence in nats, in [0, ln 2]; clamped to that range against rounding."""
    m = 0.5 * (p + q)
    return (0.5 * kl(p, m) + 0.5 * kl(q, m)).clamp(0.0, LN2)


def kendall_tau(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Kendall τ-b and its two-sided p-value (scipy). NaN when either ranking is constant. The scores are read as
    float64: SciPy ≥ 1.18 returns float32 statistics and p-values for float32 scores, which would round τ to ~1e-8
    and a p-value below ~1e-38 to 0, and differ from older SciPy."""
    if len(a) < 2:
        return float("nan"), float("nan")
    from scipy.stats import kendalltau  # 1-2 s to import: only the audits that rank pay for it

    result = kendalltau(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64), variant="b")
    return float(result.statistic), float(result.pvalue)


def kendall_tau_rows(a: list[np.ndarray], b: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`kendall_tau` of every pair ``(a[i], b[i])`` (rankings of different lengths): the same τ-b and p-values,
    from one ``scipy.stats.kendalltau(..., axis=1)`` call per length instead of one call per pair (SciPy's
    argument handling cost more than the statistic on sentence-length rankings)."""
    from scipy.stats import kendalltau

    tau, p = np.full(len(a), np.nan), np.full(len(a), np.nan)
    by_length: dict[int, list[int]] = {}
    for i, values in enumerate(a):
        by_length.setdefault(len(values), []).append(i)
    for n, rows in by_length.items():
        if n >= 2:
            stacked = [np.stack([np.asarray(x[i], dtype=np.float64) for i in rows]) for x in (a, b)]
            result = kendalltau(*stacked, variant="b", axis=1)
            tau[rows], p[rows] = result.statistic, result.pvalue
    return tau, p


def kendall_tau_b(scores: torch.Tensor, candidates: torch.Tensor, max_elements: int = 1 << 24) -> torch.Tensor:
    """``scores [B, M, T]``, ``candidates [B, T]`` → τ-b ``[B, M, M]`` between every pair of M rankings, for a
    batch of instances at once: the statistic of :func:`kendall_tau` (equal to it in the tests), without p-values.
    The ``[B, M, T, T]`` sign tensor is built ``max_elements`` at a time, in blocks of its rows; its sums are of
    ±1 and 0, exact in float64, so the blocks change no result and a document of any length fits in memory."""
    import torch

    scores = scores.double()
    n_batch, n_rankings, width = scores.shape
    block = max(1, max_elements // max(1, n_batch * n_rankings * width))
    concordance = scores.new_zeros(n_batch, n_rankings, n_rankings)  # 2 (n_c − n_d)
    untied = scores.new_zeros(n_batch, n_rankings)  # 2 (n₀ − n_ties); NaN signs count as untied
    for start in range(0, width, block):
        rows = slice(start, start + block)
        pairs = candidates[:, rows, None] & candidates[:, None, :]  # [B, t, T]; the diagonal has sign 0 anyway
        signs = torch.where(pairs[:, None], torch.sign(scores[..., rows, None] - scores[..., None, :]), 0.0)
        concordance += torch.einsum("bmij,bnij->bmn", signs, signs)
        untied += (signs != 0).sum(dim=(2, 3)).double()
    denominator = torch.sqrt(untied[:, :, None] * untied[:, None, :])
    return torch.where(denominator > 0, concordance / denominator.clamp(min=1), torch.nan)
