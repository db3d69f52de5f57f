"""The registry of importance methods (see :mod:`attnaudit.importance`): the base class, ``register``,
``get_method`` and the discovery of the method modules. Importing it imports torch and every method."""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import ClassVar

import torch

from attnaudit import AttnauditError
from attnaudit.models import AttentionClassifier, Batch

METHODS: dict[str, type[ImportanceMethod]] = {}


@dataclass
class Attribution:
    """What :meth:`ImportanceMethod.explain` returns: ``scores [B, T]`` and named per-instance extras ``[B]``."""

    scores: torch.Tensor
    extras: dict[str, torch.Tensor] = field(default_factory=dict)


class UnsupportedArchitecture(AttnauditError):
    """A method that cannot explain a model variant says so by name instead of returning a wrong number; the
    audits record NaN scores with this message."""


class ImportanceMethod:
    """Base class. Subclasses set ``name``, ``signed`` and implement :meth:`attribute`."""

    name: ClassVar[str]
    signed: ClassVar[bool] = False
    #: which paper/section defines it — shown in tables and the report
    citation: ClassVar[str] = ""
    #: constructor options that bound memory or the work per pass and change no score beyond float rounding
    #: (re-encoding budgets, rows per forward pass): the importance jobs take them as Snakemake resources, not
    #: parameters, so changing one reruns nothing (a literal tuple: ``options.declared_memory_options`` reads it)
    memory_options: ClassVar[tuple[str, ...]] = ()

    def attribute(self, model: AttentionClassifier, batch: Batch) -> torch.Tensor:
        raise NotImplementedError

    def explain(self, model: AttentionClassifier, batch: Batch) -> Attribution:
        """Scores plus any per-instance values the method reports (IG: its convergence delta)."""
        return Attribution(self.attribute(model, batch))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def register(cls: type[ImportanceMethod]) -> type[ImportanceMethod]:
    if cls.name in METHODS and METHODS[cls.name] is not cls:
        raise ValueError(f"importance method {cls.name!r} registered twice")
    METHODS[cls.name] = cls
    return cls


def _discover() -> None:
    package = importlib.import_module("attnaudit.importance")
    for info in pkgutil.iter_modules(package.__path__):
        if info.name != "registry":
            importlib.import_module(f"attnaudit.importance.{info.name}")


def get_method(name: str, **options) -> ImportanceMethod:
    if name not in METHODS:
        raise AttnauditError(f"unknown importance method {name!r}; available: {', '.join(sorted(METHODS))}")
    return METHODS[name](**options)


def predicted_class(model: AttentionClassifier, batch: Batch) -> torch.Tensor:
    """The class each instance is explained for: the model's own prediction (J&W, B&F)."""
    with torch.no_grad():
        return model(batch).logits.argmax(dim=-1)


_discover()


_discover()
