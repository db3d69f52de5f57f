"""Deletion leave-one-out importance of Jain & Wallace (2019), Algorithm 1: Δŷ_t = TVD(ŷ(x₋t), ŷ(x)).

x₋t is x with token t *removed* (not masked or replaced) and the shorter sequence re-encoded. The deletions of a
batch form a (deleted position × instance) grid. A one-layer BiLSTM with learned attention resumes from the states
a deletion leaves unchanged (:mod:`attnaudit.models.deletions`); other models re-encode every shorter sequence,
in slices of at most ``max_tokens`` token positions (all at once for sentences, a few positions at a time for
long documents).
Deleting the only token of a one-token instance leaves nothing to encode: that score is NaN. Written by hand:
no maintained library implements deletion (rather than masking) leave-one-out.
"""

import torch

from attnaudit.auditing import token_budget
from attnaudit.importance.registry import ImportanceMethod, register
from attnaudit.metrics import tvd
from attnaudit.models import Batch
from attnaudit.models import deletions as deletions_module

# Token positions per pass when deletions are re-encoded (stacked BiLSTMs), per device. On a CPU one batch's worth
# (the audits' budget) is fastest: a T&S two-layer BiLSTM's SST LOO took 0.6× the CPU time of 2^18-position
# passes, whose activations no longer fit in the cache; a GPU wants large passes.
REENCODE_TOKENS = {"cpu": 4096, "cuda": 1 << 18}


def reencoding_budget(max_tokens: int | dict | None) -> int | dict:
    """``max_tokens`` as configured (one number, or one per device type), or :data:`REENCODE_TOKENS`."""
    if max_tokens is None:
        return dict(REENCODE_TOKENS)
    return {k: int(v) for k, v in max_tokens.items()} if isinstance(max_tokens, dict) else int(max_tokens)


def deletions(batch: Batch, first: int = 0, last: int | None = None) -> tuple[Batch, torch.Tensor, torch.Tensor]:
    """Every instance with one of its positions ``first..last−1`` deleted: ``(deleted batch [N, T−1], b, t)`` in
    position-major order (row n = instance ``b[n]`` without its token ``t[n]``, N = (last − first)·B). Rows with
    t beyond an instance's length delete nothing real (they are ignored); a one-token instance's deletion is a
    placeholder row (scored NaN)."""
    n_batch, width = batch.tokens.shape
    last = width if last is None else last
    t = torch.arange(first, last, device=batch.tokens.device).repeat_interleave(n_batch)
    b = torch.arange(n_batch, device=batch.tokens.device).repeat(last - first)
    return deleted_at(batch, b, t), b, t


def deleted_at(batch: Batch, b: torch.Tensor, t: torch.Tensor) -> Batch:
    """Instance ``b[n]`` without its token ``t[n]``, for every n: ``[N, T−1]`` (see :func:`deletions`)."""
    width = batch.tokens.shape[1]
    j = torch.arange(width - 1, device=batch.tokens.device)
    source = j[None, :] + (j[None, :] >= t[:, None]).long()  # skip position t
    remaining = (batch.lengths[b] - 1).clamp_min(0)
    deleted_mask = j[None, :] < remaining[:, None]
    if width > 1:
        deleted_mask[remaining == 0, 0] = True  # placeholder (a pad token): nothing is left to encode
    return batch.with_positions(b, source, deleted_mask)


def reencode_emptied(model, batch: Batch, deleted: torch.Tensor) -> torch.Tensor:
    """``deleted`` ``[T, B, C]`` with the deletions that leave an instance nothing but its sentence markers
    re-encoded: the attention then falls back to the markers (:func:`attnaudit.masks.content_positions`), which the
    closed forms, accumulating the non-marker positions only, leave empty (NaN)."""
    support = model.attention.support(batch)
    emptied = (batch.mask & ~support).any(dim=1) & (support.sum(dim=1) == 1) & (batch.lengths > 1)
    if not emptied.any():
        return deleted
    b = emptied.nonzero()[:, 0]
    t = support[b].int().argmax(dim=1)
    deleted = deleted.clone()
    deleted[t, b] = model(deleted_at(batch, b, t)).logits.to(deleted.dtype)
    return deleted


def deletion_outputs(
    model, batch: Batch, max_tokens: int | dict, tolerance: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits of every instance as it is ``[B, C]`` and with its token t deleted ``[T, B, C]``, for every
    position t (entries beyond an instance's length unspecified). A one-layer BiLSTM with learned attention
    resumes from the states a deletion leaves unchanged, all deletions at once, until they fade within
    ``tolerance`` of the original states (and reads the undeleted logits off the states it computes); a
    token-wise encoder (average, MLP) only drops the deleted position from the attention softmax and a CNN
    recomputes the few states around it (:mod:`attnaudit.models.deletions`); any other model (stacked BiLSTMs)
    re-encodes every shorter sequence, in slices of at most ``max_tokens`` token positions (a number, or one per
    device type)."""
    n_batch, width = batch.tokens.shape
    if deletions_module.supports(model, batch):  # the original logits come from the states it computes anyway
        original, deleted = deletions_module.deletion_outputs(model, batch, tolerance)
        return original, reencode_emptied(model, batch, deleted)
    original = model(batch).logits
    if deletions_module.local_radius(model, batch) is not None:
        return original, reencode_emptied(model, batch, deletions_module.local_deletion_logits(model, batch, 0, width))
    per_slice = max(1, token_budget(max_tokens, batch.tokens.device) // (n_batch * (width - 1)))
    pieces = []
    for first in range(0, width, per_slice):
        last = min(width, first + per_slice)
        deleted, _, _ = deletions(batch, first, last)
        pieces.append(model(deleted).logits.view(last - first, n_batch, -1))
    return original, torch.cat(pieces)


def per_position(values: torch.Tensor, batch: Batch) -> torch.Tensor:
    """``[T, B]`` per deleted position → ``[B, T]`` scores: 0 on padding, NaN for a one-token instance (nothing
    is left to encode after its deletion)."""
    scores = values.t().masked_fill(~batch.mask, 0.0)
    return scores.masked_fill(batch.mask & (batch.lengths == 1)[:, None], float("nan"))


@register
class LeaveOneOut(ImportanceMethod):
    name = "loo"
    signed = False
    citation = "Jain & Wallace 2019, Algorithm 1 (deletion leave-one-out, TVD)"
    memory_options = ("max_tokens",)

    def __init__(self, max_tokens: int | dict | None = None, tolerance: float = 1e-6):
        self.max_tokens = reencoding_budget(max_tokens)  # token positions per pass when re-encoding deletions
        self.tolerance = float(tolerance)  # a deletion's states this close to the original ones have faded

    @torch.no_grad()
    def attribute(self, model, batch):
        if batch.tokens.shape[1] < 2:  # every instance has one token: nothing is left after a deletion
            return torch.zeros(batch.mask.shape).masked_fill(batch.mask, float("nan"))
        original, deleted = deletion_outputs(model, batch, self.max_tokens, self.tolerance)
        probs, deleted = torch.softmax(original, dim=-1), torch.softmax(deleted, dim=-1)  # [B, C], [T, B, C]
        return per_position(tvd(deleted, probs[None]), batch)
