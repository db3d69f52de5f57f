"""Outputs of another model that a variant learns from: a guide's attention (W&P §3.4, fed to ``guided``
attention in training and testing) and a teacher's predictions and attention (W&P §4, the ``imitate`` objective).
Both come from the teacher's ``predictions.parquet`` (every split), matched to the student's instances by id."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from attnaudit import AttnauditError
from attnaudit.data import Encoded
from attnaudit.io import read_parquet


def read_teacher(path: str | Path) -> pd.DataFrame:
    frame = read_parquet(path, columns=["id", "split", "probs", "attention"])
    return frame.set_index("id", drop=False)


def aligned(teacher: pd.DataFrame, data: Encoded, path, split: str) -> pd.DataFrame:
    """The teacher's rows for ``data``'s instances, in ``data``'s order; every instance must be there with an
    attention of its length (same dataset, same tokenisation)."""
    missing = [i for i in data.ids if i not in teacher.index]
    if missing:
        raise AttnauditError(
            f"{path} has no outputs for {len(missing)} {split} instances (e.g. {missing[:3]}): "
            "the teacher was trained on another version of this dataset; retrain it"
        )
    rows = teacher.loc[data.ids]
    lengths = np.array([len(a) for a in rows["attention"]])
    expected = np.array([len(s) for s in data.sequences])
    if not np.array_equal(lengths, expected):
        bad = data.ids[int(np.argmax(lengths != expected))]
        raise AttnauditError(
            f"{path}: the attention of {split} instance {bad!r} does not match its tokens; "
            "the teacher was trained on another tokenisation; retrain it"
        )
    return rows


def attach_guides(splits: dict[str, Encoded], path) -> dict[str, np.ndarray]:
    """Give every split the guide's attention per instance; returns ``{id: attention}`` to save with the model."""
    teacher = read_teacher(path)
    guides = {}
    for name, data in splits.items():
        rows = aligned(teacher, data, path, name)
        data.guides = [np.asarray(a, dtype=np.float32) for a in rows["attention"]]
        guides.update(zip(data.ids, data.guides, strict=True))
    return guides


def attach_teacher(splits: dict[str, Encoded], path) -> None:
    """Give every split the teacher's predicted distribution and attention per instance."""
    teacher = read_teacher(path)
    for name, data in splits.items():
        rows = aligned(teacher, data, path, name)
        data.teacher_probs = np.stack(rows["probs"].to_numpy()).astype(np.float32)
        data.teacher_attention = [np.asarray(a, dtype=np.float32) for a in rows["attention"]]
