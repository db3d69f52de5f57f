"""Per-token prediction probability (T&Š §5, Eq. 9, Table 3, Fig. 2).

The decoder is affine, so the logits are an attention-weighted sum of per-token logits,
p_logit = W_d(Σ_t α_t h_t) + b_d = Σ_t α_t (W_d h_t + b_d) = Σ_t α_t p̂_t (Eq. 9); softmax(p̂_t) is the
prediction "as if the whole attention mass was on" token t. Per instance we keep that probability of the
model's predicted class for every real token (``token_probs``) and its mean over the real non-marker tokens
(``mean_token_prob``; the markers ``<s>``, ``</s>`` are not words of the text). Table 3 averages
``mean_token_prob`` over correctly predicted instances (lower is better). One ``model.token_logits`` call per
batch.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from attnaudit.auditing import batch_plan, iterate_chunk, load_audit_inputs
from attnaudit.io import write_parquet
from attnaudit.jain_wallace.common import ragged
from attnaudit.masks import content_mask, marker_ids
from attnaudit.models import Batch

log = logging.getLogger(__name__)


@torch.no_grad()
def token_probability_batch(model, batch: Batch, markers: tuple[int, ...]) -> dict:
    """Columns of one batch: prediction, per-token probabilities of the predicted class, their mean."""
    out = model(batch)
    predicted = out.logits.argmax(dim=-1)  # [B]
    per_token = torch.softmax(model.token_logits(out.hidden, out.query), dim=-1)  # [B, T, C]
    token_probs = per_token.gather(-1, predicted[:, None, None].expand(-1, per_token.shape[1], 1)).squeeze(-1)
    words = content_mask(batch, markers).to(token_probs.dtype)
    mean = (token_probs * words).sum(dim=1) / words.sum(dim=1)
    labels = batch.labels.cpu().numpy() if batch.labels is not None else np.full(len(batch.ids), -1)
    predicted_np = predicted.cpu().numpy()
    return {
        "id": list(batch.ids),
        "label": labels,
        "predicted": predicted_np,
        "correct": predicted_np == labels,
        "n_tokens": batch.lengths.cpu().numpy(),
        "prediction_prob": out.probs.gather(1, predicted[:, None]).squeeze(1).double().cpu().numpy(),
        "token_probs": ragged(token_probs, batch.lengths),
        "mean_token_prob": mean.double().cpu().numpy(),
    }


def run_token_probability(
    dataset_dir: str | Path,
    model_dir: str | Path,
    out: str | Path,
    *,
    split: str = "test",
    batch_size: int = 64,
    threads: int = 1,
    progress: bool = True,
) -> pd.DataFrame:
    """Write one row per instance (in ``examples.parquet`` order, ``row`` = position in the split)."""
    torch.set_num_threads(max(1, threads))
    started = time.time()
    inputs = load_audit_inputs(dataset_dir, model_dir, split)
    markers = marker_ids(inputs.vocab)
    frames = []
    n_batches = len(batch_plan(inputs.encoded, batch_size))
    for rows, batch in tqdm(
        iterate_chunk(inputs, batch_size), total=n_batches, desc="token probability", disable=not progress
    ):
        frame = pd.DataFrame(token_probability_batch(inputs.model, batch, markers))
        frame.insert(1, "row", rows)
        frames.append(frame)
    frame = pd.concat(frames, ignore_index=True).sort_values("row", kind="stable").reset_index(drop=True)
    write_parquet(out, frame)
    correct = frame[frame["correct"]]
    log.info(
        "per-token probability of %s (%s): mean %.3f over %d correct of %d instances in %.1f s → %s",
        model_dir,
        split,
        correct["mean_token_prob"].mean() if len(correct) else float("nan"),
        len(correct),
        len(frame),
        time.time() - started,
        out,
    )
    return frame
