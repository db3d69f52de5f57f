"""Small I/O helpers shared by all stages: atomic writes, checksums, JSON."""

from __future__ import annotations

import contextlib
import copy
import errno
import hashlib
import json
import logging
import os
import pickle
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from attnaudit import AttnauditError, ConfigKeyError


def home_expanded(path: str | os.PathLike) -> Path:
    """``~`` and ``~user`` expanded as the shell does; ``~user`` of no user on this machine is left as written, to be
    named as a file that does not exist (``Path.expanduser`` raises a bare RuntimeError)."""
    return Path(os.path.expanduser(path))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: the mode a plain ``open()`` would give a new file (0644 under the usual umask 022), not mkstemp's 0600, so that
#: colleagues on a shared cluster can read results
FILE_MODE = 0o666 & ~_umask()
#: below this many free bytes a failed write is reported as a full disk
LOW_SPACE = 64 << 20


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it over ``path`` only if the block succeeds.

    A crash or an exception leaves no half-written ``path`` behind. The file gets the usual mode
    (:data:`FILE_MODE`). A write that fails because the disk is full (ENOSPC, or torch's "unexpected pos" from a
    short write) becomes an :class:`AttnauditError` that says so.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:  # named by the output, not by the hidden temporary file it could not create
        raise type(err)(err.errno, err.strerror, str(path)) from None
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, FILE_MODE)
        os.replace(tmp_path, path)
    except (OSError, RuntimeError) as err:
        if disk_full(err, path.parent):
            raise AttnauditError(
                f"no space left on the device holding {path.parent} while writing {path.name} "
                f"({shutil.disk_usage(path.parent).free >> 20} MiB free): free some space (df -h {path.parent}) "
                "and rerun the same command; nothing half-written was kept"
            ) from err
        raise
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def disk_full(err: BaseException, directory: Path) -> bool:
    if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    try:
        return shutil.disk_usage(directory).free < LOW_SPACE
    except OSError:
        return False


def unreadable(path: str | os.PathLike, err: BaseException) -> AttnauditError:
    """The one message for an intermediate file that cannot be read."""
    reason = f"{type(err).__name__}: {err}".splitlines()[0][:200]
    return AttnauditError(
        f"{path} is unreadable ({reason}): truncated, or written by another version of attnaudit? "
        "Delete it and rerun; Snakemake remakes it"
    )


#: what a corrupt parquet / JSON / torch file raises on reading
READ_ERRORS = (OSError, ValueError, EOFError, RuntimeError, KeyError, pickle.UnpicklingError, zipfile.BadZipFile)


def read_written(path: str | os.PathLike, read: Callable[[], Any]) -> Any:
    """``read()`` of a file this project wrote, a corrupt file named (:func:`unreadable`); a missing file stays
    FileNotFoundError."""
    if not Path(path).exists():
        raise FileNotFoundError(path)
    try:
        return read()
    except READ_ERRORS as err:
        raise unreadable(path, err) from err


def read_parquet(path: str | os.PathLike, **kwargs) -> pd.DataFrame:
    """``pd.read_parquet`` through :func:`read_written`; a directory is IsADirectoryError (pandas would read it
    as a partitioned data set)."""
    if Path(path).is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
    return read_written(path, lambda: pd.read_parquet(path, **kwargs))


def read_columns(path: str | os.PathLike, columns: list[str], optional: tuple[str, ...] = ()) -> pd.DataFrame:
    """``columns`` of a parquet file, and those of ``optional`` that it has (its footer says which)."""
    import pyarrow.parquet as pq

    present = set(read_written(path, lambda: pq.read_schema(path).names))
    return read_parquet(path, columns=[*columns, *(column for column in optional if column in present)])


def load_torch(path: str | os.PathLike, map_location=None):
    """``torch.load`` of a model file through :func:`read_written`, its zip records' CRC-32 checked first
    (``torch.load`` does not: flipped bytes would load silently)."""
    import torch

    def read():
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                damaged = archive.testzip()
            if damaged is not None:
                raise zipfile.BadZipFile(f"record {damaged} fails its CRC-32 check")
        return torch.load(path, map_location=map_location, weights_only=False)

    return read_written(path, read)


def load_npy(path: str | os.PathLike) -> np.ndarray:
    """``np.load`` of an array this project wrote (an embedding matrix) through :func:`read_written`."""
    return read_written(path, lambda: np.load(path, allow_pickle=False))


def write_json(path: str | os.PathLike, obj: Any) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n", encoding="utf-8")


def read_json(path: str | os.PathLike) -> Any:
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except ValueError as err:
        raise unreadable(path, err) from err


def write_parquet(path: str | os.PathLike, frame: pd.DataFrame) -> None:
    with atomic_path(path) as tmp:
        frame.to_parquet(tmp, index=False)


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


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
    frames = [read_parquet(p) for p in paths]
    check_chunk_rows(frames, paths)
    frames = [f for f in frames if len(f)] or frames[:1]
    frame = pd.concat(frames, ignore_index=True)
    keys = ["row", *(sort_by or [])] if "row" in frame.columns else (sort_by or [])
    if keys:
        frame = frame.sort_values(keys, kind="stable").reset_index(drop=True)
    write_parquet(out, frame)
    return frame


def check_chunk_rows(frames: list[pd.DataFrame], paths: list) -> None:
    """The chunks of one audit must hold disjoint instances that together are rows 0..N−1 of the audited split.
    Parts written by different versions of the batch plan (a chunk job rerun after an upgrade changed how batches
    are dealt to chunks) overlap or leave holes; gathering them would silently drop or duplicate instances."""
    rows = [np.unique(f["row"].to_numpy()) if "row" in f.columns else np.array([], dtype=np.int64) for f in frames]
    every = np.concatenate(rows) if rows else np.array([], dtype=np.int64)
    owners = np.repeat(np.arange(len(rows)), [len(r) for r in rows])
    order = np.argsort(every, kind="stable")
    every, owners = every[order], owners[order]
    twice = np.flatnonzero(every[1:] == every[:-1])
    rerun = "they come from different runs of the audit; rerun every chunk (snakemake --forcerun <rule>)"
    if len(twice):
        first, second = paths[owners[twice[0]]], paths[owners[twice[0] + 1]]
        raise AttnauditError(f"instance row {every[twice[0]]} is in both {first} and {second}: {rerun}")
    holes = np.flatnonzero(every != np.arange(len(every)))
    if len(holes):
        raise AttnauditError(
            f"no chunk of {', '.join(map(str, paths))} holds instance row {holes[0]} (rows 0..{every[-1]}): {rerun}"
        )


def add_batch_arguments(parser) -> None:
    """``--batch-size`` and ``--max-batch-tokens`` of every chunked audit (:func:`attnaudit.auditing.batch_plan`)."""
    parser.add_argument("--batch-size", type=int, default=256, help="instances per batch at most")
    parser.add_argument(
        "--max-batch-tokens",
        type=json_arg,
        default=None,
        help='padded tokens per batch at most (instances × longest): a number, or per device {"cpu": 4096, "cuda": …}',
    )


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


def without_defaults(options: dict, defaults: dict, kept=()) -> dict:
    """``options`` without the keys that restate their value in ``defaults``, those in ``kept`` aside: a job's
    parameters, so that writing a default out in the config changes none and reruns nothing."""
    return {
        key: value for key, value in options.items() if key in kept or key not in defaults or value != defaults[key]
    }


def merged_options(where: str, defaults: dict, options: dict | None) -> dict:
    """``defaults`` overridden by ``options``; an unknown key is rejected with its config path (``where.key``) and
    the valid keys (the CLI runs without the workflow's schema)."""
    unknown = sorted(set(options or {}) - set(defaults))
    if unknown:
        raise ConfigKeyError((*where.split("."), unknown[0]), f"unknown option; expected one of {', '.join(defaults)}")
    return {**defaults, **(options or {})}


def resolve_options(stage: str, defaults: dict, options: dict | None) -> dict:
    """A stage's option sections: ``defaults`` overridden by ``options`` one level deep per section
    (:func:`merged_options` each); an unknown section or key is rejected with its config path
    (``stage.section.key``) and what was expected."""
    unknown = [section for section in options or {} if section not in defaults]
    if unknown:
        raise ConfigKeyError((stage, unknown[0]), f"unknown section; expected one of {', '.join(defaults)}")
    return {
        section: merged_options(f"{stage}.{section}", values, (options or {}).get(section))
        for section, values in copy.deepcopy(defaults).items()
    }
