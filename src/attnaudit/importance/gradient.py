"""Gradient importance of Jain & Wallace (2019), Algorithm 1 with the attention module detached (Appendix B).

g_t = |Σ_w 1[x_tw = 1] ∂ŷ/∂x_tw|: the derivative of the predicted-class output ŷ_c (a probability, as J&W's
sigmoid output) with respect to the active entry of the one-hot input, which is ∇_{e_t} ŷ_c · e_t for the
embedding e_t of token t (J&W's code: ``(grad * embedding).sum(-1)``, absolute values). The graph is cut at the
attention module, so α̂ acts as a separate input held at its observed value. One backward pass serves the whole
batch: instances do not interact, so ∂(Σ_b ŷ_b)/∂e_b = ∂ŷ_b/∂e_b. A one-layer BiLSTM is differentiated through
time by hand (:mod:`attnaudit.models.input_gradients`: no embedding or weight gradients), any other model by
autograd (:func:`autograd_gradient_times_embedding`).
"""

import torch

from attnaudit.importance.registry import ImportanceMethod, register
from attnaudit.models import input_gradients


def autograd_gradient_times_embedding(model, batch) -> torch.Tensor:
    """Signed ∇_{e_t} ŷ_c · e_t ``[B, T]`` by autograd through the whole model, attention detached."""
    with torch.enable_grad():
        embedded = model.embed(batch).detach().requires_grad_(True)
        out = model(batch, embedded=embedded, detach_attention=True)
        predicted = out.logits.argmax(dim=-1, keepdim=True)
        target = out.probs.gather(1, predicted).sum()
        (grad,) = torch.autograd.grad(target, embedded)
    return (grad * embedded.detach()).sum(dim=-1)


@register
class Gradient(ImportanceMethod):
    name = "gradient"
    signed = False
    citation = "Jain & Wallace 2019, Algorithm 1 and Appendix B"

    def attribute(self, model, batch):
        if input_gradients.supports(model):
            scores = input_gradients.gradient_times_embedding(model, batch)
        else:
            scores = autograd_gradient_times_embedding(model, batch)
        return scores.abs().masked_fill(~batch.mask, 0.0)
