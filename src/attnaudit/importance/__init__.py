"""Importance methods: one interface, one registry (GUIDE §4), like Captum's ``attribute()``.

``scores = METHODS[name](**options).attribute(model, batch)`` returns a ``[B, T]`` tensor, 0 on padding.
``signed`` says whether the raw scores carry a sign (B&F §3.1: *sensitivity* vs *saliency*); audits decide
whether to take absolute values and say so in their tables. Each method lives in a submodule of this package and
registers itself with :func:`register`; submodules are discovered automatically, so adding a method is one file.
"""

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
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")


def get_method(name: str, **options) -> ImportanceMethod:
    if name not in METHODS:
        raise AttnauditError(f"unknown importance method {name!r}; available: {', '.join(sorted(METHODS))}")
    return METHODS[name](**options)


def predicted_class(model: AttentionClassifier, batch: Batch) -> torch.Tensor:
    """The class each instance is explained for: the model's own prediction (J&W, B&F)."""
    with torch.no_grad():
        return model(batch).logits.argmax(dim=-1)


_discover()


def add_cli(subparsers) -> None:
    """``python -m attnaudit importance {score,gather}``: the importance stage (:mod:`._stage`)."""
    import json

    from attnaudit.io import add_batch_arguments, add_gather_command

    parser = subparsers.add_parser("importance", help="per-instance scores of one importance method")
    sub = parser.add_subparsers(dest="importance_command", required=True)
    p = sub.add_parser("score", help="one method on one chunk of the audited split → parquet")
    p.add_argument("--method", required=True, help=f"one of {', '.join(sorted(METHODS))}")
    p.add_argument("--options", default="{}", help="JSON: the method's constructor options")
    p.add_argument("--dataset-dir", required=True)
    p.add_argument("--model-dir", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--split", default="test")
    add_batch_arguments(p)
    p.add_argument("--chunk", type=int, default=0)
    p.add_argument("--n-chunks", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)

    def _score(a):
        from attnaudit.importance._stage import score

        score(
            a.dataset_dir,
            a.model_dir,
            a.out,
            a.method,
            json.loads(a.options),
            split=a.split,
            batch_size=a.batch_size,
            max_tokens=a.max_batch_tokens,
            chunk=a.chunk,
            n_chunks=a.n_chunks,
            seed=a.seed,
            threads=a.threads,
        )

    p.set_defaults(func=_score)
    add_gather_command(sub)
