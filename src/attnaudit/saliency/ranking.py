"""Rankings shared by the agreement, faithfulness and planted audits.

Which tokens are ranked: the real tokens of an instance except the sentence markers ``<s>``/``</s>`` (they are
structural, not words of the text), the *candidates*. How: by the signed score (``signed``: positive = evidence
for the predicted class, B&F's saliency) or by its magnitude (``abs``, as J&W's |gradient|); for unsigned methods
both are the same. Ties are broken by position (earlier first), and a NaN score (e.g. ``loo`` on a one-token
instance) ranks below every finite one, so rankings are total and deterministic.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

RANKINGS = ("signed", "abs")


def ranking_key(scores: torch.Tensor, candidates: torch.Tensor, ranking: str) -> torch.Tensor:
    """float64 sort key: higher = more important; NaN candidates lowest finite, non-candidates −inf."""
    if ranking not in RANKINGS:
        raise ValueError(f"ranking must be one of {RANKINGS}, got {ranking!r}")
    key = (scores.abs() if ranking == "abs" else scores).double()
    key = torch.where(torch.isnan(key), torch.finfo(torch.float64).min, key)
    return key.masked_fill(~candidates, float("-inf"))


def undefined_rankings(scores: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
    """``[B, M]`` from scores ``[B, M, T]``: True where a method has a NaN score among an instance's candidates,
    as a method writes for an architecture it does not support (LRP on a QA model): no ranking, so no agreement
    or faithfulness of it, rather than the position order its NaN keys would sort into."""
    return (torch.isnan(scores) & candidates[:, None, :]).any(dim=-1)


def rank_positions(key: torch.Tensor) -> torch.Tensor:
    """Rank of every position along the last dimension (0 = most important); ties by position."""
    order = torch.sort(key, dim=-1, descending=True, stable=True).indices
    ranks = torch.empty_like(order)
    ranks.scatter_(-1, order, torch.arange(key.shape[-1], device=key.device).expand_as(order).contiguous())
    return ranks


def k_tokens(n: torch.Tensor, k: float, fraction: bool | None = None) -> torch.Tensor:
    """How many tokens "top k" means for ``n`` candidates: a fraction of n (rounded half up) if ``fraction``,
    else a count; ``fraction=None`` reads k < 1 as a fraction and k ≥ 1 as a count. At least one token, at most
    n (0 when there are no candidates)."""
    n = torch.as_tensor(n)
    fraction = k < 1 if fraction is None else fraction
    want = torch.floor(n.double() * k + 0.5).long() if fraction else torch.full_like(n, int(k))
    return torch.minimum(want.clamp(min=1), n)


def fraction_label(fraction: float) -> str:
    """0.05 → '5%' (the k column of the faithfulness table)."""
    percent = fraction * 100
    return f"{percent:g}%" if not math.isclose(percent, round(percent)) else f"{int(round(percent))}%"


def scores_by_row(frame: pd.DataFrame, methods: list[str]) -> dict[int, np.ndarray]:
    """``row → [M, length]`` float32 scores of ``methods`` (in that order) from a long scores frame
    (columns ``row, method, scores``). Every row must have every method."""
    order = {m: i for i, m in enumerate(methods)}
    sub = frame[frame["method"].isin(order)]
    sub = sub.assign(_order=sub["method"].map(order)).sort_values(["row", "_order"], kind="stable")
    counts = sub.groupby("row").size()
    if len(sub) == 0 or (counts != len(methods)).any():
        missing = sorted(set(methods) - set(frame["method"]))
        raise ValueError(f"scores lack methods {missing or '(some rows incomplete)'}")
    rows, values = sub["row"].to_numpy()[:: len(methods)], sub["scores"].to_numpy()
    return {
        int(r): np.stack(values[i * len(methods) : (i + 1) * len(methods)]).astype(np.float32)
        for i, r in enumerate(rows)
    }


def stack_rows(table: dict[int, np.ndarray], rows, width: int | None = None) -> torch.Tensor:
    """``[len(rows), M, width]`` tensor of the rows' scores, zero-padded (width: longest row by default)."""
    arrays = [table[int(r)] for r in rows]
    width = width or max(a.shape[1] for a in arrays)
    out = np.zeros((len(arrays), arrays[0].shape[0], width), dtype=np.float32)
    for i, a in enumerate(arrays):  # one copy per instance
        out[i, :, : a.shape[1]] = a
    return torch.from_numpy(out)
