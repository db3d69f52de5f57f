"""Embeddings stage: 300-d word vectors aligned to the vocabulary (J&W Appendix A).

J&W initialised words from pretrained FastText/GloVe vectors; those can't be downloaded here, so by default
we train gensim Word2Vec (or FastText) on the dataset's own train split — deterministic: seeded, one worker.
A user-supplied vectors file (word2vec text or binary, GloVe; :mod:`.pretrained`) can be given instead. Either
way, vocabulary words the vectors lack are drawn from N(0, 1) with a seed (J&W App. A) and ``<pad>`` is zero;
coverage is reported.
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

import numpy as np

from attnaudit import AttnauditError
from attnaudit.embeddings.pretrained import load_pretrained
from attnaudit.io import atomic_path, merged_options, write_json
from attnaudit.specials import PAD, SPECIALS

log = logging.getLogger(__name__)

DEFAULTS = {
    "method": "word2vec",
    "dim": 300,
    "window": 5,
    "min_count": 1,
    "epochs": 30,
    "sg": 1,
    "pretrained": None,
    "binary": None,  # None: read from the file
    "pretrained_sha256": None,  # set by the workflow: the vectors file's hash when it planned the job
}


def train_vectors(sentences: list[list[str]], options: dict, seed: int):
    """Train gensim Word2Vec/FastText with one worker and a fixed seed (bit-reproducible on CPU)."""
    from gensim.models import FastText, Word2Vec

    cls = {"word2vec": Word2Vec, "fasttext": FastText}.get(options["method"])
    if cls is None:
        raise AttnauditError(f"embeddings.method must be 'word2vec' or 'fasttext', got {options['method']!r}")
    model = cls(
        vector_size=options["dim"],
        window=options["window"],
        min_count=options["min_count"],
        sg=options["sg"],
        epochs=options["epochs"],
        seed=seed,
        workers=1,
    )
    model.build_vocab(corpus_iterable=sentences)  # then train, with the arguments cls(sentences=…) passes
    if not set(model.wv.key_to_index) - set(SPECIALS):  # gensim: "you must first build vocabulary …"
        word, count = Counter(t for sentence in sentences for t in sentence if t not in SPECIALS).most_common(1)[0]
        raise AttnauditError(
            f"embeddings.min_count: {options['min_count']} leaves {options['method']} no word to train (the train "
            f"split's most frequent word, {word!r}, occurs {count} times); lower it"
        )
    model.train(
        corpus_iterable=sentences,
        total_examples=model.corpus_count,
        total_words=model.corpus_total_words,
        epochs=model.epochs,
        start_alpha=model.alpha,
        end_alpha=model.min_alpha,
        compute_loss=model.compute_loss,
    )
    return model.wv


def aligned_matrix(vectors, vocab: dict[str, int], dim: int, seed: int) -> tuple[np.ndarray, dict]:
    """Rows in vocabulary order; missing words ~ N(0, 1) (seeded); ``<pad>`` = 0."""
    if vectors.vector_size != dim:
        raise AttnauditError(f"embeddings.dim is {dim} but the vectors have dimension {vectors.vector_size}")
    rng = np.random.default_rng(seed)
    matrix = rng.standard_normal((len(vocab), dim)).astype(np.float32)
    found = 0
    for word, index in vocab.items():
        if word in vectors.key_to_index:
            matrix[index] = vectors[word]
            found += 1
    matrix[vocab[PAD]] = 0.0
    coverage = {"vocab_size": len(vocab), "found": found, "coverage": found / len(vocab)}
    return matrix, coverage


def run(dataset_dir: str, out_dir: str, options: dict, seed: int) -> dict:
    from attnaudit.data import load_examples  # torch: not imported by the workflow's parse-time checks

    options = merged_options("embeddings", DEFAULTS, options)
    examples, vocab = load_examples(dataset_dir)
    if options["pretrained"]:
        vectors, layout = load_pretrained(
            options["pretrained"], vocab, options["dim"], options["binary"], options["pretrained_sha256"]
        )
        source = {"format": str(layout)}
        if layout.fasttext_model:  # words the model lacks, given the mean of their character n-grams' vectors
            source["from_subwords"] = int(vectors.expandos.get("from_subwords", np.zeros(0, bool)).sum())
    else:
        vectors = train_vectors(examples.loc[examples["split"] == "train", "tokens"].map(list).tolist(), options, seed)
        source = {"format": f"trained {options['method']}"}
    matrix, coverage = aligned_matrix(vectors, vocab, options["dim"], seed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with atomic_path(out / "vectors.kv") as tmp:
        vectors.save(str(tmp), separately=[])  # one file, so the rename is atomic
    with atomic_path(out / "matrix.npy") as tmp, open(tmp, "wb") as handle:
        np.save(handle, matrix)
    write_json(out / "coverage.json", {**coverage, **source, "options": options, "seed": seed})
    log.info(
        "embeddings: %d/%d vocabulary words covered (%.1f%%)",
        coverage["found"],
        coverage["vocab_size"],
        100 * coverage["coverage"],
    )
    return coverage
