"""Load a tokenised dataset (GUIDE §2) into padded :class:`~attnaudit.models.Batch` objects."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from attnaudit import AttnauditError
from attnaudit.io import read_json
from attnaudit.models import Batch
from attnaudit.specials import BOS, EOS, PAD, SPECIALS, UNK  # noqa: F401 (re-exported)


@dataclass
class Encoded:
    """One split as id sequences, in a fixed order (the order of ``examples.parquet``), with what a variant that
    learns from another model needs per instance: a guide distribution (W&P §3.4) or a teacher's outputs (§4)."""

    ids: list[str]
    sequences: list[np.ndarray]
    labels: np.ndarray
    guides: list[np.ndarray] | None = None
    teacher_probs: np.ndarray | None = None  # [N, C]
    teacher_attention: list[np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def batch(self, rows) -> Batch:
        """The instances ``rows`` as one padded batch, with whatever per-instance extras this split carries."""
        return collate(
            [self.sequences[i] for i in rows],
            self.labels[rows],
            [self.ids[i] for i in rows],
            guides=None if self.guides is None else [self.guides[i] for i in rows],
            teacher_probs=None if self.teacher_probs is None else self.teacher_probs[rows],
            teacher_attention=None if self.teacher_attention is None else [self.teacher_attention[i] for i in rows],
        )


def load_examples(dataset_dir: str | Path) -> tuple[pd.DataFrame, dict[str, int]]:
    dataset_dir = Path(dataset_dir)
    examples = pd.read_parquet(dataset_dir / "examples.parquet")
    vocab = read_json(dataset_dir / "vocab.json")
    return examples, vocab


def encode_split(examples: pd.DataFrame, vocab: dict[str, int], split: str | None) -> Encoded:
    rows = examples if split is None else examples[examples["split"] == split]
    unk = vocab[UNK]
    sequences = [
        np.fromiter((vocab.get(t, unk) for t in toks), dtype=np.int64, count=len(toks)) for toks in rows["tokens"]
    ]
    return Encoded(rows["id"].tolist(), sequences, rows["label"].to_numpy(dtype=np.int64))


def pad_ragged(arrays: list[np.ndarray], width: int, dtype, fill=0) -> torch.Tensor:
    """Right-pad 1-d arrays to ``[len(arrays), width]``."""
    out = np.full((len(arrays), width), fill, dtype=dtype)
    for row, values in enumerate(arrays):
        out[row, : len(values)] = values
    return torch.from_numpy(out)


def collate(
    sequences: list[np.ndarray],
    labels=None,
    ids=None,
    pad_index: int = 0,
    *,
    guides=None,
    teacher_probs=None,
    teacher_attention=None,
) -> Batch:
    """Right-pad id sequences into a :class:`Batch` with an explicit mask (and any per-instance extras)."""
    if not sequences:
        raise AttnauditError("cannot build a batch from zero sequences")
    width = max(len(s) for s in sequences)
    tokens_t = pad_ragged(sequences, width, np.int64, pad_index)
    mask = torch.from_numpy(np.arange(width)[None, :] < np.array([len(s) for s in sequences])[:, None])
    labels_t = None if labels is None else torch.as_tensor(np.asarray(labels), dtype=torch.long)
    floats = lambda arrays: None if arrays is None else pad_ragged(arrays, width, np.float32)
    return Batch(
        tokens_t,
        mask,
        labels_t,
        list(ids) if ids is not None else [],
        guide=floats(guides),
        teacher_probs=None
        if teacher_probs is None
        else torch.as_tensor(np.asarray(teacher_probs), dtype=torch.float32),
        teacher_attention=floats(teacher_attention),
    )


def iterate_batches(
    data: Encoded, batch_size: int, *, shuffle: bool = False, seed: int = 0, bucket: bool = True
) -> Iterator[tuple[np.ndarray, Batch]]:
    """Yield ``(row_indices, batch)``. With ``bucket`` rows are grouped by length (less padding, J&W sort by
    length too); with ``shuffle`` the bucket order is drawn from ``seed`` so epochs are reproducible."""
    n = len(data)
    order = np.arange(n)
    if shuffle:
        order = np.random.default_rng(seed).permutation(n)
    if bucket:
        lengths = np.array([len(s) for s in data.sequences])
        # sort within windows of 50 batches: near-uniform lengths per batch, still shuffled across windows
        window = batch_size * 50
        order = (
            np.concatenate(
                [
                    chunk[np.argsort(lengths[chunk], kind="stable")]
                    for chunk in np.array_split(order, max(1, int(np.ceil(n / window))))
                ]
            )
            if n
            else order
        )
    starts = list(range(0, n, batch_size))
    if shuffle:
        starts = [starts[i] for i in np.random.default_rng(seed + 1).permutation(len(starts))]
    for start in starts:
        rows = order[start : start + batch_size]
        yield rows, data.batch(rows)
