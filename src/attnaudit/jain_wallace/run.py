"""Run one J&W audit on one chunk of the audited split and write its per-instance parquet."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from attnaudit import AttnauditError
from attnaudit.auditing import batch_plan, chunk_of, iterate_chunk, load_audit_inputs
from attnaudit.io import write_parquet
from attnaudit.jain_wallace.adversarial import adversarial_batch
from attnaudit.jain_wallace.common import Context
from attnaudit.jain_wallace.correlation import correlation_batch
from attnaudit.jain_wallace.options import resolve
from attnaudit.jain_wallace.permutation import permutation_batch
from attnaudit.masks import marker_ids

log = logging.getLogger(__name__)

AUDITS = {
    "correlation": correlation_batch,
    "permutation": permutation_batch,
    "adversarial": adversarial_batch,
}


def audit_batch_size(audit: str, options: dict, default: int) -> int:
    """``jain_wallace.<audit>.batch_size`` if set, else the shared ``audits.batch_size``."""
    return int(options.get(audit, {}).get("batch_size") or default)


def run_audit(
    audit: str,
    dataset_dir: str | Path,
    model_dir: str | Path,
    out: str | Path,
    *,
    chunk: int = 0,
    n_chunks: int = 1,
    split: str = "test",
    batch_size: int = 64,
    seed: int = 0,
    options: dict | None = None,
    threads: int = 1,
    progress: bool = True,
) -> pd.DataFrame:
    if audit not in AUDITS:
        raise AttnauditError(f"unknown J&W audit {audit!r}; expected one of {', '.join(AUDITS)}")
    torch.set_num_threads(max(1, threads))
    opts = resolve(options)
    started = time.time()
    inputs = load_audit_inputs(dataset_dir, model_dir, split)
    ctx = Context(opts, marker_ids(inputs.vocab), seed)
    size = audit_batch_size(audit, opts, batch_size)
    n_batches = len(chunk_of(batch_plan(inputs.encoded, size), chunk, n_chunks))
    frames = []
    stream = iterate_chunk(inputs, size, chunk, n_chunks)
    for rows, batch in tqdm(
        stream, total=n_batches, desc=f"{audit} chunk {chunk}/{n_chunks}", disable=not progress, mininterval=5
    ):
        frame = pd.DataFrame(AUDITS[audit](inputs.model, batch, ctx))
        frame.insert(1, "row", rows)
        frames.append(frame)
    frame = (
        pd.concat(frames, ignore_index=True).sort_values("row", kind="stable").reset_index(drop=True)
        if frames
        else pd.DataFrame({"id": pd.Series(dtype=str), "row": pd.Series(dtype=np.int64)})
    )
    write_parquet(out, frame)
    log.info(
        "%s: %d instances of %s (chunk %d of %d, batch size %d) in %.1f s → %s",
        audit,
        len(frame),
        model_dir,
        chunk,
        n_chunks,
        size,
        time.time() - started,
        out,
    )
    return frame
