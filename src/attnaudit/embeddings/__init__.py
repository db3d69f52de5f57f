"""Embeddings stage: gensim Word2Vec/FastText on the train split, or user vectors, aligned to the vocabulary; the
logic is in :mod:`.vectors`."""

from __future__ import annotations

import json

from attnaudit.embeddings.vectors import (  # noqa: F401 (the stage's API)
    DEFAULTS,
    aligned_matrix,
    load_pretrained,
    run,
    train_vectors,
)


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("embeddings", help="train or load word vectors aligned to vocab.json")
    p.add_argument("--dataset-dir", required=True)
    p.add_argument("--out-dir", required=True)
    p.add_argument("--options", default="{}", help="JSON: method, dim, window, epochs, pretrained, binary")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=lambda a: run(a.dataset_dir, a.out_dir, json.loads(a.options), a.seed))
