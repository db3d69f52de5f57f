"""Distances between two models' outputs on the same instances (W&P §3.1): TVD of the predicted distributions and
JSD (nats, ≤ ln 2) of the attention distributions, batched over instances.

Attention is compared over the real tokens without the sentence markers ``<s>``, ``</s>``, both distributions
renormalised over those positions (W&P's seed analysis slices the inner tokens ``[1:-1]``); an instance made only
of markers has no such token and gets NaN. The ``max_attention`` reported with them is the reference model's
maximum over the same renormalised positions.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from attnaudit import AttnauditError
from attnaudit.data import Encoded, collate, encode_split, load_examples
from attnaudit.io import read_parquet
from attnaudit.masks import candidate_mask, marker_ids
from attnaudit.metrics import jsd, tvd

BLOCK = 1024  # instances per padded block (sorted by length, so little padding)


@dataclass
class Split:
    """One split of a dataset in ``examples.parquet`` order, with the vocabulary ids of its markers."""

    name: str
    data: Encoded
    markers: tuple[int, ...]

    @property
    def lengths(self) -> np.ndarray:
        return np.fromiter(map(len, self.data.sequences), dtype=np.int64, count=len(self.data))

    @property
    def n_content(self) -> np.ndarray:
        """Non-marker tokens per instance."""
        owner = np.repeat(np.arange(len(self.data)), self.lengths)
        content = ~np.isin(np.concatenate(self.data.sequences), self.markers)
        return np.bincount(owner, weights=content, minlength=len(self.data)).astype(np.int64)


@dataclass
class Predictions:
    """A model's predictions on a :class:`Split`, row-aligned with it."""

    path: str
    probs: np.ndarray  # [N, C]
    attention: list[np.ndarray]  # N arrays over all real tokens (markers included)

    @property
    def predicted(self) -> np.ndarray:
        return self.probs.argmax(axis=1)


def load_split(dataset_dir: str | Path, split: str) -> Split:
    examples, vocab = load_examples(dataset_dir)
    data = encode_split(examples, vocab, split)
    if not len(data):
        raise AttnauditError(f"{dataset_dir}: no {split!r} instances in examples.parquet")
    return Split(split, data, marker_ids(vocab))


def load_predictions(path: str | Path, split: Split) -> Predictions:
    """Rows of ``predictions.parquet`` for ``split``, in the split's order; every instance must be there with an
    attention vector as long as its tokens and the same gold label."""
    frame = read_parquet(path, columns=["id", "split", "label", "probs", "attention"])
    frame = frame[frame["split"] == split.name]
    if frame["id"].duplicated().any():
        raise AttnauditError(f"{path}: duplicate ids in split {split.name!r}")
    frame = frame.set_index("id")
    missing = pd.Index(split.data.ids).difference(frame.index)
    if len(missing):
        raise AttnauditError(
            f"{path}: {len(missing)} {split.name!r} instances of the dataset have no prediction, "
            f"e.g. {list(missing[:3])}"
        )
    frame = frame.loc[split.data.ids]
    lengths = frame["attention"].map(len).to_numpy()
    wrong = np.flatnonzero(lengths != split.lengths)
    if len(wrong):
        i = wrong[0]
        raise AttnauditError(
            f"{path}: attention of {frame.index[i]!r} has {lengths[i]} weights for {split.lengths[i]} tokens "
            f"({len(wrong)} instances differ): predictions and dataset do not match"
        )
    if not np.array_equal(frame["label"].to_numpy(np.int64), split.data.labels):
        raise AttnauditError(f"{path}: gold labels differ from the dataset's: predictions and dataset do not match")
    return Predictions(str(path), np.stack(frame["probs"].to_numpy()).astype(np.float64), list(frame["attention"]))


def output_tvd(others: list[Predictions], reference: Predictions) -> np.ndarray:
    """TVD [S, N] between each of ``others``' predicted distributions and the reference's."""
    stacked = torch.from_numpy(np.stack([o.probs for o in others]))
    return tvd(stacked, torch.from_numpy(reference.probs)).numpy()


def _pad(arrays: list[np.ndarray], mask: torch.Tensor) -> torch.Tensor:
    """Right-padded float64 matrix of ragged arrays (row-major order of ``mask`` = concatenation order)."""
    values = torch.zeros(mask.shape, dtype=torch.float64)
    values[mask] = torch.from_numpy(np.concatenate(arrays).astype(np.float64))
    return values


def _renormalise(values: torch.Tensor, support: torch.Tensor) -> torch.Tensor:
    """Weights on ``support`` rescaled to sum to 1; NaN rows where the support holds no mass."""
    kept = values.masked_fill(~support, 0.0)
    total = kept.sum(dim=1, keepdim=True)
    return torch.where(total > 0, kept / total.clamp_min(torch.finfo(kept.dtype).tiny), torch.nan)


def attention_jsd(others: list[Predictions], reference: Predictions, split: Split) -> tuple[np.ndarray, np.ndarray]:
    """JSD [S, N] of each of ``others``' attention to the reference's over the non-marker tokens (both
    renormalised there), and the reference's max renormalised attention [N]. NaN where undefined."""
    n = len(split.data)
    out = np.full((len(others), n), np.nan)
    top = np.full(n, np.nan)
    order = np.argsort(split.lengths, kind="stable")
    for start in range(0, n, BLOCK):
        rows = order[start : start + BLOCK]
        batch = collate([split.data.sequences[i] for i in rows])
        support = candidate_mask(batch.tokens, batch.mask, split.markers)
        base = _renormalise(_pad([reference.attention[i] for i in rows], batch.mask), support)
        top[rows] = base.max(dim=1).values.numpy()  # NaN rows stay NaN
        for s, other in enumerate(others):
            alt = _renormalise(_pad([other.attention[i] for i in rows], batch.mask), support)
            value = jsd(alt, base)
            out[s, rows] = torch.where(alt.isnan().any(1) | base.isnan().any(1), torch.nan, value).numpy()
    return out, top
