"""Embeddings stage: gensim Word2Vec/FastText on the train split, or user vectors, aligned to the vocabulary; the
logic is in :mod:`.vectors`, the reading of a user's vectors file in :mod:`.pretrained`."""

from __future__ import annotations

import json

from attnaudit.embeddings.pretrained import check_pretrained, load_pretrained, vectors_format  # noqa: F401
from attnaudit.embeddings.vectors import DEFAULTS, aligned_matrix, run, train_vectors  # noqa: F401 (the API)


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("embeddings", help="train or load word vectors aligned to vocab.json")
    p.add_argument("--dataset-dir", required=True)
    p.add_argument("--out-dir", required=True)
    p.add_argument("--options", default="{}", help="JSON: method, dim, window, epochs, pretrained, binary")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=lambda a: run(a.dataset_dir, a.out_dir, json.loads(a.options), a.seed))
