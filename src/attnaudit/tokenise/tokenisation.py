"""Tokenise stage: documents.parquet → examples.parquet, vocab.json, stats.json.

J&W Appendix A: spaCy tokenisation (English, or the corpus's ``language``; of NFC text without invisible format
characters), lowercase, every token containing a digit → ``qqq``, out-of-vocabulary words → ``<unk>``; vocabulary from
the train split with a per-dataset minimum count (§3 choices in the corpus registry). Splits: a corpus without a test
split gets a seeded stratified test split (``test_fraction``), one without a dev split gets one carved out of train
(``dev_fraction``); ``max_tokens``/``min_tokens`` drop long or short documents (J&W: IMDB < 400 tokens; their code
also drops sentences shorter than 5 tokens *including* the sentence markers), and ``test_sample`` keeps a seeded
fraction of the test documents (J&W: 20 % for IMDB).
"""

from __future__ import annotations

import logging
import re
import sys
import unicodedata
from collections import Counter
from collections.abc import Callable
from functools import cache, partial
from pathlib import Path

import numpy as np
import pandas as pd

from attnaudit import AttnauditError, ConfigKeyError
from attnaudit.io import merged_options, read_parquet, write_json, write_parquet
from attnaudit.specials import BOS, EOS, SPECIALS
from attnaudit.writing_systems import UNSPACED_SCRIPTS, script_pattern

log = logging.getLogger(__name__)
_DIGIT = re.compile(r"\d")
_ENTITY = re.compile(r"@entity\d+")  # CNN's anonymised entities are answer candidates, not numbers

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
    "language": "en",
    "segmenter": "char",
}

#: spaCy's Chinese segmenters that need no model download: characters, or jieba's words (its dictionary ships in
#: its wheel)
CHINESE_SEGMENTERS = ("char", "jieba")


@cache
def make_tokenizer(language: str = "en", segmenter: str = "char"):
    """spaCy's rule-based tokenizer of ``language`` (``spacy.blank(language)``: no model download). J&W App. A
    tokenise English (``en``, the default); ``zh`` is one token per character (spaCy's default Chinese
    segmenter) or, with ``segmenter="jieba"``, per jieba word; ``ja``, ``ko``, ``th`` and ``vi`` need the
    package spaCy names; ``xx`` is spaCy's multi-language tokenizer (spaces and punctuation)."""
    import importlib.util

    import spacy

    if not language.isascii() or not language.isalpha() or importlib.util.find_spec(f"spacy.lang.{language}") is None:
        raise ConfigKeyError(
            ("tokenise", "language"),
            f"spaCy has no tokenizer of {language!r}; give the language's ISO 639-1 code as spaCy names it (en, de, "
            "fr, zh, ...), or xx for spaCy's multi-language tokenizer",
        )
    if segmenter != "char" and (language != "zh" or segmenter not in CHINESE_SEGMENTERS):
        raise ConfigKeyError(
            ("tokenise", "segmenter"),
            f"{segmenter!r} — a segmenter is chosen for Chinese only (language zh), one of "
            f"{', '.join(CHINESE_SEGMENTERS)}",
        )
    config = {"nlp": {"tokenizer": {"segmenter": segmenter}}} if language == "zh" else {}
    try:
        return spacy.blank(language, config=config).tokenizer
    except ImportError as err:  # Japanese, Korean, Thai, Vietnamese, Chinese words: a segmenter of their own
        with_segmenter = f" with segmenter {segmenter!r}" if segmenter != "char" else ""
        raise ConfigKeyError(
            ("tokenise", "segmenter" if with_segmenter else "language"),
            f"spaCy's tokenizer of {language!r}{with_segmenter} needs a package that is not installed: {err}",
        ) from err


JOINERS = "\u200c\u200d"  # ZWNJ, ZWJ: format characters that are spelling inside words
_NO_JOINERS = dict.fromkeys(map(ord, JOINERS))


@cache
def _format_characters() -> re.Pattern:
    """Every format character (Unicode category Cf) but the joiners."""
    chars = (chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf")
    return re.compile("[" + "".join(re.escape(c) for c in chars if c not in JOINERS) + "]")


def clean_text(text: str) -> str:
    """``text`` without format characters other than the joiners, in Unicode NFC (see :func:`tokenize_texts`)."""
    return text if text.isascii() else unicodedata.normalize("NFC", _format_characters().sub("", text))


def tokenize_texts(
    texts: list[str], *, lowercase: bool = True, language: str = "en", segmenter: str = "char", batch_size: int = 1000
) -> list[list[str]]:
    """Tokenise with spaCy's tokenizer of ``language`` (:func:`make_tokenizer`); lowercase; a token containing a
    digit becomes ``qqq`` (J&W App. A).

    Before spaCy, a text loses its format characters (Unicode category Cf: zero-width space, LRM/RLM, bidi
    overrides, soft hyphen, BOM, ...), which are invisible and would make tokens nobody sees or split one word
    into several vocabulary entries, and is put in NFC, so that a composed and a decomposed "café" are one word.
    ZWNJ and ZWJ are kept, being spelling inside words (Persian and Indic scripts); spaCy splits an emoji sequence
    at its joiners, and a token of nothing but joiners is dropped."""
    tokenizer = make_tokenizer(language, segmenter)
    out = []
    for doc in tokenizer.pipe(map(clean_text, texts), batch_size=batch_size):
        toks = []
        for tok in doc:
            if tok.is_space or not tok.text.strip(JOINERS):
                continue
            text = tok.text.lower() if lowercase else tok.text
            toks.append("qqq" if _DIGIT.search(text) and not _ENTITY.fullmatch(text) else text)
        out.append(toks)
    return out


def build_vocab(train_tokens: list[list[str]], min_count: int, always: list[str] = ()) -> dict[str, int]:
    """Specials first, then train words with count ≥ ``min_count`` by descending count, ties alphabetical, then
    the words of ``always`` not yet in (answer words, J&W §3 CNN)."""
    counts = Counter(t for toks in train_tokens for t in toks)
    words = sorted(
        (w for w, c in counts.items() if c >= min_count and w not in SPECIALS), key=lambda w: (-counts[w], w)
    )
    known = {*SPECIALS, *words}
    words += [w for w in always if w not in known]
    return {w: i for i, w in enumerate([*SPECIALS, *words])}


def _stratified_split(frame: pd.DataFrame, fraction: float, seed: int, new_split: str) -> pd.DataFrame:
    """Move a seeded, label-stratified ``fraction`` of ``frame`` to ``new_split``."""
    if not 0 < fraction < 1:
        raise AttnauditError(f"split fraction must be in (0, 1), got {fraction}")
    labels = frame["label"]
    counts = labels.value_counts().sort_index()
    stratify = labels if counts.min() >= 2 else None
    moved_n, classes = int(np.ceil(fraction * len(frame))), len(counts)
    if len(frame) - moved_n < 1 or (stratify is not None and (moved_n < classes or len(frame) - moved_n < classes)):
        raise AttnauditError(
            f"too few examples to split off a {new_split} split of {fraction:.0%}: {len(frame)} examples "
            f"(per class {counts.to_dict()}) would leave {moved_n} for {new_split} and {len(frame) - moved_n} "
            f"for train, fewer than the {classes} classes; add examples, give a split column, or change "
            f"datasets.<name>.tokenise.{'test' if new_split == 'test' else 'dev'}_fraction"
        )
    # imported on first use: the DAG's user-corpus check imports this module at every Snakemake parse
    from sklearn.model_selection import train_test_split

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


def quick_slice(docs: pd.DataFrame, max_examples: int | None, seed: int) -> pd.DataFrame:
    """``tokenise.max_examples``, for quick runs (tests/config.yaml): a seeded slice of at most that many documents of
    each split the corpus gives. A corpus without splits (a user file without ``split_column``) is one pool, sliced
    before its train/dev/test split."""
    if not max_examples:
        return docs
    keep = [g.sample(n=min(len(g), max_examples), random_state=seed).index for _, g in docs.groupby("split", sort=True)]
    return docs.loc[sorted(np.concatenate(keep))]


ANSWER_SAMPLE = 1000  # passages the dry run tokenises to see that most answers are in them

LENGTH_FILTERS = {  # what each length option drops (J&W's code drops by length too)
    "max_tokens": "each document of that many tokens or more (it does not truncate)",
    "min_tokens": "each document shorter than that (sentence markers included)",
}


def tokenise_documents(
    docs: pd.DataFrame, options: dict, seed: int, where: str = "the dataset"
) -> tuple[pd.DataFrame, dict, dict]:
    """Return (examples, vocab, stats); ``where`` names the dataset in errors, and classes by the names
    ``docs.attrs["label_names"]`` holds (documents.parquet's, written by the corpus job), else by their numbers."""
    class_names = docs.attrs.get("label_names")
    options = merged_options("tokenise", DEFAULTS, options)
    missing = {"id", "split", "label", "text"} - set(docs.columns)
    if missing:
        raise AttnauditError(f"documents are missing columns {sorted(missing)}")
    dropped: Counter = Counter()
    docs = quick_slice(docs.reset_index(drop=True), options["max_examples"], seed)
    tokenize = tokenizer_of(options)
    tokens = tokenize(docs["text"].fillna("").tolist())
    docs = docs.assign(tokens=tokens, n_tokens=[len(t) for t in tokens])
    query = "query" in docs.columns  # QA/NLI (J&W §3): the question/hypothesis, tokenised the same way
    if query:
        docs = docs.assign(query_tokens=tokenize(docs["query"].fillna("").tolist()))
        empty_query = docs["query_tokens"].map(len) == 0
        dropped["empty query"] = int(empty_query.sum())
        docs = docs[~empty_query]

    empty = docs["n_tokens"] == 0
    dropped["empty"] = int(empty.sum())
    if not query:
        check_no_class_left_empty(docs["label"], empty, where, class_names)
    docs = docs[~empty]
    if "answer" in docs.columns:  # candidates are the classes whose answer word is in the passage (J&W §3: CNN)
        docs = docs.assign(answer=docs["label"].map(answer_tokens(docs, tokenize, where)))
        absent = answers_absent(docs, where)
        dropped["answer not in passage"] = int(absent.sum())
        docs = docs[~absent]
    marker_count = 2 if options["markers"] else 0
    labels_before = docs["label"].value_counts()
    length_drops = {}  # option → documents it dropped per label
    if options["max_tokens"]:
        too_long = docs["n_tokens"] >= options["max_tokens"]
        dropped[f"n_tokens >= {options['max_tokens']}"] = int(too_long.sum())
        length_drops["max_tokens"] = docs.loc[too_long, "label"].value_counts()
        docs = docs[~too_long]
    if options["min_tokens"]:
        too_short = docs["n_tokens"] + marker_count < options["min_tokens"]
        dropped[f"n_tokens incl. markers < {options['min_tokens']}"] = int(too_short.sum())
        length_drops["min_tokens"] = docs.loc[too_short, "label"].value_counts()
        docs = docs[~too_short]
    length_drops = {option: by_label for option, by_label in length_drops.items() if len(by_label)}
    filters = "".join(
        f"; tokenise.{option}: {options[option]} drops {LENGTH_FILTERS[option]}: {by_label.sum()} documents, by "
        f"label {abridged({class_name(label, class_names): int(n) for label, n in by_label.sort_index().items()})}"
        for option, by_label in length_drops.items()
    )

    removed = {reason: n for reason, n in dropped.items() if n}
    if docs.empty and removed:
        raise AttnauditError(f"{where}: tokenising drops every document ({removed}){filters}")
    lost = sorted(int(label) for label in set(labels_before.index) - set(docs["label"]))
    if length_drops and lost and not query:
        lost = [class_name(label, class_names) for label in lost]
        raise AttnauditError(
            f"{where}: the length filters drop every document of {'class(es)' if class_names else 'label(s)'} "
            f"{abridged(lost)}, which a classifier then "
            f"never learns nor is tested on{filters}; raise or remove the filter"
        )
    try:
        docs = assign_splits(docs, options, seed)
        check_splits(docs, where, not query, class_names)
    except AttnauditError as err:
        note = (
            f" (after dropping {sum(removed.values())} documents when tokenising: {removed}{filters})"
            if removed
            else ""
        )
        raise named_error(err, where, note) from err
    if options["test_sample"]:
        n_test = int((docs["split"] == "test").sum())
        docs = sampled_test(docs, options["test_sample"], seed, where, not query, class_names)
        dropped[f"test not in the {options['test_sample']:.0%} sample"] = n_test - int((docs["split"] == "test").sum())

    if "important" in docs.columns:
        docs = docs.assign(important=[_shift_important(row, marker_count) for row in docs.itertuples()])
    if options["markers"]:
        docs = docs.assign(tokens=[[BOS, *t, EOS] for t in docs["tokens"]])
        if query:
            docs = docs.assign(query_tokens=[[BOS, *t, EOS] for t in docs["query_tokens"]])

    train = docs["split"] == "train"
    vocab_tokens = docs.loc[train, "tokens"].tolist()
    if query:
        vocab_tokens += docs.loc[train, "query_tokens"].tolist()
    # J&W (CNN): answers are added to the vocabulary whatever their count, so every candidate has an id
    answers = sorted(set(docs["answer"])) if "answer" in docs.columns else []
    vocab = build_vocab(vocab_tokens, options["min_count"], always=answers)
    if not set(vocab) - {*SPECIALS, *answers}:  # every token would be <unk>: attention over nothing
        most, count = Counter(t for toks in vocab_tokens for t in toks if t not in SPECIALS).most_common(1)[0]
        raise AttnauditError(
            f"{where}: tokenise.min_count: {options['min_count']} leaves no word in the vocabulary (the train split's "
            f"most frequent word, {most!r}, occurs {count} times), so every token would be <unk>; lower it"
        )
    split_order = {"train": 0, "dev": 1, "test": 2}
    docs = docs.sort_values(by=["split", "id"], key=lambda s: s.map(split_order) if s.name == "split" else s)
    extra = [c for c in ("query_tokens", "answer", "important") if c in docs.columns]
    columns = ["id", "split", "label", "tokens", *extra]
    examples = docs[columns].reset_index(drop=True)
    stats = _stats(examples, vocab, dropped, options)
    return examples, vocab, stats


def tokenizer_of(options: dict) -> Callable[[list[str]], list[list[str]]]:
    """:func:`tokenize_texts` with the tokenise ``options`` (case, language, segmenter)."""
    return partial(
        tokenize_texts, lowercase=options["lowercase"], language=options["language"], segmenter=options["segmenter"]
    )


def answer_tokens(docs: pd.DataFrame, tokenize: Callable[[list[str]], list[list[str]]], where: str) -> dict[int, str]:
    """Each class's answer word as ``tokenize`` tokenises the passages (``{label: token}``), so that a class is a
    candidate where its token occurs (J&W's CNN entities are tokens as written). An answer of several tokens, or
    two classes whose answers tokenise alike (case under ``lowercase``, digits → qqq), could never be told apart by
    the passage's tokens: either stops, naming the answers."""
    answers = docs[["label", "answer"]].drop_duplicates().sort_values("label")
    tokens = dict(zip(answers["label"], tokenize(answers["answer"].tolist())))
    words = dict(zip(answers["label"], answers["answer"]))
    several = {words[label]: toks for label, toks in tokens.items() if len(toks) != 1}
    if several:
        raise AttnauditError(
            f"{where}: answers must be one token each, as the candidates are the passage's tokens; "
            f"{abridged(several)} are not"
        )
    classes: dict[str, list] = {}
    for label, (token,) in tokens.items():
        classes.setdefault(token, []).append(words[label])
    alike = {token: names for token, names in classes.items() if len(names) > 1}
    if alike:
        raise AttnauditError(
            f"{where}: the answers of different classes tokenise alike (lowercase, every token with a digit → qqq), "
            f"so no passage could tell them apart: {abridged(alike)}"
        )
    return {label: toks[0] for label, toks in tokens.items()}


def answers_absent(docs: pd.DataFrame, where: str) -> np.ndarray:
    """Which documents' answer token (``answer``) is not among their passage's ``tokens``: the tokeniser drops them,
    as no candidate would be the answer (J&W §3: CNN's answer entity is in its story). When that is most of them,
    stop: the passages are likely another column (the question's), or the answers another kind of text."""
    absent = np.array([answer not in tokens for answer, tokens in zip(docs["answer"], docs["tokens"])], bool)
    if len(docs) and absent.mean() > 0.5:
        examples = abridged(dict(zip(docs.loc[absent, "id"].astype(str), docs.loc[absent, "answer"])), shown=3)
        raise AttnauditError(
            f"{where}: the answer of {int(absent.sum())} of {len(docs)} documents is not a token of its passage "
            f"(document: answer, {examples}), and a document whose answer is no candidate is dropped; with "
            "candidates: passage each answer is a word of the passage (text_column) the question (query_column) "
            "asks about: does text_column name the passages?"
        )
    return absent


def _shift_important(row, marker_count: int) -> list[int]:
    """Planted positions are whitespace-word indices; check they survive tokenisation and shift past <s>."""
    if len(row.text.split()) != row.n_tokens:
        raise AttnauditError(f"document {row.id}: planted text does not tokenise one word per token")
    return [int(p) + (1 if marker_count else 0) for p in row.important]


def repeated_examples(examples: pd.DataFrame) -> dict:
    """Examples whose tokens (and query) equal another's: dev/test examples also in train, and token sequences that
    carry more than one label. Reported, not removed: the papers audit the corpora as distributed, and some repeat
    training documents in their test sets (IMDB, ADR)."""
    key = examples["tokens"].map(tuple)
    if "query_tokens" in examples.columns:
        key = key + examples["query_tokens"].map(lambda q: ("<query>", *q))
    split = examples["split"]
    train = set(key[split == "train"])
    repeated = {f"{name}_also_in_train": int(key[split == name].isin(train).sum()) for name in ("dev", "test")}
    labels_per_key = examples.groupby(key.rename("key"))["label"].nunique()
    return {**repeated, "texts_with_several_labels": int((labels_per_key > 1).sum())}


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
        "repeated": repeated_examples(examples),
        "vocab_size": len(vocab),
        "mean_tokens": float(lengths.mean()) if len(examples) else 0.0,
        **(
            {"mean_query_tokens": float(examples["query_tokens"].map(len).mean()) if len(examples) else 0.0}
            if "query_tokens" in examples.columns
            else {}
        ),
        "max_tokens": int(lengths.max()) if len(examples) else 0,
        "unk_rate": unk / n_tokens if n_tokens else 0.0,
        "options": options,
    }


def run(documents: str, out_dir: str, options: dict, seed: int) -> dict:
    docs = read_parquet(documents)
    examples, vocab, stats = tokenise_documents(docs, options, seed, f"dataset {Path(out_dir).name} ({documents})")
    out = Path(out_dir)
    write_parquet(out / "examples.parquet", examples)
    write_json(out / "vocab.json", vocab)
    write_json(out / "stats.json", stats)
    log.info(
        "tokenised %d examples (%s), vocab %d, dropped %s, repeated %s",
        stats["total"],
        stats["counts"],
        stats["vocab_size"],
        stats["dropped"],
        stats["repeated"],
    )
    return stats


def sampled_test(
    docs: pd.DataFrame, fraction: float, seed: int, where: str, every_class: bool, class_names: list | None = None
) -> pd.DataFrame:
    """``tokenise.test_sample``: a seeded ``fraction`` of the test split kept, the other splits whole; a sample
    that leaves the test split empty or, with ``every_class``, without a class stops with the counts."""
    test = docs[docs["split"] == "test"]
    keep = test.sample(frac=fraction, random_state=seed + 2).index
    docs = docs.drop(index=test.index.difference(keep))
    try:
        check_splits(docs, where, every_class, class_names)
    except AttnauditError as err:
        note = f" (tokenise.test_sample: {fraction} keeps {len(keep)} of {len(test)} test documents)"
        raise named_error(err, where, note) from err
    return docs


def named_error(err: AttnauditError, where: str, note: str = "") -> AttnauditError:
    """``err`` led by ``where`` (unless it starts with it: :func:`check_splits` names it), ``note`` appended."""
    return AttnauditError(f"{err if str(err).startswith(where) else f'{where}: {err}'}{note}")


def check_splits(
    docs: pd.DataFrame,
    where: str = "the dataset",
    every_class_everywhere: bool = False,
    class_names: list[str] | None = None,
) -> None:
    """A classifier needs two classes to learn from and every split to be non-empty: stop with the counts
    (a single-class corpus would otherwise train a "classifier" that reports macro-F1 1.0). With
    ``every_class_everywhere`` (classification: a class absent from train is never learnt, and a split without a
    class has no F1 or ROC-AUC for it — a one-class test split scores macro-F1 1.0), every class, of
    ``class_names`` if given, needs examples in train, dev and test."""
    counts = docs.groupby(["split", "label"]).size().unstack(fill_value=0)
    classes = sorted(int(c) for c in counts.columns)
    named = partial(class_name, class_names=class_names)

    per_split = {split: {int(k): int(v) for k, v in row.items() if v} for split, row in counts.iterrows()}
    counts_named = (
        "{"
        + ", ".join(f"{split!r}: {abridged({named(k): v for k, v in row.items()})}" for split, row in per_split.items())
        + "}"
    )
    if len(classes) < 2:
        raise AttnauditError(
            f"{where} has a single class (label {named(classes[0]) if classes else None!r}, {len(docs)} examples): "
            "a classifier needs at least two; check the label column"
        )
    missing = [split for split in ("train", "dev", "test") if split not in per_split]
    if missing:
        raise AttnauditError(
            f"{where} has no {'/'.join(missing)} examples (examples per split and class: {counts_named})"
        )
    if len(per_split["train"]) < 2:
        raise AttnauditError(
            f"{where}: the train split has one class only (examples per split and class: {counts_named})"
        )
    if every_class_everywhere:
        expected = range(len(class_names)) if class_names else classes
        lacking = {
            split: [named(c) for c in expected if not per_split[split].get(c)] for split in ("train", "dev", "test")
        }
        if any(lacking.values()):
            rare = sum(count < 3 for count in docs["label"].value_counts())  # one per split
            suspicion = (
                f"{rare} of the {len(classes)} classes have fewer than three examples among {len(docs)} documents: "
                "does the label column hold class labels? "
                if rare > max(len(classes) // 2, 5)
                else ""
            )
            raise AttnauditError(
                f"{where}: {suspicion}every class needs examples in train, dev and test ("
                + "; ".join(
                    f"{split} has none of class(es) {abridged(labels)}" for split, labels in lacking.items() if labels
                )
                + f"; examples per split and class: {counts_named}): a class missing from train is never learnt, a "
                "split without a class has no F1 or ROC-AUC for it; add examples, fix the split column or drop "
                "the class"
            )


def class_name(label, class_names: list | None):
    """Label ``label``'s class name in ``class_names``, else the label itself."""
    label = int(label)
    return class_names[label] if class_names and 0 <= label < len(class_names) else label


def abridged(items: list | dict, shown: int = 10, width: int = 40) -> str:
    """``items`` as Python writes them, the first ``shown`` only and then how many more, and a text longer than
    ``width`` characters cut there: a message about a column of free text read as labels stays readable."""

    def cut(item):
        return f"{item[: width - 1]}…" if isinstance(item, str) and len(item) > width else item

    more = f", … and {len(items) - shown} more" if len(items) > shown else ""
    if isinstance(items, dict):
        head = ", ".join(f"{cut(key)!r}: {value!r}" for key, value in list(items.items())[:shown])
        return f"{{{head}{more}}}"
    return f"[{', '.join(repr(cut(item)) for item in items[:shown])}{more}]"


def seeded_sample(rows: pd.Series | pd.DataFrame, sample: int, seed: int) -> pd.Series | pd.DataFrame:
    """``sample`` rows drawn with ``seed``, or all rows as they are when there are no more: what the planning-time
    checks of a large corpus read (they run at every dry run)."""
    return rows.sample(n=sample, random_state=seed) if len(rows) > sample else rows


def unspaced_script_shares(texts: pd.Series, seed: int, sample: int = 2000) -> dict[str, float]:
    """The share of the letters of a seeded sample of ``sample`` texts in each script of :data:`UNSPACED_SCRIPTS`
    (scripts with no letters left out)."""
    texts = seeded_sample(texts, sample, seed)
    letters = "".join(filter(str.isalpha, "".join(texts.map(str))))
    shares = {}
    for script in UNSPACED_SCRIPTS:
        count = len(re.findall(script_pattern(script), letters))
        if count:
            shares[script] = count / len(letters)
    return shares


def check_spaced_script(texts: pd.Series, where: str, key: tuple, seed: int) -> None:
    """Stop if most letters of ``texts`` (of ``where``) are of scripts written without spaces between words (Chinese,
    Japanese, Thai, ...) and ``key`` (a dataset's ``tokenise.language``) is left to en: the English tokenizer splits at
    spaces and punctuation only, so a clause would be one token and the audits would rank clauses, not words."""
    shares = unspaced_script_shares(texts, seed)
    if sum(shares.values()) >= 0.5:
        found = ", ".join(f"{share:.0%} {script}" for script, share in sorted(shares.items(), key=lambda kv: -kv[1]))
        raise ConfigKeyError(
            key,
            f"en (the default), whose tokenizer splits at spaces and punctuation only; but the text of {where} is "
            f"{found} letters, a script written without spaces between words, so a clause would be one token. Set "
            "it to the corpus's language as spaCy names it (zh: a token per character, or per word with "
            "tokenise.segmenter: jieba; ja, th: spaCy's tokenizers of them need SudachiPy or PyThaiNLP installed), "
            "or xx to split at spaces and punctuation anyway",
        )


def check_no_class_left_empty(labels: pd.Series, empty: pd.Series, where: str, class_names, hint: str = "") -> None:
    """Stop when every document of a class is empty (dropped when tokenising): the class would vanish, and the
    corpus then look like one with a class too few, which would be blamed on the label column."""
    emptied = sorted(set(labels) - set(labels[~empty]))
    if emptied and not empty.all():  # all of them: said where the caller drops every document
        counts = labels[labels.isin(emptied)].value_counts()
        named = {class_name(label, class_names): int(counts[label]) for label in emptied}
        raise AttnauditError(
            f"{where}: every document of {'class' if len(named) == 1 else 'classes'} {abridged(named)} (documents "
            "per class) is empty (no text, or nothing but spaces or invisible characters), and empty documents are "
            f"dropped when tokenising, so the class would vanish{hint}"
        )


def warn_if_query_longer(documents: pd.DataFrame, entry: dict, where: str, seed: int, sample: int = 2000) -> None:
    """J&W §3: attention weighs the passage or premise (``text_column``), the question or hypothesis
    (``query_column``) conditioning it; in SNLI and MultiNLI, bAbI and CNN the query is the shorter of the two. Most
    queries longer than their passage (in a seeded sample of ``sample`` rows) suggest the columns are swapped: said
    on stderr (a corpus may mean it)."""
    documents = seeded_sample(documents, sample, seed)
    words = [documents[column].map(lambda text: len(str(text).split())) for column in ("text", "query")]
    longer = float((words[1] > words[0]).mean()) if len(documents) else 0.0
    if longer > 0.5:
        print(
            f"attnaudit: warning: {where}: the query (query_column {entry['query_column']!r}) is longer than its "
            f"passage (text_column {entry['text_column']!r}) in {longer:.0%} of the rows; attention weighs the "
            "text_column (the passage or premise), conditioned on the query_column (the question or hypothesis): "
            "are the two swapped?",
            file=sys.stderr,
        )


def check_user_dataset(dataset: str, corpus: str, entry: dict, options: dict, seed: int) -> None:
    """Before any job runs: the user corpus ``corpus`` (``corpora.user.<corpus>``) can be read and split into
    train/dev/test with every class of the corpus in each split (of a QA/NLI corpus, two classes and every split
    non-empty), as :func:`tokenise_documents` will split it once ``max_examples`` has sliced it and empty
    documents are dropped (its length filters and the drop of answers not in their passage aside: they need every
    passage tokenised) and ``test_sample`` has sampled its test split, and that answer words are one token each,
    most of them in their passages (of a seeded sample of ``ANSWER_SAMPLE`` passages)."""
    from attnaudit.corpora.readers import read_user

    documents, info = read_user(corpus, entry)
    where = f"datasets.{dataset} (corpora.user.{corpus}: {entry['path']})"
    if entry.get("split_column") and not (documents["split"] == "test").any():  # no test rows to carve it from
        given = {split: int(n) for split, n in documents["split"].value_counts().sort_index().items()}
        raise AttnauditError(
            f"{where}: split_column {entry['split_column']!r} marks no row as test (rows per split: {given}); mark "
            "the test rows (dev, if absent, is carved from train by dev_fraction), or leave out split_column for "
            "seeded random train/dev/test splits"
        )
    options = {**DEFAULTS, **options}
    documents = quick_slice(documents.reset_index(drop=True), options["max_examples"], seed)
    query = "query" in documents.columns
    blank = pd.Series(False, index=documents.index)
    for column, option in (("text", "text_column"), ("query", "query_column")) if query else (("text", "text_column"),):
        empty = documents[column].map(lambda text: not clean_text(text).translate(_NO_JOINERS).strip())
        if len(documents) and empty.all():
            raise AttnauditError(
                f"{where}: every row's {option} {entry[option]!r} is empty (nothing but spaces or invisible "
                "characters), so tokenising would drop every document; does it name the right column?"
            )
        blank |= empty
    if not query:
        hint = f"; does text_column {entry['text_column']!r} name the right column, or did the file lose those texts?"
        check_no_class_left_empty(documents["label"], blank, where, info["label_names"], hint)
    documents = documents[~blank]  # the tokeniser drops documents (and queries) without tokens
    if query:
        warn_if_query_longer(documents, entry, where, seed)
    if options["language"] == "en":
        check_spaced_script(documents["text"], where, ("datasets", dataset, "tokenise", "language"), seed)
    tokenize = tokenizer_of(options)
    if "answer" in documents.columns:  # candidates: passage; each answer one token, most of them in their passage
        answers = documents["label"].map(answer_tokens(documents, tokenize, where))
        sample = documents.sample(n=min(len(documents), ANSWER_SAMPLE), random_state=seed)
        answers_absent(sample.assign(answer=answers, tokens=tokenize(sample["text"].tolist())), where)
    try:
        split = assign_splits(documents, options, seed)
        check_splits(split, where, not query, info["label_names"])
    except AttnauditError as err:
        sliced = options["max_examples"] and f" (of the {len(documents)} documents tokenise.max_examples keeps)"
        raise named_error(err, where, sliced or "") from err
    if options["test_sample"]:  # as the job samples it unless a length filter drops test documents first
        try:
            sampled_test(split, options["test_sample"], seed, where, not query, info["label_names"])
        except AttnauditError as err:
            raise ConfigKeyError(("datasets", dataset, "tokenise", "test_sample"), str(err)) from err
