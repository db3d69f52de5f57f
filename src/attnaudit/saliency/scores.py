"""Per-instance scores of every importance method for one chunk of the audited split, with their cost.

Every method of the registry (B&F §3 plus attention, J&W's gradient and leave-one-out and the random baseline)
is called on the same batches (the fixed global plan of :mod:`attnaudit.auditing`), and each ``attribute`` call
is timed (CUDA synchronised), so ``seconds`` — the batch's time shared equally among its instances — sums to
the method's cost on this machine. Scores are stored signed (``signed`` says whether the method has a sign);
the audits decide signed vs absolute rankings. Integrated gradients' convergence delta is kept per instance.

Output, one row per instance × method: ``row, id, method, signed, length, predicted, prob, scores`` (float32
list over all tokens, markers included), ``delta``, ``flagged`` (IG only, else NaN/False), ``seconds``,
``device``, ``threads``.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from attnaudit.auditing import batch_plan, chunk_of, iterate_chunk, load_audit_inputs
from attnaudit.importance import ImportanceMethod, get_method
from attnaudit.io import write_parquet

log = logging.getLogger(__name__)


def build_methods(names: list[str], options: dict[str, dict], seed: int) -> dict[str, ImportanceMethod]:
    """Instantiate the configured methods; the random baseline is seeded from the experiment seed."""
    methods = {}
    for name in names:
        kwargs = dict(options.get(name, {}))
        if name == "random":
            kwargs.setdefault("seed", seed)
        methods[name] = get_method(name, **kwargs)
    return methods


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def score_batch(model, batch, methods: dict[str, ImportanceMethod], device: torch.device) -> tuple[dict, dict]:
    """``({name: scores [B,T] cpu}, {name: (seconds, delta [B] or None, flagged [B] or None)})``."""
    scores, extra = {}, {}
    for name, method in methods.items():
        if hasattr(method, "last_delta"):
            method.last_delta = None
        _sync(device)
        start = time.perf_counter()
        values = method.attribute(model, batch)
        _sync(device)
        seconds = time.perf_counter() - start
        scores[name] = values.detach().float().cpu()
        delta = getattr(method, "last_delta", None)
        flagged = getattr(method, "last_flagged", None)
        extra[name] = (seconds, None if delta is None else delta.cpu(), None if flagged is None else flagged.cpu())
    return scores, extra


def run(
    dataset_dir: str,
    model_dir: str,
    out: str,
    methods: list[str],
    method_options: dict,
    *,
    split: str = "test",
    batch_size: int = 64,
    chunk: int = 0,
    n_chunks: int = 1,
    seed: int = 0,
    threads: int = 1,
) -> pd.DataFrame:
    torch.set_num_threads(threads)
    inputs = load_audit_inputs(dataset_dir, model_dir, split)
    model, device = inputs.model, inputs.device
    objects = build_methods(methods, method_options, seed)
    n_batches = len(chunk_of(batch_plan(inputs.encoded, batch_size), chunk, n_chunks))
    log.info(
        "saliency scores: %s on %s, chunk %d/%d (%d batches), methods %s, device %s, %d thread(s)",
        model_dir,
        split,
        chunk + 1,
        n_chunks,
        n_batches,
        ", ".join(methods),
        device,
        threads,
    )
    columns = defaultdict(list)
    totals = defaultdict(float)
    for rows, batch in tqdm(
        iterate_chunk(inputs, batch_size, chunk, n_chunks),
        total=n_batches,
        desc=f"saliency chunk {chunk + 1}/{n_chunks}",
        mininterval=10,
    ):
        with torch.no_grad():
            probs = model(batch).probs
        predicted = probs.argmax(dim=-1)
        p_c = probs.gather(1, predicted[:, None]).squeeze(1).cpu().numpy()
        predicted = predicted.cpu().numpy()
        lengths = batch.mask.sum(dim=1).cpu().numpy()
        scores, extra = score_batch(model, batch, objects, device)
        for name, values in scores.items():
            seconds, delta, flagged = extra[name]
            totals[name] += seconds
            values = values.numpy()
            for i, row in enumerate(rows):  # one record per instance
                columns["row"].append(int(row))
                columns["id"].append(batch.ids[i])
                columns["method"].append(name)
                columns["signed"].append(bool(objects[name].signed))
                columns["length"].append(int(lengths[i]))
                columns["predicted"].append(int(predicted[i]))
                columns["prob"].append(float(p_c[i]))
                columns["scores"].append(values[i, : lengths[i]].astype(np.float32))
                columns["delta"].append(float("nan") if delta is None else float(delta[i]))
                columns["flagged"].append(False if flagged is None else bool(flagged[i]))
                columns["seconds"].append(seconds / len(rows))
    frame = pd.DataFrame(columns)
    frame["device"] = str(device)
    frame["threads"] = int(threads)
    frame = frame.sort_values("row", kind="stable").reset_index(drop=True)
    write_parquet(out, frame)
    n = frame["row"].nunique()
    log.info(
        "scored %d instances; seconds per 1,000 instances: %s",
        n,
        ", ".join(f"{k} {1000 * v / max(n, 1):.1f}" for k, v in totals.items()),
    )
    if "delta" in frame and frame["flagged"].any():
        log.warning(
            "integrated gradients: %d of %d instances exceed the convergence tolerance", int(frame["flagged"].sum()), n
        )
    return frame
