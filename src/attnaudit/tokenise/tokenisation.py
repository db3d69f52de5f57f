"""Tokenise stage: documents.parquet → examples.parquet, vocab.json, stats.json (GUIDE §2).

J&W Appendix A: spaCy tokenisation, lowercase, every token containing a digit → ``qqq``, out-of-vocabulary
words → ``<unk>``; vocabulary from the train split with a per-dataset minimum count (§3 choices in the corpus
registry). Splits: a corpus without a test split gets a seeded stratified test split (``test_fraction``), one
without a dev split gets one carved out of train (``dev_fraction``); ``max_tokens``/``min_tokens`` drop long or
short documents (J&W: IMDB < 400 tokens; their code also drops sentences shorter than 5 tokens *including* the
sentence markers), and ``test_sample`` keeps a seeded fraction of the test documents (J&W: 20 % for IMDB).
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from attnaudit import AttnauditError
from attnaudit.data import BOS, EOS, SPECIALS
from attnaudit.io import write_json, write_parquet

log = logging.getLogger(__name__)
_DIGIT = re.compile(r"\d")

DEFAULTS = {
    "min_count": 1,
    "max_tokens": None,
    "min_tokens": 0,
    "dev_fraction": 0.2,
    "test_fraction": 0.2,
    "test_sample": None,
    "markers": True,
    "max_examples": None,
    "lowercase": True,
}


def make_tokenizer():
    """spaCy's rule-based English tokenizer (``spacy.blank('en')``: no model download)."""
    import spacy

    return spacy.blank("en").tokenizer


def tokenize_texts(texts: list[str], *, lowercase: bool = True, batch_size: int = 1000) -> list[list[str]]:
    """Tokenise with spaCy; lowercase; a token containing a digit becomes ``qqq`` (J&W App. A)."""
    tokenizer = make_tokenizer()
    out = []
    for doc in tokenizer.pipe(texts, batch_size=batch_size):
        toks = []
        for tok in doc:
            if tok.is_space:
                continue
            text = tok.text.lower() if lowercase else tok.text
            toks.append("qqq" if _DIGIT.search(text) else text)
        out.append(toks)
    return out


def build_vocab(train_tokens: list[list[str]], min_count: int) -> dict[str, int]:
    """Specials first, then train words with count ≥ ``min_count`` by descending count, ties alphabetical."""
    counts = Counter(t for toks in train_tokens for t in toks)
    words = sorted(
        (w for w, c in counts.items() if c >= min_count and w not in SPECIALS), key=lambda w: (-counts[w], w)
    )
    return {w: i for i, w in enumerate([*SPECIALS, *words])}


def _stratified_split(frame: pd.DataFrame, fraction: float, seed: int, new_split: str) -> pd.DataFrame:
    """Move a seeded, label-stratified ``fraction`` of ``frame`` to ``new_split``."""
    if not 0 < fraction < 1:
        raise AttnauditError(f"split fraction must be in (0, 1), got {fraction}")
    labels = frame["label"]
    stratify = labels if labels.value_counts().min() >= 2 else None
    _, moved = train_test_split(frame.index, test_size=fraction, random_state=seed, stratify=stratify)
    frame = frame.copy()
    frame.loc[moved, "split"] = new_split
    return frame


def assign_splits(docs: pd.DataFrame, options: dict, seed: int) -> pd.DataFrame:
    splits = set(docs["split"])
    unknown = splits - {"train", "dev", "test", "all"}
    if unknown:
        raise AttnauditError(f"documents have unknown split values {sorted(unknown)}; expected train/dev/test/all")
    docs = docs.copy()
    docs.loc[docs["split"] == "all", "split"] = "train"
    if "all" in splits and "test" not in splits:
        train = docs[docs["split"] == "train"]
        docs.loc[train.index, "split"] = _stratified_split(train, options["test_fraction"], seed, "test")["split"]
    if "dev" not in splits:
        train = docs[docs["split"] == "train"]
        docs.loc[train.index, "split"] = _stratified_split(train, options["dev_fraction"], seed + 1, "dev")["split"]
    return docs


def tokenise_documents(docs: pd.DataFrame, options: dict, seed: int) -> tuple[pd.DataFrame, dict, dict]:
    """Return (examples, vocab, stats)."""
    options = {**DEFAULTS, **options}
    missing = {"id", "split", "label", "text"} - set(docs.columns)
    if missing:
        raise AttnauditError(f"documents are missing columns {sorted(missing)}")
    dropped: Counter = Counter()
    docs = docs.reset_index(drop=True)
    if options["max_examples"]:
        # a seeded, stratified-by-split slice for quick runs (tests/config.yaml)
        keep = [
            g.sample(n=min(len(g), options["max_examples"]), random_state=seed).index
            for _, g in docs.groupby("split", sort=True)
        ]
        docs = docs.loc[sorted(np.concatenate(keep))]
    tokens = tokenize_texts(docs["text"].fillna("").tolist(), lowercase=options["lowercase"])
    docs = docs.assign(tokens=tokens, n_tokens=[len(t) for t in tokens])

    empty = docs["n_tokens"] == 0
    dropped["empty"] = int(empty.sum())
    docs = docs[~empty]
    marker_count = 2 if options["markers"] else 0
    if options["max_tokens"]:
        too_long = docs["n_tokens"] >= options["max_tokens"]
        dropped[f"n_tokens >= {options['max_tokens']}"] = int(too_long.sum())
        docs = docs[~too_long]
    if options["min_tokens"]:
        too_short = docs["n_tokens"] + marker_count < options["min_tokens"]
        dropped[f"n_tokens incl. markers < {options['min_tokens']}"] = int(too_short.sum())
        docs = docs[~too_short]

    docs = assign_splits(docs, options, seed)
    if options["test_sample"]:
        test = docs[docs["split"] == "test"]
        keep = test.sample(frac=options["test_sample"], random_state=seed + 2).index
        not_sampled = test.index.difference(keep)
        dropped[f"test not in the {options['test_sample']:.0%} sample"] = len(not_sampled)
        docs = docs.drop(index=not_sampled)

    if "important" in docs.columns:
        docs = docs.assign(important=[_shift_important(row, marker_count) for row in docs.itertuples()])
    if options["markers"]:
        docs = docs.assign(tokens=[[BOS, *t, EOS] for t in docs["tokens"]])

    vocab = build_vocab(docs.loc[docs["split"] == "train", "tokens"].tolist(), options["min_count"])
    split_order = {"train": 0, "dev": 1, "test": 2}
    docs = docs.sort_values(by=["split", "id"], key=lambda s: s.map(split_order) if s.name == "split" else s)
    columns = ["id", "split", "label", "tokens"] + (["important"] if "important" in docs.columns else [])
    examples = docs[columns].reset_index(drop=True)
    stats = _stats(examples, vocab, dropped, options)
    return examples, vocab, stats


def _shift_important(row, marker_count: int) -> list[int]:
    """Planted positions are whitespace-word indices; check they survive tokenisation and shift past <s>."""
    if len(row.text.split()) != row.n_tokens:
        raise AttnauditError(f"document {row.id}: planted text does not tokenise one word per token")
    return [int(p) + (1 if marker_count else 0) for p in row.important]


def _stats(examples: pd.DataFrame, vocab: dict, dropped: Counter, options: dict) -> dict:
    unk = 0
    counts = {}
    for split, group in examples.groupby("split"):
        counts[split] = {str(k): int(v) for k, v in group["label"].value_counts().sort_index().items()}
    lengths = examples["tokens"].map(len)
    n_tokens = int(lengths.sum())
    for toks in examples["tokens"]:
        unk += sum(t not in vocab for t in toks)
    return {
        "counts": counts,
        "total": int(len(examples)),
        "dropped": {k: v for k, v in dropped.items()},
        "vocab_size": len(vocab),
        "mean_tokens": float(lengths.mean()) if len(examples) else 0.0,
        "max_tokens": int(lengths.max()) if len(examples) else 0,
        "unk_rate": unk / n_tokens if n_tokens else 0.0,
        "options": options,
    }


def run(documents: str, out_dir: str, options: dict, seed: int) -> dict:
    docs = pd.read_parquet(documents)
    examples, vocab, stats = tokenise_documents(docs, options, seed)
    out = Path(out_dir)
    write_parquet(out / "examples.parquet", examples)
    write_json(out / "vocab.json", vocab)
    write_json(out / "stats.json", stats)
    log.info(
        "tokenised %d examples (%s), vocab %d, dropped %s",
        stats["total"],
        stats["counts"],
        stats["vocab_size"],
        stats["dropped"],
    )
    return stats
