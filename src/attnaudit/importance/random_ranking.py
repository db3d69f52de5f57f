"""Random ranking: the chance baseline of the faithfulness and agreement audits (DeYoung et al. 2020, ERASER
§4; Bastings & Filippova 2020 §3.3, §6).

Scores are uniform draws seeded per instance from ``instance_seed(seed, id)`` (``attnaudit.auditing``), so an
instance gets the same ranking whatever batch, padding width or chunk it lands in. Needs ``batch.ids``.
"""

import torch

from attnaudit import AttnauditError
from attnaudit.importance.registry import ImportanceMethod, register


@register
class RandomRanking(ImportanceMethod):
    name = "random"
    signed = False
    citation = "random baseline (DeYoung et al. 2020, §4), seeded per instance"

    def __init__(self, seed: int = 0):
        self.seed = int(seed)

    @torch.no_grad()
    def attribute(self, model, batch):
        from attnaudit.auditing import instance_seed

        if len(batch.ids) != batch.tokens.shape[0]:
            raise AttnauditError("the random ranking is seeded per instance and needs batch.ids")
        scores = torch.zeros(batch.mask.shape, dtype=torch.float32)
        mask = batch.mask.cpu()
        for row, instance in enumerate(batch.ids):  # one draw per instance, not per token
            generator = torch.Generator().manual_seed(instance_seed(self.seed, str(instance)))
            scores[row, mask[row]] = torch.rand(int(mask[row].sum()), generator=generator)
        return scores.to(batch.mask.device).masked_fill(~batch.mask, 0.0)
