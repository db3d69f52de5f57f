"""Padded batches and model outputs: the data every model and audit exchanges (masks explicit, padding never
receives attention)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import torch


@dataclass
class Batch:
    """A padded batch. ``mask`` is True on real tokens.

    ``guide`` is a fixed per-instance attention distribution (W&P §3.4 guided attention; used by ``guided`` models
    in training and testing), ``teacher_probs``/``teacher_attention`` are a teacher model's outputs for the
    objective terms that learn from another model (W&P §4 ``imitate``). Query fields are for QA/NLI models."""

    tokens: torch.Tensor  # [B, T] int64
    mask: torch.Tensor  # [B, T] bool
    labels: torch.Tensor | None = None  # [B] int64
    ids: list[str] = field(default_factory=list)
    query_tokens: torch.Tensor | None = None  # [B, Tq] for QA/NLI (query-conditioned attention)
    query_mask: torch.Tensor | None = None
    guide: torch.Tensor | None = None  # [B, T] float, rows sum to 1 over the mask
    teacher_probs: torch.Tensor | None = None  # [B, C]
    teacher_attention: torch.Tensor | None = None  # [B, T]
    # [B, T₀] the unperturbed passage's tokens (−1 on padding) a QA model takes its answer candidates from, once
    # ``with_positions`` has deleted or erased some (J&W's code keeps the full passage's entity mask); None: ``tokens``
    answer_tokens: torch.Tensor | None = None

    @property
    def lengths(self) -> torch.Tensor:
        return self.mask.sum(dim=1)

    def _map(self, fn) -> Batch:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return Batch(**{k: (fn(v) if isinstance(v, torch.Tensor) else v) for k, v in values.items()})

    def to(self, device: torch.device | str) -> Batch:
        return self._map(lambda t: t.to(device))

    def select(self, rows: torch.Tensor | slice) -> Batch:
        """The instances ``rows`` (an index tensor, possibly with repeats, or a slice), every field alike."""
        selected = self._map(lambda t: t[rows])
        if self.ids:
            index = range(len(self.ids))[rows] if isinstance(rows, slice) else rows.tolist()
            selected.ids = [self.ids[i] for i in index]
        return selected

    def with_positions(self, rows: torch.Tensor, source: torch.Tensor, mask: torch.Tensor) -> Batch:
        """New instances made of instance ``rows[n]``'s positions ``source[n]`` (``[N, T']``), real where ``mask``
        (deletions, ERASER erasures). Labels, ids and teacher outputs are dropped; a guide follows its tokens and
        is renormalised over the positions that remain; the answer candidates stay the whole instance's
        (``answer_tokens``)."""
        guide = None
        if self.guide is not None:
            guide = self.guide[rows].gather(1, source).masked_fill(~mask, 0.0)
            guide = guide / guide.sum(dim=1, keepdim=True).clamp_min(torch.finfo(guide.dtype).tiny)
        sub = lambda t: None if t is None else t[rows]
        answer_tokens = self.tokens.masked_fill(~self.mask, -1) if self.answer_tokens is None else self.answer_tokens
        return Batch(
            self.tokens[rows].gather(1, source),
            mask,
            query_tokens=sub(self.query_tokens),
            query_mask=sub(self.query_mask),
            guide=guide,
            answer_tokens=answer_tokens[rows],
        )


@dataclass
class ModelOutput:
    logits: torch.Tensor  # [B, C]
    probs: torch.Tensor  # [B, C]
    attention: torch.Tensor  # [B, T], 0 on padding, rows sum to 1
    hidden: torch.Tensor  # [B, T, m]
    embedded: torch.Tensor  # [B, T, d]
    query: torch.Tensor | None = None  # [B, m] or None
