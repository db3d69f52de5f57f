"""Importance methods: one interface, one registry, like Captum's ``attribute()``.

``scores = METHODS[name](**options).attribute(model, batch)`` returns a ``[B, T]`` tensor, 0 on padding.
``signed`` says whether the raw scores carry a sign (B&F §3.1: *sensitivity* vs *saliency*); audits decide
whether to take absolute values and say so in their tables. Each method lives in a submodule of this package and
registers itself with :func:`register`; submodules are discovered automatically, so adding a method is one file.
"""

from __future__ import annotations

import importlib


def __getattr__(name: str):
    """The registry's names (``METHODS``, ``get_method``, ``ImportanceMethod``, …), imported on first use: the
    stage's CLI (and a gather job) starts without torch."""
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(importlib.import_module("attnaudit.importance.registry"), name)


def add_cli(subparsers) -> None:
    """``python -m attnaudit importance {score,gather}``: the importance stage (:mod:`._stage`)."""
    import json

    from attnaudit.io import add_batch_arguments, add_gather_command

    parser = subparsers.add_parser("importance", help="per-instance scores of one importance method")
    sub = parser.add_subparsers(dest="importance_command", required=True)
    p = sub.add_parser("score", help="one method on one chunk of the audited split → parquet")
    p.add_argument("--method", required=True, help="a registered method (attnaudit.importance.registry.METHODS)")
    p.add_argument("--options", default="{}", help="JSON: the method's constructor options")
    p.add_argument(
        "--memory-options",
        default="{}",
        help="JSON: more constructor options, those of the method's memory_options (the rule's resources)",
    )
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
            {**json.loads(a.options), **json.loads(a.memory_options)},
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
