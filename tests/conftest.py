"""Shared fixtures: a small planted dataset taken through the real corpus → tokenise → embeddings stages."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]


def mirror_dir() -> Path | None:
    """The local corpus mirror: env ATTNAUDIT_MIRROR, else ../shared/corpora beside the checkout."""
    candidates = [os.environ.get("ATTNAUDIT_MIRROR"), REPO.parent / "shared" / "corpora"]
    for candidate in candidates:
        if candidate and Path(candidate).is_dir():
            return Path(candidate).resolve()
    return None


@pytest.fixture(scope="session", autouse=True)
def _single_thread():
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def planted_dataset(tmp_path_factory) -> Path:
    """results/datasets/planted + embeddings for ~600 planted documents (built with the real stages)."""
    from attnaudit import corpora, embeddings, tokenise

    root = tmp_path_factory.mktemp("planted")
    documents = root / "corpora" / "documents.parquet"
    corpora.run("planted", out=documents, manifest=root / "corpora" / "manifest.json", raw_dir=root / "raw",
                options={"n_examples": 600}, seed=0)
    tokenise.run(str(documents), str(root / "dataset"), {"min_count": 1}, seed=0)
    embeddings.run(str(root / "dataset"), str(root / "embeddings"), {"dim": 16, "epochs": 2}, seed=0)
    return root


@pytest.fixture(scope="session")
def planted_model_dir(planted_dataset) -> Path:
    """A trained average-encoder model on the planted dataset (a few seconds)."""
    from attnaudit import train

    out = planted_dataset / "models" / "average-additive-base-s0"
    train.run(str(planted_dataset / "dataset"), str(planted_dataset / "embeddings" / "matrix.npy"), str(out),
              {"encoder": "average", "attention": "additive", "epochs": 6}, threads=1)
    return out
