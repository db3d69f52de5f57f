"""Training objectives: the loss is a sum of terms, each one small object in a registry (one file each, like the
importance methods). A variant names its terms through its fields: ``classify`` (cross-entropy) unless the
objective is ``imitate`` (W&P §4), plus ``tying`` or ``mlm`` for those regularisers (T&Š §3.1). Each term's value
is logged separately per epoch in ``metrics.json``; a NaN names the term.

``terms_for(spec, context)`` builds the terms of one variant; ``term.loss(model, batch, out)`` returns the
weighted scalar it adds to the loss. Submodules are discovered automatically, so a new term is one file.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import ClassVar

import torch

from attnaudit import AttnauditError
from attnaudit.models import AttentionClassifier, Batch, ModelOutput

TERMS: dict[str, type[ObjectiveTerm]] = {}


@dataclass
class TrainingContext:
    """What terms need besides the variant's fields."""

    num_classes: int
    vocab_size: int
    marker_ids: tuple[int, ...]
    pad_index: int = 0
    first_word_index: int = 4  # ids below are <pad>, <unk>, <s>, </s>
    class_weight: torch.Tensor | None = None
    seed: int = 0


class ObjectiveTerm:
    """Base class: subclasses set ``name`` and ``citation`` and implement :meth:`loss`."""

    name: ClassVar[str]
    citation: ClassVar[str] = ""
    #: needs batch.teacher_probs / batch.teacher_attention (the variant's ``teacher`` model outputs)
    needs_teacher: ClassVar[bool] = False

    def __init__(self, spec: dict, context: TrainingContext):
        self.spec, self.context = spec, context

    def loss(self, model: AttentionClassifier, batch: Batch, out: ModelOutput) -> torch.Tensor:
        raise NotImplementedError


def register(cls: type[ObjectiveTerm]) -> type[ObjectiveTerm]:
    if cls.name in TERMS and TERMS[cls.name] is not cls:
        raise ValueError(f"objective term {cls.name!r} registered twice")
    TERMS[cls.name] = cls
    return cls


def term_names(spec: dict) -> list[str]:
    """The terms a variant trains with, from its ``objective`` and ``regulariser`` fields."""
    names = ["imitate" if spec.get("objective", "classify") == "imitate" else "classify"]
    if spec.get("regulariser", "base") in ("tying", "mlm"):
        names.append(spec["regulariser"])
    return names


def terms_for(spec: dict, context: TrainingContext) -> list[ObjectiveTerm]:
    missing = [n for n in term_names(spec) if n not in TERMS]
    if missing:
        raise AttnauditError(f"unknown objective term(s) {missing}; registered: {', '.join(sorted(TERMS))}")
    return [TERMS[name](spec, context) for name in term_names(spec)]


def _discover() -> None:
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")


_discover()
