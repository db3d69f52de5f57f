"""Gradient × input of Denil et al. (2015), Bastings & Filippova (2020) §3.1 Eq. 3: ∇_{x_i} f_c(x_1:n) · x_i.

Captum's ``InputXGradient`` on the word embeddings, summed over the embedding dimension (the dot product of
Eq. 3). Signed: B&F's *saliency* (the marginal effect of the actual input vector), positive = evidence for the
predicted class. Full computation path (attention not detached).
"""

from attnaudit.importance import ImportanceMethod, register
from attnaudit.importance._forward import captum_on_embeddings, check_output


@register
class GradXInput(ImportanceMethod):
    name = "grad_x_input"
    signed = True
    citation = "Bastings & Filippova 2020, §3.1 Eq. 3 (Denil et al. 2015)"

    def __init__(self, output: str = "prob"):
        self.output = check_output(output)

    def attribute(self, model, batch):
        from captum.attr import InputXGradient  # imported when used: the registry stays cheap to load

        attributions = captum_on_embeddings(InputXGradient, model, batch, self.output)
        return attributions.sum(dim=-1).masked_fill(~batch.mask, 0.0)
