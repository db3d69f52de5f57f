"""Corpora stage: a registry entry (or a user's CSV/TSV/JSONL) → verified documents.parquet + manifest.json; the
logic is in :mod:`.build`, the registry in :mod:`.registry`, downloads and checksums in :mod:`.fetch`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from attnaudit import AttnauditError
from attnaudit.corpora import fetch, readers  # noqa: F401 (submodules of the stage's API)
from attnaudit.corpora.build import SPLIT_ORDER, build_corpus, counts, run
from attnaudit.corpora.registry import REGISTRY, CorpusFile, CorpusSpec, CorpusTree, get_spec

__all__ = [
    "REGISTRY",
    "SPLIT_ORDER",
    "CorpusFile",
    "CorpusSpec",
    "CorpusTree",
    "add_cli",
    "build_corpus",
    "counts",
    "get_spec",
    "run",
]


def _json_arg(value: str | None, flag: str) -> dict | None:
    """``--options``/``--user-corpora``: inline JSON (``{...}``) or the path of a JSON file."""
    if value is None:
        return None
    text, where = value, "inline JSON"
    if not value.lstrip().startswith("{"):
        path = Path(value)
        if not path.is_file():
            raise AttnauditError(f"{flag}: expected inline JSON or a JSON file, and {value!r} is neither")
        text, where = path.read_text(encoding="utf-8"), str(path)
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as err:
        raise AttnauditError(
            f"{flag} ({where}): invalid JSON at line {err.lineno} column {err.colno}: {err.msg}"
        ) from err
    if not isinstance(parsed, dict):
        raise AttnauditError(f"{flag} ({where}): expected a JSON object, found {type(parsed).__name__}")
    return parsed


def _main(args: argparse.Namespace) -> None:
    run(
        args.corpus,
        out=args.out,
        manifest=args.manifest,
        raw_dir=args.raw_dir,
        mirror=args.mirror,
        options=_json_arg(args.options, "--options"),
        user_corpora=_json_arg(args.user_corpora, "--user-corpora"),
        seed=args.seed,
    )


def add_cli(subparsers) -> argparse.ArgumentParser:
    """Add ``corpora``: ``--corpus NAME --out PARQUET --manifest JSON --raw-dir DIR [--mirror DIR]
    [--options JSON] [--user-corpora JSON] [--seed INT]``."""
    p = subparsers.add_parser(
        "corpora",
        help="raw corpus → verified documents.parquet + manifest.json",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--corpus", required=True, help=f"built-in ({', '.join(REGISTRY)}) or a user corpus name")
    p.add_argument("--out", required=True, help="documents.parquet to write")
    p.add_argument("--manifest", required=True, help="manifest.json to write")
    p.add_argument("--raw-dir", required=True, help="folder for downloaded/verified raw files (data/raw/<corpus>)")
    p.add_argument("--mirror", default=None, help="local corpus mirror (default, or empty: $ATTNAUDIT_MIRROR)")
    p.add_argument("--options", default=None, help="JSON object (inline or file) of corpus options (planted)")
    p.add_argument("--user-corpora", default=None, help="JSON object (inline or file): name → user corpus config")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_main)
    return p
