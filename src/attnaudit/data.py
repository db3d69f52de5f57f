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

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<s>", "</s>"
SPECIALS = (PAD, UNK, BOS, EOS)


@dataclass
class Encoded:
    """One split as id sequences, in a fixed order (the order of ``examples.parquet``)."""

    ids: list[str]
    sequences: list[np.ndarray]
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)


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


def collate(sequences: list[np.ndarray], labels=None, ids=None, pad_index: int = 0) -> Batch:
    """Right-pad id sequences into a :class:`Batch` with an explicit mask."""
    if not sequences:
        raise AttnauditError("cannot build a batch from zero sequences")
    width = max(len(s) for s in sequences)
    tokens = np.full((len(sequences), width), pad_index, dtype=np.int64)
    for row, seq in enumerate(sequences):
        tokens[row, : len(seq)] = seq
    tokens_t = torch.from_numpy(tokens)
    mask = torch.from_numpy(np.arange(width)[None, :] < np.array([len(s) for s in sequences])[:, None])
    labels_t = None if labels is None else torch.as_tensor(np.asarray(labels), dtype=torch.long)
    return Batch(tokens_t, mask, labels_t, list(ids) if ids is not None else [])


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
        yield rows, collate([data.sequences[i] for i in rows], data.labels[rows], [data.ids[i] for i in rows])
