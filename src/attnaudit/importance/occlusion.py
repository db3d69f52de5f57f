"""Occlusion (Zeiler & Fergus 2014; Li et al. 2016b), Bastings & Filippova (2020) §3.3 Eq. 5:
f_c(x_1:n) − f_c(x_1:n | x_i = 0), the predicted-class output minus the output with word embedding x_i zeroed
(the other inputs unmodified, the sequence length unchanged).

A one-layer BiLSTM with learned attention resumes from the states an occlusion leaves unchanged, as J&W's
leave-one-out does for deletions (:func:`attnaudit.models.deletions.occlusion_outputs`; ``tolerance`` as ``loo``'s):
~T × the fading length LSTM steps per instance instead of T re-encodings of T tokens, so long documents cost about
what their leave-one-out costs. A CNN recomputes only the states within its widest kernel's radius of the token, a
token-wise encoder (average, MLP) only the token's own (:func:`attnaudit.models.deletions.local_occlusion_logits`).
Other models (stacked BiLSTMs): all Σ_b T_b single-position occlusions of a batch go through the model as one
``[Σ_b T_b, T, d]`` embedding tensor, in slices of at most ``max_elements`` floats (2^22: an SST BiLSTM's occlusion took
0.73× the CPU time of 2^25-float slices, which no longer fit in the cache) — the same numbers as Captum's
``Occlusion`` with a (1, d) window and zero baseline (checked in the tests), without its Python loop over positions.
Signed: positive = zeroing the word lowers the predicted-class output.
"""

import torch

from attnaudit.importance._forward import check_output, class_scores, predicted_class_change, row_slices
from attnaudit.importance.registry import ImportanceMethod, register
from attnaudit.models import deletions


@register
class Occlusion(ImportanceMethod):
    name = "occlusion"
    signed = True
    citation = "Bastings & Filippova 2020, §3.3 Eq. 5 (Zeiler & Fergus 2014; Li et al. 2016b)"
    memory_options = ("max_elements",)

    def __init__(self, output: str = "prob", max_elements: int = 4_194_304, tolerance: float = 1e-6):  # 2**22
        self.output = check_output(output)
        self.max_elements = int(max_elements)
        self.tolerance = float(tolerance)  # as LeaveOneOut's: when an occlusion's states have faded

    @torch.no_grad()
    def attribute(self, model, batch):
        if deletions.supports(model, batch):
            logits, occluded = deletions.occlusion_outputs(model, batch, self.tolerance)  # [B, C], [T, B, C]
        elif deletions.local_radius(model, batch) is not None:
            logits, occluded = model(batch).logits, deletions.local_occlusion_logits(model, batch)
        else:
            return self.reencoded(model, batch)
        return predicted_class_change(logits, occluded, self.output).t().masked_fill(~batch.mask, 0.0)

    @torch.no_grad()
    def reencoded(self, model, batch):
        """Every occlusion through the whole model (any model; the reference for the BiLSTM's resumed states)."""
        embedded = model.embed(batch)
        logits = model(batch, embedded=embedded).logits
        target = logits.argmax(dim=-1)  # the predicted class
        full = class_scores(logits, self.output)
        b, t = batch.mask.nonzero(as_tuple=True)
        reference = full.gather(1, target[:, None]).squeeze(1)
        occluded = torch.empty(len(b), dtype=full.dtype, device=full.device)
        width, dim = embedded.shape[1], embedded.shape[2]
        for rows in row_slices(len(b), width, dim, self.max_elements):
            bb, tt = b[rows], t[rows]
            e = embedded[bb].clone()
            e[torch.arange(len(bb), device=e.device), tt] = 0.0
            sub = batch.select(bb)
            occluded[rows] = (
                class_scores(model(sub, embedded=e).logits, self.output).gather(1, target[bb][:, None]).squeeze(1)
            )
        scores = torch.zeros(batch.mask.shape, dtype=full.dtype, device=full.device)
        scores[b, t] = reference[b] - occluded
        return scores
