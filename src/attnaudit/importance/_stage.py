"""The importance stage: one method's per-instance scores on one chunk of the audited split, computed once per
dataset × model × method and read by every audit (J&W correlation, B&F agreement and faithfulness, …).

Output, one row per instance: ``row, id, label, method, signed, length, predicted, prob, scores`` (float32 list
over all real tokens, markers included, as the method returns them: signed or not), any per-instance extras the
method reports (IG: ``delta``, ``flagged``), ``seconds`` (the batch's ``explain`` time, CUDA synchronised, shared
equally among its instances: the method's cost on this machine), ``status`` (``ok``, or why the method cannot
explain this architecture — then the scores are NaN), ``device``, ``threads``.
"""

from __future__ import annotations

import logging
import time

import numpy as np
import pandas as pd
import torch

from attnaudit.auditing import load_audit_inputs, run_chunked
from attnaudit.importance.options import check_options
from attnaudit.importance.registry import ImportanceMethod, UnsupportedArchitecture, get_method
from attnaudit.io import read_parquet

log = logging.getLogger(__name__)


def build_method(name: str, options: dict, seed: int) -> ImportanceMethod:
    check_options(name, options)
    kwargs = dict(options)
    if name == "random":
        kwargs.setdefault("seed", seed)
    return get_method(name, **kwargs)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def score(
    dataset_dir: str,
    model_dir: str,
    out: str,
    method: str,
    options: dict,
    *,
    split: str = "test",
    batch_size: int = 64,
    max_tokens: int | None = None,
    chunk: int = 0,
    n_chunks: int = 1,
    seed: int = 0,
    threads: int = 1,
) -> pd.DataFrame:
    torch.set_num_threads(max(1, threads))
    inputs = load_audit_inputs(dataset_dir, model_dir, split)
    model, device = inputs.model, inputs.device
    explainer = build_method(method, options, seed)
    unsupported: list[str] = []

    def per_batch(rows, batch) -> dict:
        with torch.no_grad():
            probs = model(batch).probs
        predicted = probs.argmax(dim=-1)
        lengths = batch.lengths.cpu().numpy()
        _sync(device)
        start = time.perf_counter()
        try:
            attribution = explainer.explain(model, batch)
            scores, extras, status = attribution.scores.detach().float().cpu().numpy(), attribution.extras, "ok"
        except UnsupportedArchitecture as err:
            scores, extras, status = np.full(tuple(batch.mask.shape), np.nan, np.float32), {}, str(err)
            unsupported[:1] = [status]
        _sync(device)
        seconds = time.perf_counter() - start
        columns = {
            "id": list(batch.ids),
            "row": rows,
            "label": batch.labels.cpu().numpy(),
            "method": method,
            "signed": bool(explainer.signed),
            "length": lengths,
            "predicted": predicted.cpu().numpy(),
            "prob": probs.gather(1, predicted[:, None]).squeeze(1).cpu().numpy(),
            "scores": [scores[i, :n].astype(np.float32) for i, n in enumerate(lengths)],
        }
        columns.update({name: values.cpu().numpy() for name, values in extras.items()})
        columns.update({"seconds": seconds / len(rows), "status": status})
        return columns

    frame = run_chunked(
        inputs,
        per_batch,
        out,
        batch_size=batch_size,
        max_tokens=max_tokens,
        chunk=chunk,
        n_chunks=n_chunks,
        desc=f"importance {method}",
        extra_columns={"device": str(device), "threads": int(threads)},
    )
    if unsupported:
        log.warning("%s cannot explain %s: %s (scores are NaN)", method, model_dir, unsupported[0])
    if len(frame):  # a chunk can be empty when a small test split has fewer batches than chunks
        log.info("%s: %.1f s per 1,000 instances", method, 1000 * frame["seconds"].sum() / len(frame))
    return frame


def read_scores(paths: list[str]) -> pd.DataFrame:
    """Several methods' gathered importance parquets as one long frame (``row, id, method, scores, …``)."""
    frames = [read_parquet(p) for p in paths]
    return pd.concat(frames, ignore_index=True).sort_values(["row"], kind="stable").reset_index(drop=True)
