"""Load a tokenised dataset into padded :class:`~attnaudit.models.Batch` objects.

PyTorch is imported where batches are built, not with the module: a job that only reads a split's id sequences
(J&W's correlation) needs no PyTorch, which takes 1.5–2 CPU s to import.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from attnaudit import AttnauditError
from attnaudit.io import read_json, read_parquet
from attnaudit.specials import BOS, EOS, PAD, SPECIALS, UNK  # noqa: F401 (re-exported)

if TYPE_CHECKING:
    import torch

    from attnaudit.models import Batch


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
    queries: list[np.ndarray] | None = None  # QA/NLI (J&W §3): question/hypothesis ids, one per instance

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
            queries=None if self.queries is None else [self.queries[i] for i in rows],
        )


def load_examples(dataset_dir: str | Path) -> tuple[pd.DataFrame, dict[str, int]]:
    dataset_dir = Path(dataset_dir)
    examples = read_parquet(dataset_dir / "examples.parquet")
    vocab = read_json(dataset_dir / "vocab.json")
    return examples, vocab


def encode_split(examples: pd.DataFrame, vocab: dict[str, int], split: str | None) -> Encoded:
    rows = examples if split is None else examples[examples["split"] == split]
    unk = vocab[UNK]
    ids = lambda column: [  # noqa: E731
        np.fromiter((vocab.get(t, unk) for t in toks), dtype=np.int64, count=len(toks)) for toks in rows[column]
    ]
    queries = ids("query_tokens") if "query_tokens" in rows.columns else None
    return Encoded(rows["id"].tolist(), ids("tokens"), rows["label"].to_numpy(dtype=np.int64), queries=queries)


def pad_ragged(arrays: list[np.ndarray], width: int, dtype, fill=0) -> torch.Tensor:
    """Right-pad 1-d arrays to ``[len(arrays), width]``."""
    import torch

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
    queries=None,
) -> Batch:
    """Right-pad id sequences into a :class:`Batch` with an explicit mask (and any per-instance extras; ``queries``:
    the question/hypothesis id sequences of QA/NLI instances, padded into ``query_tokens``/``query_mask``)."""
    import torch

    from attnaudit.models import Batch

    if not sequences:
        raise AttnauditError("cannot build a batch from zero sequences")
    width = max(len(s) for s in sequences)
    tokens_t = pad_ragged(sequences, width, np.int64, pad_index)
    mask = torch.from_numpy(np.arange(width)[None, :] < np.array([len(s) for s in sequences])[:, None])
    labels_t = None if labels is None else torch.as_tensor(np.asarray(labels), dtype=torch.long)
    floats = lambda arrays: None if arrays is None else pad_ragged(arrays, width, np.float32)
    query_tokens = query_mask = None
    if queries is not None:
        query_width = max(1, max(len(q) for q in queries))
        query_tokens = pad_ragged(queries, query_width, np.int64, pad_index)
        query_mask = torch.from_numpy(np.arange(query_width)[None, :] < np.array([len(q) for q in queries])[:, None])
    return Batch(
        tokens_t,
        mask,
        labels_t,
        list(ids) if ids is not None else [],
        query_tokens=query_tokens,
        query_mask=query_mask,
        guide=floats(guides),
        teacher_probs=None
        if teacher_probs is None
        else torch.as_tensor(np.asarray(teacher_probs), dtype=torch.float32),
        teacher_attention=floats(teacher_attention),
    )


def split_by_tokens(rows: np.ndarray, lengths: np.ndarray, max_tokens: int | None) -> list[np.ndarray]:
    """``rows`` as one batch, or, when rows × longest row exceeds ``max_tokens``, as consecutive pieces (by
    length) that fit (a row longer than the budget alone): memory is bounded by the config, not by the longest
    document, and a corpus without long documents keeps its batches unchanged."""
    if not max_tokens or len(rows) * max(1, int(lengths[rows].max(initial=1))) <= max_tokens:
        return [rows]
    ordered = rows[np.argsort(lengths[rows], kind="stable")]
    pieces, start = [], 0
    while start < len(ordered):
        stop = start + 1
        while stop < len(ordered) and (stop + 1 - start) * max(1, int(lengths[ordered[stop]])) <= max_tokens:
            stop += 1
        pieces.append(ordered[start:stop])
        start = stop
    return pieces


def iterate_batches(
    data: Encoded,
    batch_size: int,
    *,
    shuffle: bool = False,
    seed: int = 0,
    bucket: bool = True,
    max_tokens: int | None = None,
) -> Iterator[tuple[np.ndarray, Batch]]:
    """Yield ``(row_indices, batch)``. With ``bucket`` rows are grouped by length (less padding, J&W sort by
    length too); with ``shuffle`` the bucket order is drawn from ``seed`` so epochs are reproducible; a batch of
    more than ``max_tokens`` padded tokens is cut into pieces (:func:`split_by_tokens`)."""
    lengths = np.array([len(s) for s in data.sequences])
    n = len(data)
    order = np.arange(n)
    if shuffle:
        order = np.random.default_rng(seed).permutation(n)
    if bucket:
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
        for rows in split_by_tokens(order[start : start + batch_size], lengths, max_tokens):
            yield rows, data.batch(rows)
