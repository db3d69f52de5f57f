"""Permutation audit (J&W §4.2.1, Algorithm 2, Fig. 3).

For each instance, P (default 100) random permutations α_p of the observed attention α̂ over its real non-marker
positions (``exclude_markers``; marker weights stay in place) go through the decoder with the encoder states h
fixed, ŷ_p = Dec(h, α_p), and Δŷ_p = TVD(ŷ_p, ŷ). All B·P permuted distributions of a batch are one product
with the per-token logits (:func:`~attnaudit.jain_wallace.common.sample_logits`). Permutations come from a
counter-based hash of ``instance_seed(seed, id)`` (:mod:`attnaudit.jain_wallace.rng`), so they do not depend on
batching or chunking.
"""

from __future__ import annotations

import numpy as np
import torch

from attnaudit.jain_wallace import rng
from attnaudit.jain_wallace.common import Context, batch_seeds, instance_columns, sample_logits
from attnaudit.masks import content_mask
from attnaudit.metrics import tvd

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
QUANTILE_COLUMNS = ("delta_q05", "delta_q25", "delta_median", "delta_q75", "delta_q95")


def permutation_keys(seeds: torch.Tensor, n: int, width: int) -> torch.Tensor:
    """``[B, n, width]`` sort keys in (0, 1): permutation p of instance b orders its permutable positions by
    ``keys[b, p, t]``."""
    return rng.uniform(seeds, n, width, rng.STREAM_PERMUTATION)


def permute(alpha: torch.Tensor, permutable: torch.Tensor, seeds: torch.Tensor, n: int) -> torch.Tensor:
    """``[B, n, T]``: n permutations of each row of ``alpha`` [B, T] among its ``permutable`` positions; the
    other positions (markers, padding) keep their value."""
    batch, width = alpha.shape
    positions = torch.arange(width, device=alpha.device)
    keys = permutation_keys(seeds, n, width).to(alpha.device)
    # permutable positions sort first in random order; the fixed ones after them, in position order
    keys = torch.where(permutable[:, None, :], keys, 2.0 + positions.double())
    source = keys.argsort(dim=-1, stable=True)  # [B, n, T]
    target = torch.where(permutable, positions, width + positions).argsort(dim=-1, stable=True)  # [B, T]
    values = alpha[:, None, :].expand(batch, n, width).gather(-1, source)
    return torch.empty_like(values).scatter_(-1, target[:, None, :].expand(batch, n, width), values)


@torch.no_grad()
def deltas_given_h(model, out, seeds: torch.Tensor, n: int, permutable: torch.Tensor) -> torch.Tensor:
    """Δŷ [B, n] from the model output of a batch (h, α̂, ŷ): permute, decode once, TVD."""
    alphas = permute(out.attention, permutable, seeds, n)
    probs = torch.softmax(sample_logits(model, out.hidden, alphas, out.query), dim=-1)  # [B, n, C]
    return tvd(probs, out.probs[:, None, :])


@torch.no_grad()
def permutation_deltas(model, batch, seeds: torch.Tensor, n: int, permutable: torch.Tensor):
    """``(output, Δŷ [B, n])`` of Algorithm 2 for one batch: one encoder pass, then h stays fixed."""
    out = model(batch)
    return out, deltas_given_h(model, out, seeds, n, permutable)


def permutation_batch(model, batch, ctx: Context) -> dict:
    options = ctx.options["permutation"]
    permutable = content_mask(batch, ctx.markers, options["exclude_markers"])
    out, deltas = permutation_deltas(
        model, batch, batch_seeds(ctx.seed, batch.ids), options["n_permutations"], permutable
    )
    deltas = deltas.double().cpu()
    quantiles = torch.quantile(deltas, torch.tensor(QUANTILES, dtype=torch.float64), dim=1).numpy()
    columns = instance_columns(batch, out.probs)
    columns["n_permuted"] = permutable.sum(dim=1).cpu().numpy()
    columns["max_attention"] = out.attention.max(dim=1).values.double().cpu().numpy()
    for name, values in zip(QUANTILE_COLUMNS, quantiles):
        columns[name] = values
    columns["delta_mean"] = deltas.mean(dim=1).numpy()
    columns["delta_max"] = deltas.max(dim=1).values.numpy()
    columns["deltas"] = list(deltas.float().numpy().astype(np.float32))
    return columns
