"""Omission (Kádár et al. 2017; Poerner et al. 2018), Bastings & Filippova (2020) §3.3: like occlusion (Eq. 5)
but the word is *left out* of the input, f_c(x_1:n) − f_c(x_1:n without x_i), and the shorter sequence
re-encoded.

This is Jain & Wallace's deletion leave-one-out (``loo``) with the signed predicted-class difference instead of
the TVD between output distributions: it reuses ``loo``'s batched construction of all Σ_b T_b deletions
(:func:`attnaudit.importance.loo.deletions`, one forward pass). For two classes |omission| = ``loo`` exactly when
``output="prob"``. Deleting the only token of a one-token instance leaves nothing to encode: NaN, as ``loo``.
"""

import torch

from attnaudit.importance import ImportanceMethod, register
from attnaudit.importance._forward import check_output, class_scores


@register
class Omission(ImportanceMethod):
    name = "omission"
    signed = True
    citation = "Bastings & Filippova 2020, §3.3 (omission: Kádár et al. 2017; = J&W deletion LOO, signed)"

    def __init__(self, output: str = "prob", max_tokens: int = 1 << 21):
        self.output = check_output(output)
        self.max_tokens = int(max_tokens)

    @torch.no_grad()
    def attribute(self, model, batch):
        from attnaudit.importance.loo import deletions  # J&W's batched deletions (imported lazily)

        logits = model(batch).logits
        target = logits.argmax(dim=-1)
        full = class_scores(logits, self.output).gather(1, target[:, None]).squeeze(1)
        scores = torch.zeros(batch.mask.shape, dtype=full.dtype, device=full.device)
        if batch.tokens.shape[1] < 2:  # every instance has one token: nothing is left after a deletion
            return scores.masked_fill(batch.mask, float("nan"))
        deleted, b, t = deletions(batch)
        rows = max(1, self.max_tokens // deleted.tokens.shape[1])
        omitted = torch.cat(
            [
                class_scores(model(deleted.select(slice(start, start + rows))).logits, self.output)
                for start in range(0, len(b), rows)
            ]
        )
        delta = full[b] - omitted.gather(1, target[b][:, None]).squeeze(1)
        scores[b, t] = delta.masked_fill(batch.mask.sum(dim=1)[b] == 1, float("nan"))
        return scores
