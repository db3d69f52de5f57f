"""Gradient sensitivity of Li et al. (2016a) as Bastings & Filippova (2020) write it, §3.1 Eq. 2: the L2 norm
‖∇_{x_i} f_c(x_1:n)‖₂ of the gradient of the predicted-class output with respect to the word embedding x_i.

Built on Captum's ``Saliency`` (``abs=False``, then the norm over the embedding dimension). The gradient follows
the whole computation path, attention included (unlike J&W's ``gradient``, which detaches it). Unsigned: B&F call
this *sensitivity*, not saliency (§3.1, after Ancona et al. 2019).
"""

from attnaudit.importance._forward import EmbeddingGradientMethod
from attnaudit.importance.registry import register


@register
class SaliencyL2(EmbeddingGradientMethod):
    name = "saliency_l2"
    signed = False
    citation = "Bastings & Filippova 2020, §3.1 Eq. 2 (Li et al. 2016a), L2 norm"
    captum_class = "Saliency"
    captum_options = {"abs": False}

    def reduce(self, attributions):
        return attributions.norm(dim=-1)
