"""Small I/O helpers shared by all stages: atomic writes, checksums, JSON."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it over ``path`` only if the block succeeds.

    A crash or an exception leaves no half-written ``path`` behind.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def write_json(path: str | os.PathLike, obj: Any) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n")


def read_json(path: str | os.PathLike) -> Any:
    return json.loads(Path(path).read_text())


def write_parquet(path: str | os.PathLike, frame: pd.DataFrame) -> None:
    with atomic_path(path) as tmp:
        frame.to_parquet(tmp, index=False)


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):  # numpy / torch scalars
        return obj.item()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def gather_chunks(paths: list[str | Path], out: str | Path, sort_by: list[str] | None = None) -> pd.DataFrame:
    """Concatenate per-chunk parquets (an audit's instance chunks), rows ordered by ``row`` then ``sort_by``,
    written atomically. Empty chunks (more chunks than batches) are skipped so they cannot change column dtypes.
    Lives here, not with the audits, so a gather job imports pandas only."""
    frames = [pd.read_parquet(p) for p in paths]
    frames = [f for f in frames if len(f)] or frames[:1]
    frame = pd.concat(frames, ignore_index=True)
    keys = ["row", *(sort_by or [])] if "row" in frame.columns else (sort_by or [])
    if keys:
        frame = frame.sort_values(keys, kind="stable").reset_index(drop=True)
    write_parquet(out, frame)
    return frame


def add_gather_command(subparsers) -> None:
    """``<stage> gather --out OUT CHUNK...``: the same gather subcommand for every audit stage."""
    p = subparsers.add_parser("gather", help="concatenate chunk parquets in row order")
    p.add_argument("--out", required=True)
    p.add_argument("chunks", nargs="+")
    p.set_defaults(func=_gather_command)


def _gather_command(args) -> None:
    frame = gather_chunks(args.chunks, args.out)
    logging.getLogger(__name__).info("gathered %d chunks → %s: %d rows", len(args.chunks), args.out, len(frame))


def json_arg(text: str | None) -> Any:
    """A CLI argument holding JSON inline, or ``@path`` to a JSON file; empty means ``{}``."""
    if not text:
        return {}
    text = text.strip()
    return read_json(text[1:]) if text.startswith("@") else json.loads(text)


def resolve_options(stage: str, defaults: dict, options: dict | None) -> dict:
    """A stage's option sections: ``defaults`` overridden by ``options`` one level deep per section; an unknown
    section or key is rejected with its config path (``stage.section.key``) and what was expected."""
    import copy

    from attnaudit import AttnauditError

    merged = copy.deepcopy(defaults)
    for section, values in (options or {}).items():
        if section not in merged:
            raise AttnauditError(f"{stage}.{section}: unknown section; expected one of {', '.join(merged)}")
        for key, value in (values or {}).items():
            if key not in merged[section]:
                raise AttnauditError(
                    f"{stage}.{section}.{key}: unknown option; expected one of {', '.join(merged[section])}"
                )
            merged[section][key] = value
    return merged
