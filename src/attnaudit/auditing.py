"""Plumbing shared by every audit stage: load a trained model with the instances to audit, batch them with a
fixed global plan, shard the plan into chunks (gathering them: :func:`attnaudit.io.gather_chunks`).

The batch plan is computed over the whole audited split first (length-bucketed, at most ``batch_size`` rows and
``max_tokens`` padded tokens per batch) and its *batches* are dealt out to the chunks (:func:`chunk_of`), so every
instance is computed in the same batch with the same companions whatever the chunk count: the gathered parquet is
identical for 1 or 16 chunks. Randomness is per instance
(:func:`instance_seed`), never per chunk.
"""

from __future__ import annotations

import logging
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from attnaudit import AttnauditError
from attnaudit.data import Encoded, encode_split, load_examples
from attnaudit.io import write_parquet
from attnaudit.models import AttentionClassifier, Batch, attach_saved_guides, load_model, pick_device

log = logging.getLogger(__name__)


@dataclass
class AuditInputs:
    model: AttentionClassifier
    examples: pd.DataFrame  # rows of the audited split, in examples.parquet order, with a ``row`` column
    encoded: Encoded
    vocab: dict[str, int]
    device: torch.device


def load_audit_inputs(
    dataset_dir: str | Path, model_dir: str | Path, split: str = "test", device: torch.device | None = None
) -> AuditInputs:
    device = device or pick_device()
    examples, vocab = load_examples(dataset_dir)
    rows = examples[examples["split"] == split].reset_index(drop=True)
    if rows.empty:
        raise AttnauditError(f"{dataset_dir}/examples.parquet has no '{split}' examples to audit")
    rows = rows.assign(row=np.arange(len(rows)))
    model = load_model(Path(model_dir) / "model.pt", device)
    model.requires_grad_(False)  # audits differentiate with respect to inputs only: no weight gradients are computed
    encoded = encode_split(rows, vocab, None)
    attach_saved_guides(model, encoded, Path(model_dir) / "model.pt")
    return AuditInputs(model, rows, encoded, vocab, device)


def batch_plan(encoded: Encoded, batch_size: int, max_tokens: int | None = None) -> list[np.ndarray]:
    """Row indices per batch: rows sorted by length (stable), then cut into batches of at most ``batch_size``
    rows and, with ``max_tokens``, at most that many padded token positions (rows × longest row), so memory and
    time per batch are bounded by the config rather than by the longest document (a document longer than the
    budget is a batch of its own)."""
    return length_batches(np.array([len(s) for s in encoded.sequences]), batch_size, max_tokens)


def length_batches(lengths: np.ndarray, batch_size: int | None, max_tokens: int | None) -> list[np.ndarray]:
    """Indices of ``lengths`` sorted (stable) and cut into batches of at most ``batch_size`` rows (None: any) and,
    with ``max_tokens``, at most that many padded token positions: the most rows whose count × the last (longest)
    row's length fits, at least one."""
    order = np.argsort(lengths, kind="stable")
    ordered = np.maximum(lengths[order], 1)
    plan, start = [], 0
    while start < len(order):
        stop = min(len(order), start + (batch_size or len(order)))
        if max_tokens:  # rows × the last row's length never decreases along sorted rows
            fits = np.arange(1, stop - start + 1) * ordered[start:stop]
            stop = start + max(1, int(np.searchsorted(fits, max_tokens, "right")))
        plan.append(order[start:stop])
        start = stop
    return plan


def token_budget(max_tokens: int | dict | None, device: torch.device) -> int | None:
    """The padded-token budget per batch for this job's device: one number, or one per device type
    (``{"cpu": 4096, "cuda": 65536}``: a GPU takes much larger batches)."""
    if isinstance(max_tokens, dict):
        return max_tokens.get(device.type, max_tokens.get("cpu"))
    return max_tokens


def chunk_of(plan: list[np.ndarray], chunk: int, n_chunks: int) -> list[np.ndarray]:
    """The batches of chunk ``chunk`` (0-based) of ``n_chunks``: the length-sorted plan dealt out back and forth,
    batch i to chunk 0, 1, …, n − 1, n − 1, …, 1, 0, 0, 1, … So every chunk holds batches of every length, and
    chunks cost about the same whatever an audit's cost grows with — tokens (gradient, permutation) or tokens ×
    length (leave-one-out, quadratic up to its fading length): runs of batches cut at equal token counts left the
    longest documents, and a quadratic audit's slowest shard, to the last chunk (IMDB, 8 shards: leave-one-out
    shards took 60–126 s wall that way, 88–104 s dealt; docs/performance.md)."""
    if not 0 <= chunk < n_chunks:
        raise AttnauditError(f"chunk {chunk} is outside 0..{n_chunks - 1}")
    turn = np.arange(len(plan)) % (2 * n_chunks)
    owner = np.where(turn < n_chunks, turn, 2 * n_chunks - 1 - turn)
    return [batch for batch, who in zip(plan, owner) if who == chunk]


def iterate_chunk(
    inputs: AuditInputs, batch_size: int, chunk: int = 0, n_chunks: int = 1, max_tokens: int | dict | None = None
) -> Iterator[tuple[np.ndarray, Batch]]:
    """Yield ``(rows, batch)`` on the model's device for one chunk of the audited split."""
    enc = inputs.encoded
    plan = batch_plan(enc, batch_size, token_budget(max_tokens, inputs.device))
    for rows in chunk_of(plan, chunk, n_chunks):
        yield rows, enc.batch(rows).to(inputs.device)


def instance_seed(base_seed: int, instance_id: str) -> int:
    """A seed for one instance, independent of batching and chunking."""
    return (base_seed * 1_000_003 + zlib.crc32(instance_id.encode())) % (2**31)


def run_chunked(
    inputs: AuditInputs,
    per_batch: Callable[[np.ndarray, Batch], dict | pd.DataFrame],
    out: str | Path,
    *,
    batch_size: int,
    chunk: int = 0,
    n_chunks: int = 1,
    desc: str = "audit",
    progress: bool = True,
    extra_columns: dict | None = None,
    max_tokens: int | dict | None = None,
) -> pd.DataFrame:
    """The one chunked audit loop: ``per_batch(rows, batch)`` returns the columns of its instances (a ``row``
    column is added, or kept if the frame has it), the chunk's rows are written in instance order, atomically,
    with ``extra_columns`` (constants such as the device) appended. Batches: :func:`batch_plan`."""
    started = time.time()
    max_tokens = token_budget(max_tokens, inputs.device)
    plan = batch_plan(inputs.encoded, batch_size, max_tokens)
    n_batches = len(chunk_of(plan, chunk, n_chunks))
    frames = []
    stream = iterate_chunk(inputs, batch_size, chunk, n_chunks, max_tokens)
    for rows, batch in tqdm(
        stream, total=n_batches, desc=f"{desc} chunk {chunk + 1}/{n_chunks}", disable=not progress, mininterval=5
    ):
        frame = pd.DataFrame(per_batch(rows, batch))
        if "row" not in frame.columns:
            frame.insert(1, "row", rows)
        frames.append(frame)
    frame = (
        pd.concat(frames, ignore_index=True).sort_values("row", kind="stable").reset_index(drop=True)
        if frames
        else pd.DataFrame({"id": pd.Series(dtype=str), "row": pd.Series(dtype=np.int64)})
    )
    for name, value in (extra_columns or {}).items():
        frame[name] = value
    write_parquet(out, frame)
    log.info(
        "%s: %d instances (chunk %d of %d, batch size %d) in %.1f s → %s",
        desc,
        frame["row"].nunique(),
        chunk,
        n_chunks,
        batch_size,
        time.time() - started,
        out,
    )
    return frame
