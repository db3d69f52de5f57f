"""The attention weights α̂ themselves, read as importance (J&W §2; the object of the whole audit)."""

import torch

from attnaudit.importance.registry import ImportanceMethod, register


@register
class Attention(ImportanceMethod):
    name = "attention"
    signed = False
    citation = "Jain & Wallace 2019, §2"

    @torch.no_grad()
    def attribute(self, model, batch):
        return model(batch).attention
