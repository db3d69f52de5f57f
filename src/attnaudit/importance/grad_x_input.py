"""Gradient × input of Denil et al. (2015), Bastings & Filippova (2020) §3.1 Eq. 3: ∇_{x_i} f_c(x_1:n) · x_i.

Captum's ``InputXGradient`` on the word embeddings, summed over the embedding dimension (the dot product of
Eq. 3). Signed: B&F's *saliency* (the marginal effect of the actual input vector), positive = evidence for the
predicted class. Full computation path (attention not detached).
"""

from attnaudit.importance._forward import EmbeddingGradientMethod
from attnaudit.importance.registry import register


@register
class GradXInput(EmbeddingGradientMethod):
    name = "grad_x_input"
    signed = True
    citation = "Bastings & Filippova 2020, §3.1 Eq. 3 (Denil et al. 2015)"
    captum_class = "InputXGradient"

    def reduce(self, attributions):
        return attributions.sum(dim=-1)
