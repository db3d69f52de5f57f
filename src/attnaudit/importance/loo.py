"""Deletion leave-one-out importance of Jain & Wallace (2019), Algorithm 1: Δŷ_t = TVD(ŷ(x₋t), ŷ(x)).

x₋t is x with token t *removed* (not masked or replaced) and the shorter sequence re-encoded. All Σ_b T_b
deletions of a batch are built as one ``[Σ_b T_b, T−1]`` tensor and go through the model in one forward pass
(split into slices only if it holds more than ``max_tokens`` token positions, for very long documents). Deleting
the only token of a one-token instance leaves nothing to encode: that score is NaN.
"""

import torch

from attnaudit.importance import ImportanceMethod, register
from attnaudit.metrics import tvd
from attnaudit.models import Batch


def deletions(batch: Batch) -> tuple[Batch, torch.Tensor, torch.Tensor]:
    """Every single-token deletion of every instance: ``(deleted batch [N, T−1], b, t)`` with N = Σ_b T_b,
    row n = instance ``b[n]`` without its token ``t[n]`` (rows ordered by instance, then position)."""
    tokens, mask = batch.tokens, batch.mask
    b, t = mask.nonzero(as_tuple=True)
    width = tokens.shape[1] - 1
    j = torch.arange(width, device=tokens.device)
    source = j[None, :] + (j[None, :] >= t[:, None]).long()  # skip position t
    remaining = mask.sum(dim=1)[b] - 1
    deleted_mask = j[None, :] < remaining[:, None]
    empty = remaining == 0
    if width > 0:
        deleted_mask[empty, 0] = True  # placeholder row (a pad token), scored NaN below
    return batch.with_positions(b, source, deleted_mask), b, t


@register
class LeaveOneOut(ImportanceMethod):
    name = "loo"
    signed = False
    citation = "Jain & Wallace 2019, Algorithm 1 (deletion leave-one-out, TVD)"

    def __init__(self, max_tokens: int = 1 << 21):
        self.max_tokens = int(max_tokens)

    @torch.no_grad()
    def attribute(self, model, batch):
        probs = model(batch).probs
        scores = torch.zeros(batch.mask.shape, dtype=probs.dtype, device=probs.device)
        if batch.tokens.shape[1] < 2:  # every instance has one token: nothing is left after a deletion
            return scores.masked_fill(batch.mask, float("nan"))
        deleted, b, t = deletions(batch)
        rows = max(1, self.max_tokens // deleted.tokens.shape[1])
        deleted_probs = torch.cat(
            [model(deleted.select(slice(start, start + rows))).probs for start in range(0, len(b), rows)]
        )
        delta = tvd(deleted_probs, probs[b])
        delta = delta.masked_fill(batch.mask.sum(dim=1)[b] == 1, float("nan"))  # nothing left to encode
        scores[b, t] = delta
        return scores
