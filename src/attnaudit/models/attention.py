"""Attention modules: hidden states (and a query) → a distribution α over the real positions of each instance.

Every module returns α itself ``[B, T]`` (0 on padding, rows sum to 1), so learned, frozen and guided attention
look the same to the classifier and to every audit. Learned and uniform attention weigh the real tokens without
the sentence markers <s>, </s>, as J&W's code masks them out of the softmax (their ``BatchHolder`` mask) and W&P's
inherits it; a model with ``attend_to_markers`` weighs them too. Guided attention is the guide as given."""

from __future__ import annotations

import math

import torch
from torch import nn

from attnaudit.masks import content_positions
from attnaudit.models.batch import Batch


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Softmax over real positions only; padded positions get exactly 0."""
    scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1).masked_fill(~mask, 0.0)


class AttentionSupport(nn.Module):
    """What learned and uniform attention share: the positions α may weigh."""

    def __init__(self, markers: tuple[int, ...], attend_to_markers: bool):
        super().__init__()
        self.markers = () if attend_to_markers else tuple(markers)

    def support(self, batch: Batch) -> torch.Tensor:
        """``[B, T]``: the real tokens without the excluded markers (all real tokens of an instance that has
        nothing else, :func:`attnaudit.masks.content_positions`)."""
        return content_positions(batch.tokens, batch.mask, self.markers)


class AdditiveAttention(AttentionSupport):
    """φ(h, Q) = vᵀ tanh(W₁h + W₂Q) (Bahdanau; J&W §2); W₁ maps m → m/2 as in J&W's code."""

    def __init__(self, dim: int, markers: tuple[int, ...] = (), attend_to_markers: bool = False):
        super().__init__(markers, attend_to_markers)
        self.w_hidden = nn.Linear(dim, dim // 2)
        self.w_query = nn.Linear(dim, dim // 2, bias=False)
        self.v = nn.Linear(dim // 2, 1, bias=False)

    def scores(self, hidden: torch.Tensor, query: torch.Tensor | None) -> torch.Tensor:
        """φ per position ``[B, T]``, before the softmax."""
        z = self.w_hidden(hidden)
        if query is not None:
            z = z + self.w_query(query).unsqueeze(1)
        return self.v(torch.tanh(z)).squeeze(-1)

    def forward(self, hidden: torch.Tensor, query: torch.Tensor | None, batch: Batch) -> torch.Tensor:
        return masked_softmax(self.scores(hidden, query), self.support(batch))


class DotAttention(AttentionSupport):
    """Scaled dot product φ(h, Q) = hQ/√m (J&W §2); single-sequence models use a learned query ~ N(0, 1)
    (T&Š App. C: PyTorch's default initialisation makes dot attention collapse to uniform)."""

    def __init__(self, dim: int, markers: tuple[int, ...] = (), attend_to_markers: bool = False):
        super().__init__(markers, attend_to_markers)
        self.learned_query = nn.Parameter(torch.randn(dim))
        self.scale = 1.0 / math.sqrt(dim)

    def scores(self, hidden: torch.Tensor, query: torch.Tensor | None) -> torch.Tensor:
        """φ per position ``[B, T]``, before the softmax."""
        q = self.learned_query.expand(hidden.shape[0], -1) if query is None else query
        return torch.einsum("btm,bm->bt", hidden, q) * self.scale

    def forward(self, hidden: torch.Tensor, query: torch.Tensor | None, batch: Batch) -> torch.Tensor:
        return masked_softmax(self.scores(hidden, query), self.support(batch))


def uniform_over(support: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``[B, T]``: 1/n on the n ``support`` positions of each row, 0 elsewhere."""
    weights = support.to(dtype)
    return weights / weights.sum(dim=1, keepdim=True).clamp_min(1.0)


class UniformAttention(AttentionSupport):
    """Attention frozen to uniform weights over the real non-marker tokens, no parameters (W&P §3.2: α_t = 1/(L−2)
    with <s>, </s> at 0, as their ``FrozenAttnDecoder``)."""

    def forward(self, hidden: torch.Tensor, query: torch.Tensor | None, batch: Batch) -> torch.Tensor:
        return uniform_over(self.support(batch), hidden.dtype)


class GuidedAttention(nn.Module):
    """A fixed per-instance distribution given with the batch (``batch.guide``), in training and testing: W&P §3.4
    guide a diagnostic MLP with another model's attention, as that model weighed the tokens. No parameters."""

    def forward(self, hidden: torch.Tensor, query: torch.Tensor | None, batch: Batch) -> torch.Tensor:
        if batch.guide is None:
            from attnaudit import AttnauditError

            raise AttnauditError("a guided-attention model needs the guide distribution with every batch (none given)")
        guide = batch.guide.to(hidden.dtype).masked_fill(~batch.mask, 0.0)
        return guide / guide.sum(dim=1, keepdim=True).clamp_min(torch.finfo(hidden.dtype).tiny)


def build_attention(kind: str, dim: int, markers: tuple[int, ...], attend_to_markers: bool) -> nn.Module:
    if kind == "additive":
        return AdditiveAttention(dim, markers, attend_to_markers)
    if kind == "dot":
        return DotAttention(dim, markers, attend_to_markers)
    if kind == "uniform":
        return UniformAttention(markers, attend_to_markers)
    return GuidedAttention()
