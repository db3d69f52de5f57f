"""Integrated gradients (Sundararajan et al. 2017), Bastings & Filippova (2020) §3.1 Eq. 4:
(1/m) Σ_k ∇_{x_i} f_c(b + k/m (x − b)) · (x_i − b_i), summed over the embedding dimension (signed saliency).

Captum's ``IntegratedGradients`` on the word embeddings (default Gauss–Legendre quadrature with ``n_steps``
points; ``method="riemann_right"`` is Eq. 4 literally). Baseline ``zeros`` (B&F's all-zeros vectors), ``pad``
(the pad embedding at every position) or ``unk`` (the ``<unk>`` embedding, id ``unk_index``). Captum repeats the
batch's tokens and mask with the interpolated inputs; ``internal_batch_size`` rows per forward pass, fewer for
long documents (``max_elements`` embedding floats).

Completeness (Sundararajan et al. Prop. 1): Σ_i attributions = f_c(x) − f_c(b). Captum's convergence delta,
that sum minus the difference, is returned per instance by :meth:`explain` (``extras["delta"]``), with
``extras["flagged"]`` marking instances with |delta| > ``delta_tolerance`` (on the output's scale: probability by
default), so the audit can store and report them.
"""

import logging

import torch

from attnaudit import AttnauditError
from attnaudit.importance._forward import check_output, embedding_forward, gradient_mode
from attnaudit.importance.registry import Attribution, ImportanceMethod, predicted_class, register

log = logging.getLogger(__name__)
BASELINES = ("zeros", "pad", "unk")


@register
class IntegratedGradients(ImportanceMethod):
    name = "integrated_gradients"
    signed = True
    citation = "Bastings & Filippova 2020, §3.1 Eq. 4 (Sundararajan et al. 2017)"

    def __init__(
        self,
        n_steps: int = 50,
        baseline: str = "zeros",
        method: str = "gausslegendre",
        internal_batch_size: int = 2048,
        delta_tolerance: float = 0.01,
        output: str = "prob",
        unk_index: int = 1,
        max_elements: int = 1 << 25,
    ):
        if baseline not in BASELINES:
            raise AttnauditError(f"integrated_gradients baseline must be one of {BASELINES}, got {baseline!r}")
        if n_steps < 2:
            raise AttnauditError(f"integrated_gradients n_steps must be ≥ 2 (Captum), got {n_steps}")
        self.n_steps, self.baseline, self.method = int(n_steps), baseline, method
        self.internal_batch_size = int(internal_batch_size)
        self.delta_tolerance = float(delta_tolerance)
        self.output = check_output(output)
        self.unk_index = int(unk_index)
        self.max_elements = int(max_elements)

    def baselines(self, model, embedded: torch.Tensor) -> torch.Tensor:
        if self.baseline == "zeros":
            return torch.zeros_like(embedded)
        index = model.cfg.pad_index if self.baseline == "pad" else self.unk_index
        return model.embedding.weight[index].detach().expand_as(embedded).contiguous()

    def rows_per_forward(self, embedded: torch.Tensor) -> int:
        """Interpolated rows per forward pass: ``internal_batch_size``, fewer for long documents (at most
        ``max_elements`` embedding floats), never fewer than the batch (Captum's minimum: one step)."""
        batch, width, dim = embedded.shape
        return max(batch, min(self.internal_batch_size, self.max_elements // max(1, width * dim)))

    def attribute(self, model, batch):
        return self.explain(model, batch).scores

    def explain(self, model, batch) -> Attribution:
        """Scores with the per-instance convergence delta (Sundararajan et al. 2017, §2 completeness) and a flag
        where |delta| exceeds ``delta_tolerance``."""
        from captum.attr import IntegratedGradients as CaptumIG  # imported when used: a cheap registry

        target = predicted_class(model, batch)
        with gradient_mode():
            embedded = model.embed(batch).detach().requires_grad_(True)
            attributions, delta = CaptumIG(embedding_forward(model, self.output)).attribute(
                embedded,
                baselines=self.baselines(model, embedded),
                target=target,
                additional_forward_args=(batch.tokens, batch.mask, batch.guide),
                n_steps=self.n_steps,
                method=self.method,
                internal_batch_size=self.rows_per_forward(embedded),
                return_convergence_delta=True,
            )
        delta = delta.detach().reshape(-1)
        flagged = delta.abs() > self.delta_tolerance
        if flagged.any():
            log.debug(
                "integrated gradients: %d of %d instances with |delta| > %g (max %.3g)",
                int(flagged.sum()),
                len(delta),
                self.delta_tolerance,
                float(delta.abs().max()),
            )
        scores = attributions.detach().sum(dim=-1).masked_fill(~batch.mask, 0.0)
        return Attribution(scores, {"delta": delta, "flagged": flagged})
