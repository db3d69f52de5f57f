"""Shared plumbing for the Bastings & Filippova (2020) saliency methods (not a method itself).

B&F §3 explain ``f_c(x_1:n)``, "the model output for target class c", with c the predicted class. Which output:

* ``prob``   — p_c = softmax(z)_c, the quantity the faithfulness metrics (ERASER, B&F §3.3/§6) measure; default
  for the gradient and occlusion methods (J&W's gradient also differentiates the probability).
* ``logit``  — z_c. With a softmax read-out z_c alone is not identified (adding one vector to every decoder row
  changes z_c but not the model), so it is offered for comparison only.
* ``margin`` — z_c − mean_{c'≠c} z_{c'}: the identified, still linear read-out (for two classes z_c − z_other,
  the log-odds). LRP needs a linear top layer and starts from it by default.

For two classes ``prob`` and ``margin`` rank tokens identically for gradient L2, gradient×input and occlusion
(∇p_c = p_c(1−p_c)∇m and p_c is monotone in m); they differ for integrated gradients and LRP.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import ClassVar

import torch

from attnaudit import AttnauditError
from attnaudit.importance.registry import ImportanceMethod
from attnaudit.models import AttentionClassifier, Batch

OUTPUTS = ("prob", "logit", "margin")


def check_output(output: str) -> str:
    if output not in OUTPUTS:
        raise AttnauditError(f"output must be one of {OUTPUTS}, got {output!r}")
    return output


def predicted_class_change(logits: torch.Tensor, altered: torch.Tensor, output: str) -> torch.Tensor:
    """f_c(x) − f_c(x₋t) ``[T, B]`` for each instance's predicted class c: ``logits`` ``[B, C]`` of the inputs,
    ``altered`` ``[T, B, C]`` with position t changed (omitted or occluded)."""
    target = logits.argmax(dim=-1)
    full = class_scores(logits, output).gather(1, target[:, None]).squeeze(1)
    changed = class_scores(altered, output)
    return full[None, :] - changed.gather(2, target[None, :, None].expand(changed.shape[0], -1, 1)).squeeze(2)


def class_scores(logits: torch.Tensor, output: str) -> torch.Tensor:
    """``[N, C]`` → ``[N, C]``: the explained quantity f for every class (see module docstring)."""
    if output == "prob":
        return torch.softmax(logits, dim=-1)
    if output == "logit":
        return logits
    n_classes = logits.shape[-1]
    if n_classes < 2:
        return logits
    others = (logits.sum(dim=-1, keepdim=True) - logits) / (n_classes - 1)
    return logits - others


def embedding_forward(model: AttentionClassifier, output: str) -> Callable[..., torch.Tensor]:
    """``f(embedded, *forward_args(batch)) -> [N, C]`` for Captum: tokens, mask, a guided model's guide and a QA/NLI
    model's query travel as ``additional_forward_args``, which Captum repeats along dim 0 exactly as it repeats the
    inputs (IG steps, occlusion windows), so every expanded row keeps its own instance's mask and query."""

    def forward(embedded, tokens, mask, guide=None, query_tokens=None, query_mask=None) -> torch.Tensor:
        batch = Batch(tokens, mask, guide=guide, query_tokens=query_tokens, query_mask=query_mask)
        return class_scores(model(batch, embedded=embedded).logits, output)

    return forward


def forward_args(batch: Batch) -> tuple:
    """What :func:`embedding_forward` reads of ``batch`` besides the embeddings (Captum's
    ``additional_forward_args``)."""
    return batch.tokens, batch.mask, batch.guide, batch.query_tokens, batch.query_mask


@contextlib.contextmanager
def gradient_mode() -> Iterator[None]:
    """Gradients on, cuDNN off: cuDNN's RNN backward refuses eval mode (Captum issues #564, #328)."""
    with torch.enable_grad(), torch.backends.cudnn.flags(enabled=False):
        yield


def captum_on_embeddings(captum_cls, model: AttentionClassifier, batch: Batch, output: str, **kwargs) -> torch.Tensor:
    """Run a Captum gradient method on the word embeddings for the predicted class: ``[B, T, d]``, detached."""
    from attnaudit.importance.registry import predicted_class

    target = predicted_class(model, batch)
    with gradient_mode():
        embedded = model.embed(batch).detach().requires_grad_(True)
        attributions = captum_cls(embedding_forward(model, output)).attribute(
            embedded, target=target, additional_forward_args=forward_args(batch), **kwargs
        )
    return attributions.detach()


def row_slices(n_rows: int, width: int, dim: int, max_elements: int) -> list[slice]:
    """Cut ``n_rows`` rows of ``[width, dim]`` activations into slices of at most ``max_elements`` floats."""
    per = max(1, max_elements // max(1, width * dim))
    return [slice(start, min(n_rows, start + per)) for start in range(0, n_rows, per)]


class EmbeddingGradientMethod(ImportanceMethod):
    """A Captum gradient method on the word embeddings for the predicted class, reduced over the embedding
    dimension by :meth:`reduce` (saliency L2, gradient × input)."""

    captum_class: ClassVar[str]  # the name in captum.attr, imported when used: the registry stays cheap to load
    captum_options: ClassVar[dict] = {}

    def __init__(self, output: str = "prob"):
        self.output = check_output(output)

    def reduce(self, attributions: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def attribute(self, model, batch):
        import captum.attr

        captum_cls = getattr(captum.attr, self.captum_class)
        attributions = captum_on_embeddings(captum_cls, model, batch, self.output, **self.captum_options)
        return self.reduce(attributions).masked_fill(~batch.mask, 0.0)
