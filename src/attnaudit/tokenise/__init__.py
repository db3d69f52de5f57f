"""Tokenise stage (J&W App. A): documents.parquet → examples.parquet, vocab.json, stats.json; the logic is in
:mod:`.tokenisation`."""

from __future__ import annotations

import json

from attnaudit.tokenise.tokenisation import (  # noqa: F401 (the stage's API)
    DEFAULTS,
    assign_splits,
    build_vocab,
    make_tokenizer,
    run,
    tokenise_documents,
    tokenize_texts,
)


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("tokenise", help="documents.parquet → examples.parquet, vocab.json, stats.json")
    p.add_argument("--documents", required=True)
    p.add_argument("--out-dir", required=True)
    p.add_argument("--options", default="{}", help="JSON: min_count, max_tokens, min_tokens, dev_fraction, ...")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=lambda a: run(a.documents, a.out_dir, json.loads(a.options), a.seed))
