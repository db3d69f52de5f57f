"""Distances between two models' outputs on the same instances (W&P §3.1): TVD of the predicted distributions and
JSD (nats, ≤ ln 2) of the attention distributions, over all instances at once.

Attention is compared over the real tokens without the sentence markers ``<s>``, ``</s>``, both distributions
renormalised over those positions (W&P's seed analysis slices the inner tokens ``[1:-1]``); an instance made only
of markers has no such token and gets NaN. The ``max_attention`` reported with them is the reference model's
maximum over the same renormalised positions.

NumPy and SciPy only (the JSD's terms are ``scipy.special.rel_entr``, the statistic of ``attnaudit.metrics.jsd``):
the jobs that compare predictions load no model, so they do not import PyTorch (2–3 CPU s).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import rel_entr

from attnaudit import AttnauditError
from attnaudit.data import Encoded, encode_split, load_examples
from attnaudit.io import read_parquet
from attnaudit.metrics import LN2, tvd
from attnaudit.specials import marker_ids


@dataclass
class Split:
    """One split of a dataset in ``examples.parquet`` order, with the vocabulary ids of its markers."""

    name: str
    data: Encoded
    markers: tuple[int, ...]

    @cached_property
    def lengths(self) -> np.ndarray:
        return np.fromiter(map(len, self.data.sequences), dtype=np.int64, count=len(self.data))

    @cached_property
    def owner(self) -> np.ndarray:
        """The instance of every token of the concatenated sequences."""
        return np.repeat(np.arange(len(self.data)), self.lengths)

    @cached_property
    def content(self) -> np.ndarray:
        """Whether each token of the concatenated sequences is a real token (not a sentence marker)."""
        return ~np.isin(np.concatenate(self.data.sequences), self.markers)

    @cached_property
    def n_content(self) -> np.ndarray:
        """Non-marker tokens per instance."""
        return np.bincount(self.owner, weights=self.content, minlength=len(self.data)).astype(np.int64)


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
    return tvd(np.stack([o.probs for o in others]), reference.probs)


def _renormalised(predictions: Predictions, split: Split) -> tuple[np.ndarray, np.ndarray]:
    """Concatenated attention of every instance rescaled to sum to 1 over its non-marker tokens (0 on markers), and
    per instance whether those tokens hold any mass (not for an instance of markers only: undefined there)."""
    owner, content = split.owner, split.content
    values = np.where(content, np.concatenate(predictions.attention).astype(np.float64), 0.0)
    total = np.bincount(owner, weights=values, minlength=len(split.data))
    defined = total > 0  # False for NaN weights too
    return values / np.where(defined, total, 1.0)[owner], defined


def attention_jsd(others: list[Predictions], reference: Predictions, split: Split) -> tuple[np.ndarray, np.ndarray]:
    """JSD [S, N] of each of ``others``' attention to the reference's over the non-marker tokens (both
    renormalised there), and the reference's max renormalised attention [N]. NaN where undefined."""
    n, owner = len(split.data), split.owner
    base, base_defined = _renormalised(reference, split)
    top = np.zeros(n)
    with np.errstate(invalid="ignore"):  # NaN weights: the instance is undefined anyway
        np.maximum.at(top, owner, base)
    top[~base_defined] = np.nan
    out = np.empty((len(others), n))
    for s, other in enumerate(others):
        alt, alt_defined = _renormalised(other, split)
        middle = 0.5 * (alt + base)
        terms = 0.5 * rel_entr(alt, middle) + 0.5 * rel_entr(base, middle)  # 0·log 0 = 0 on the markers
        divergence = np.clip(np.bincount(owner, weights=terms, minlength=n), 0.0, LN2)
        out[s] = np.where(base_defined & alt_defined, divergence, np.nan)
    return out, top
