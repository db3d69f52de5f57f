"""Tying (T&Š §3.1, Eq. 4): L_tying = δ/T Σ_t ‖h_t − e_t‖², keeping every hidden state close to its own word's
embedding; averaged over "all tokens in the batch", the markers <s>, </s> included and padding not (needs
2·lstm_hidden = the embedding size). The gradient reaches e_t too where the embeddings train (T&Š are silent)."""

from attnaudit import AttnauditError
from attnaudit.objectives import ObjectiveTerm, register


@register
class Tying(ObjectiveTerm):
    name = "tying"
    citation = "Tutek & Šnajder 2020, §3.1 Eq. 4"

    def __init__(self, spec, context):
        super().__init__(spec, context)
        self.delta = float(spec.get("delta", 10.0))

    def loss(self, model, batch, out):
        if out.hidden.shape[-1] != out.embedded.shape[-1]:
            raise AttnauditError(
                f"tying needs hidden states of the embedding size {out.embedded.shape[-1]}, got "
                f"{out.hidden.shape[-1]} (set lstm_hidden to half the embedding size)"
            )
        squared = (out.hidden - out.embedded).pow(2).sum(dim=-1)  # [B, T]
        mask = batch.mask.to(squared.dtype)
        return self.delta * (squared * mask).sum() / mask.sum().clamp_min(1.0)
