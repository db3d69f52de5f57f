"""Run one of J&W's model-probing audits (permutation, adversarial) on one chunk of the audited split and write its
per-instance parquet. (The correlation audit reads the importance stage's scores: :mod:`.correlation`.)"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import torch

from attnaudit import AttnauditError
from attnaudit.auditing import load_audit_inputs, run_chunked
from attnaudit.jain_wallace.adversarial import adversarial_batch
from attnaudit.jain_wallace.common import Context
from attnaudit.jain_wallace.options import resolve
from attnaudit.jain_wallace.permutation import permutation_batch
from attnaudit.masks import marker_ids

AUDITS = {"permutation": permutation_batch, "adversarial": adversarial_batch}


def audit_batch_size(audit: str, options: dict, default: int) -> int:
    """``jain_wallace.<audit>.batch_size`` if set, else the shared ``audits.batch_size``."""
    return int(options.get(audit, {}).get("batch_size") or default)


def audit_token_budget(audit: str, options: dict, default: int | dict | None) -> int | dict | None:
    """``jain_wallace.<audit>.max_batch_tokens`` if the audit has one, else the shared ``audits.max_batch_tokens``."""
    return options.get(audit, {}).get("max_batch_tokens") or default


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
    max_tokens: int | None = None,
    seed: int = 0,
    options: dict | None = None,
    threads: int = 1,
    progress: bool = True,
) -> pd.DataFrame:
    if audit not in AUDITS:
        raise AttnauditError(f"unknown J&W audit {audit!r}; expected one of {', '.join(AUDITS)}")
    torch.set_num_threads(max(1, threads))
    opts = resolve(options)
    inputs = load_audit_inputs(dataset_dir, model_dir, split)
    ctx = Context(opts, marker_ids(inputs.vocab), seed)
    return run_chunked(
        inputs,
        lambda rows, batch: AUDITS[audit](inputs.model, batch, ctx),
        out,
        batch_size=audit_batch_size(audit, opts, batch_size),
        max_tokens=audit_token_budget(audit, opts, max_tokens),
        chunk=chunk,
        n_chunks=n_chunks,
        desc=audit,
        progress=progress,
    )
