"""The consistently adversarial model (W&P §4; T&Š §3.3, Eq. 6–8): imitate a teacher's predictions while diverging
from its attention, L = TVD(ŷ, ŷ_teacher) − λ·D(α, α_teacher), mean over the batch, trained from scratch on the train
split against the teacher's saved outputs. The divergence D is the variant's ``divergence`` field: ``kl``,
KL(α ‖ α_teacher), as W&P's code trains (the default), or ``jsd``, the Jensen–Shannon divergence of T&Š's Eq. 6 and 8
(at most ln 2, so λ weighs a bounded term).

Choices, with W&P's code for comparison: TVD is the full ½‖ŷ − ŷ_t‖₁ (their code uses the positive-class
probability only, half of it for two classes); the divergence runs over the real non-marker tokens with both
distributions renormalised there (their teacher attentions are 0 at <s>, </s>, which gives log 0), clamped at
1e-10 so it stays finite; instances are averaged, not class-weighted and summed.
"""

import torch

from attnaudit import AttnauditError
from attnaudit.masks import content_positions
from attnaudit.metrics import jsd, tvd
from attnaudit.objectives import ObjectiveTerm, register

EPS = 1e-10


def renormalised(alpha: torch.Tensor, support: torch.Tensor) -> torch.Tensor:
    alpha = alpha.masked_fill(~support, 0.0)
    return alpha / alpha.sum(dim=-1, keepdim=True).clamp_min(EPS)


def attention_kl(alpha: torch.Tensor, teacher: torch.Tensor, support: torch.Tensor) -> torch.Tensor:
    """KL(α ‖ α_teacher) per instance over ``support``, both renormalised there (nats)."""
    p, q = renormalised(alpha, support), renormalised(teacher, support)
    terms = p * (torch.log(p.clamp_min(EPS)) - torch.log(q.clamp_min(EPS)))
    return terms.masked_fill(~support, 0.0).sum(dim=-1)


def attention_jsd(alpha: torch.Tensor, teacher: torch.Tensor, support: torch.Tensor) -> torch.Tensor:
    """JSD(α, α_teacher) per instance over ``support``, both renormalised there (nats, in [0, ln 2]; T&Š Eq. 8)."""
    return jsd(renormalised(alpha, support), renormalised(teacher, support))


#: the attention divergences D the objective can push up (attnaudit.modelsheet.DIVERGENCES checks the sheet's)
DIVERGENCES = {"kl": attention_kl, "jsd": attention_jsd}


@register
class Imitate(ObjectiveTerm):
    name = "imitate"
    citation = "Wiegreffe & Pinter 2019, §4; Tutek & Šnajder 2020, §3.3 Eq. 6–8"
    needs_teacher = True

    def __init__(self, spec, context):
        super().__init__(spec, context)
        self.lam = float(spec.get("lambda", 1.0))
        divergence = spec.get("divergence", "kl")
        if divergence not in DIVERGENCES:
            raise AttnauditError(f"imitate: divergence {divergence!r} is not one of {', '.join(DIVERGENCES)}")
        self.divergence = DIVERGENCES[divergence]

    def loss(self, model, batch, out):
        support = content_positions(batch.tokens, batch.mask, self.context.marker_ids)
        teacher_attention = batch.teacher_attention.to(out.attention.dtype)
        divergence = self.divergence(out.attention, teacher_attention, support)
        return (tvd(out.probs, batch.teacher_probs.to(out.probs.dtype)) - self.lam * divergence).mean()
