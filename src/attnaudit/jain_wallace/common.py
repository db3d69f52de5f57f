"""Helpers shared by the three J&W audits: marker positions, per-instance seeds, per-instance columns."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attnaudit.auditing import instance_seed
from attnaudit.models import Batch


@dataclass
class Context:
    """What an audit needs besides the model and the batch."""

    options: dict  # resolved jain_wallace options (attnaudit.jain_wallace.options.resolve)
    markers: tuple[int, ...]  # vocabulary ids of the sentence markers <s>, </s>
    seed: int = 0  # base seed; each instance draws from instance_seed(seed, id)


def batch_seeds(base_seed: int, ids: list[str]) -> torch.Tensor:
    return torch.tensor([instance_seed(base_seed, i) for i in ids], dtype=torch.int64)


def ragged(values: torch.Tensor, lengths: torch.Tensor) -> list[np.ndarray]:
    """Rows of a right-padded ``[B, T]`` tensor cut to their lengths, as float32 arrays (parquet list columns)."""
    array = values.detach().float().cpu().numpy()
    return [array[i, :n] for i, n in enumerate(lengths.tolist())]


def instance_columns(batch: Batch, probs: torch.Tensor) -> dict:
    """The columns every J&W audit row starts with (``row`` is added by the runner)."""
    return {
        "id": list(batch.ids),
        "label": batch.labels.cpu().numpy() if batch.labels is not None else np.full(len(batch.ids), -1),
        "predicted_class": probs.argmax(dim=-1).cpu().numpy(),
        "n_tokens": batch.lengths.cpu().numpy(),
    }


def sample_logits(model, hidden: torch.Tensor, alpha: torch.Tensor, query: torch.Tensor | None) -> torch.Tensor:
    """Logits ``[B, S, C]`` for S attention distributions per instance ``alpha [B, S, T]`` with h fixed. A linear
    decoder is applied to each state once, Dec(Σ_t α_t h_t) = Σ_t α_t (W h_t + b) (T&Š Eq. 9), so the S samples
    cost a ``[S, T] × [T, C]`` product instead of ``[S, T] × [T, m]`` then the decoder."""
    if getattr(model, "linear_decoder", False) and not model.training:
        return torch.bmm(alpha, model.token_logits(hidden, query))
    return model.decode(hidden, alpha, query)
