"""Omission (Kádár et al. 2017; Poerner et al. 2018), Bastings & Filippova (2020) §3.3: like occlusion (Eq. 5)
but the word is *left out* of the input, f_c(x_1:n) − f_c(x_1:n without x_i), and the shorter sequence
re-encoded.

This is Jain & Wallace's deletion leave-one-out (``loo``) with the signed predicted-class difference instead of
the TVD between output distributions: it reuses ``loo``'s deletions of every position
(:func:`attnaudit.importance.loo.deletion_outputs`, without re-encoding for a one-layer BiLSTM). For two classes
|omission| = ``loo`` exactly when ``output="prob"``. Deleting the only token of a one-token instance leaves nothing
to encode: NaN, as ``loo``.
"""

import torch

from attnaudit.importance._forward import check_output, predicted_class_change
from attnaudit.importance.registry import ImportanceMethod, register


@register
class Omission(ImportanceMethod):
    name = "omission"
    signed = True
    citation = "Bastings & Filippova 2020, §3.3 (omission: Kádár et al. 2017; = J&W deletion LOO, signed)"
    memory_options = ("max_tokens",)

    def __init__(self, output: str = "prob", max_tokens: int | dict | None = None, tolerance: float = 1e-6):
        from attnaudit.importance.loo import reencoding_budget

        self.output = check_output(output)
        self.max_tokens = reencoding_budget(max_tokens)  # token positions per pass when re-encoding deletions
        self.tolerance = float(tolerance)  # as LeaveOneOut's: when a deletion's states have faded

    @torch.no_grad()
    def attribute(self, model, batch):
        from attnaudit.importance.loo import deletion_outputs, per_position  # J&W's deletions (imported lazily)

        if batch.tokens.shape[1] < 2:  # every instance has one token: nothing is left after a deletion
            return torch.zeros(batch.mask.shape).masked_fill(batch.mask, float("nan"))
        logits, deleted = deletion_outputs(model, batch, self.max_tokens, self.tolerance)
        return per_position(predicted_class_change(logits, deleted, self.output), batch)
