"""``python -m attnaudit throughput <suite>`` (alias ``bench``): what audits and training cost per instance, against
the authors' own code (not a test: numbers depend on the machine). Suites register here by name → module with
``run(args)``."""

from __future__ import annotations

import importlib
from pathlib import Path

from attnaudit import AttnauditError

SUITES = {"jw": "attnaudit.jain_wallace.throughput"}


def resolve_dirs(args) -> tuple[Path, Path]:
    """``--dataset-dir/--model-dir``, or ``--dataset/--model`` under ``--results`` (results/datasets/{dataset},
    results/models/{dataset}/{model})."""
    if args.dataset_dir and args.model_dir:
        return Path(args.dataset_dir), Path(args.model_dir)
    if args.dataset and args.model:
        root = Path(args.results)
        return root / "datasets" / args.dataset, root / "models" / args.dataset / args.model
    raise AttnauditError("throughput needs --dataset-dir and --model-dir, or --dataset and --model")


def add_cli(subparsers) -> None:
    p = subparsers.add_parser(
        "throughput", aliases=["bench"], help="per-instance cost of audits and training vs the authors' code"
    )
    p.add_argument("suite", choices=sorted(SUITES))
    p.add_argument("--dataset-dir")
    p.add_argument("--model-dir")
    p.add_argument("--dataset", help="e.g. sst → results/datasets/sst")
    p.add_argument("--model", help="e.g. lstm-additive-base-s0 → results/models/{dataset}/{model}")
    p.add_argument("--results", default="results")
    p.add_argument("--split", default="test")
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="thread counts to time (default 1 2)")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--max-batch-tokens", type=int, default=4096, help="as audits.max_batch_tokens")
    p.add_argument("--audits", nargs="+", default=None, help="subset of the suite's audits")
    p.add_argument("--epoch", action="store_true", help="also time one training epoch of the model's variant")
    p.add_argument("--embeddings", help="embedding matrix (default results/embeddings/{dataset}/matrix.npy)")
    p.add_argument(
        "--naive-limit",
        type=int,
        default=None,
        help="also time the naive per-instance references on a seeded sample of this many instances",
    )
    p.add_argument("--options", default="{}", help="JSON options for the suite (e.g. the jain_wallace block)")
    p.set_defaults(func=lambda a: importlib.import_module(SUITES[a.suite]).run(a))
