"""Cross-entropy on the gold label (J&W Appendix A; softmax over C classes, equivalent to J&W's sigmoid for two),
class-weighted where the corpus asks for it (J&W: ADR)."""

import torch

from attnaudit.objectives import ObjectiveTerm, register


@register
class Classify(ObjectiveTerm):
    name = "classify"
    citation = "Jain & Wallace 2019, Appendix A"

    def __init__(self, spec, context):
        super().__init__(spec, context)
        self.loss_fn = torch.nn.CrossEntropyLoss(weight=context.class_weight)

    def loss(self, model, batch, out):
        return self.loss_fn(out.logits, batch.labels)
