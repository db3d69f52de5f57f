"""Failures a user can cause end in one clear message that names the file, line or config key and the fix, before
any expensive job where the config can know it, and leave nothing half-written; an interrupted run resumes."""

from __future__ import annotations

import collections
import csv
import gzip
import hashlib
import json
import os
import re
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from conftest import SNAKEMAKE, snakemake
from opened_files import skip_without_strace, strace_prefix
from system_packages import unavailable
from test_config import dry_run, shell_commands
from test_embeddings import fasttext_model

from attnaudit import AttnauditError
from attnaudit.cli import Terminated, stopping_on_sigterm
from attnaudit.data import load_examples
from attnaudit.io import FILE_MODE, atomic_path, load_npy, write_json, write_parquet
from attnaudit.models import load_model, save_model
from attnaudit.process_usage import read_usage

WORDS = ["good", "bad", "fine", "awful", "great", "poor", "nice", "dull"]


def write_corpus(path: Path, labels: list[str], extra: list[dict] | None = None) -> Path:
    """A user CSV: one row per label, texts of a few words drawn with a fixed seed."""
    rng = np.random.default_rng(0)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["text", "label"])
        writer.writeheader()
        for label in labels:
            writer.writerow({"text": " ".join(rng.choice(WORDS, size=6)), "label": label})
        for row in extra or []:
            writer.writerow(row)
    return path


def user_config(path: Path, **entry) -> dict:
    return {
        "corpora": {"user": {"mine": {"path": str(path), "text_column": "text", "label_column": "label", **entry}}},
        "datasets": {
            "mine": {
                "corpus": "mine",
                "embeddings": {"dim": 20, "epochs": 2},
                "grid": {"encoders": ["average"], "attentions": ["additive"]},
            }
        },
    }


def said(proc: subprocess.CompletedProcess) -> str:
    """What a failed dry run told the user (Snakemake prints a workflow error on stdout)."""
    assert proc.returncode != 0, proc.stdout[-2000:]
    return proc.stdout + proc.stderr


# -- a user's own corpus, checked before any job runs ------------------------------------------------------------
@pytest.mark.parametrize(
    "labels,expected",
    [
        (["pos"] * 40, "has a single class"),
        (["pos", "neg"] * 2, "too few examples to split off a test split"),
        (["pos", "neg", "pos"], "the train split has one class only"),
    ],
)
def test_user_corpus_without_two_learnable_classes_stops_the_dry_run(tmp_path, labels, expected):
    output = said(dry_run(tmp_path, user_config(write_corpus(tmp_path / "mine.csv", labels))))
    assert expected in output and "corpora.user.mine" in output, output[-3000:]


def test_user_corpus_file_and_format_named(tmp_path):
    output = said(dry_run(tmp_path, user_config(tmp_path / "missing.csv")))
    assert "corpora.user.mine.path" in output and "missing.csv" in output, output[-3000:]
    odd = write_corpus(tmp_path / "mine.data", ["pos", "neg"] * 20)
    output = said(dry_run(tmp_path, user_config(odd)))
    assert "corpora.user.mine.format" in output, output[-3000:]
    assert dry_run(tmp_path, user_config(odd, format="csv")).returncode == 0  # format may be given explicitly


@pytest.mark.parametrize(
    "entry,expected",
    [
        ({"label_column": "text"}, "label_column: 'text', the column text_column names too"),
        ({"split_column": "label"}, "split_column: 'label', the column label_column names too"),
        ({"id_column": "text"}, "id_column: 'text', the column text_column names too"),
    ],
)
def test_two_options_naming_one_column_stop_the_dry_run(tmp_path, entry, expected):
    """A text read as its label would train one class per document: the entry's own key is named, at its line, not
    the dataset's ``corpus`` (which names a corpus that exists)."""
    output = said(dry_run(tmp_path, user_config(write_corpus(tmp_path / "mine.csv", ["pos", "neg"] * 20), **entry)))
    written = (tmp_path / "config.yaml").read_text().splitlines()
    line = written.index(f"      {next(iter(entry))}: {next(iter(entry.values()))}") + 1
    said_key = f"{tmp_path / 'config.yaml'}:{line}: config corpora.user.mine.{expected}"
    assert said_key in output and "datasets.mine.corpus" not in output, output[-3000:]


def test_a_label_column_of_free_text_says_so_in_a_message_of_bounded_length(tmp_path):
    """Read as labels, a column of ids or texts makes hundreds of one-example classes: the dry run says that first
    and lists ten of each list, not every class."""
    corpus = write_corpus(tmp_path / "mine.csv", [f"review {i}" for i in range(400)])
    output = said(dry_run(tmp_path, user_config(corpus)))
    message = next(line for line in output.splitlines() if "every class needs examples" in line)
    assert "corpora.user.mine" in message and "400 of the 400 classes have fewer than three examples" in message
    assert "does the label column hold class labels?" in message and "… and" in message
    assert len(message) < 2000, message


def test_a_user_corpus_in_chinese_needs_its_language_named(tmp_path):
    """Read by the English tokenizer, a Chinese review is a token per clause: the dry run stops, naming the key and
    the script. ``language: zh`` plans it (characters, or jieba's words), and ``xx`` (spaCy's multi-language
    tokenizer) keeps spaces and punctuation as the split; a language spaCy has no tokenizer of, or a segmenter of
    another language than Chinese, stops, naming the key."""
    rng = np.random.default_rng(0)
    words = ["很好", "不错", "失望", "难看", "推荐", "质量", "一般", "喜欢"]
    corpus = tmp_path / "mine.csv"
    pd.DataFrame(
        {"text": ["".join(rng.choice(words, size=6)) + "。" for _ in range(40)], "label": ["pos", "neg"] * 20}
    ).to_csv(corpus, index=False)
    cfg = user_config(corpus)
    output = said(dry_run(tmp_path, cfg))
    written = (tmp_path / "config.yaml").read_text().splitlines()  # language left out: named at the dataset's entry
    entry_line = written.index("  mine:", written.index("datasets:")) + 1
    said_language = f"{tmp_path / 'config.yaml'}:{entry_line}: config datasets.mine.tokenise.language: en (the default)"
    assert said_language in output and "is 100% Han letters" in output, output[-3000:]
    for tokenise in ({"language": "zh"}, {"language": "zh", "segmenter": "jieba"}, {"language": "xx"}):
        cfg["datasets"]["mine"]["tokenise"] = tokenise
        assert dry_run(tmp_path, cfg).returncode == 0, tokenise
    cfg["datasets"]["mine"]["tokenise"] = {"language": "qq"}
    output = said(dry_run(tmp_path, cfg))
    assert "datasets.mine.tokenise.language: spaCy has no tokenizer of 'qq'" in output, output[-3000:]
    cfg["datasets"]["mine"]["tokenise"] = {"language": "de", "segmenter": "jieba"}
    output = said(dry_run(tmp_path, cfg))
    assert "datasets.mine.tokenise.segmenter: 'jieba' — a segmenter is chosen for Chinese only" in output, output[
        -3000:
    ]


def test_a_user_nli_corpus_plans_jws_qa_models_and_no_stage_that_needs_a_classifier(tmp_path):
    """With ``query_column`` a user corpus is QA/NLI (J&W §3): its models are J&W's QA model (the train job reads
    the QA decoder's width, which a classifier's does not), and listing it for W&P, whose adversaries imitate a
    classifier, stops the dry run naming the key. Premise and hypothesis swapped, the dry run says so."""
    rng = np.random.default_rng(0)
    path = tmp_path / "nli.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["premise", "hypothesis", "gold"])
        for label in ["entailment", "neutral", "contradiction"] * 20:
            writer.writerow([" ".join(rng.choice(WORDS, size=6)), " ".join(rng.choice(WORDS, size=3)), label])
    cfg = user_config(path, text_column="premise", query_column="hypothesis", label_column="gold")
    cfg["datasets"]["mine"]["train"] = {"decoder_hidden": 17}
    planned = " ".join(shell_commands(tmp_path, cfg, "train") + shell_commands(tmp_path, cfg, "jain-wallace tables"))
    assert '"decoder_hidden": 17' in planned and '"qa": true' in planned  # a QA/NLI corpus: J&W's QA tables
    swapped = "the query (query_column 'premise') is longer than its passage (text_column 'hypothesis') in 100% of"
    assert swapped not in (proc := dry_run(tmp_path, cfg)).stderr and proc.returncode == 0, proc.stderr[-3000:]
    entry = cfg["corpora"]["user"]["mine"]
    entry["text_column"], entry["query_column"] = "hypothesis", "premise"
    assert swapped in (proc := dry_run(tmp_path, cfg)).stderr and proc.returncode == 0, proc.stderr[-3000:]
    entry["text_column"], entry["query_column"] = "premise", "hypothesis"
    del cfg["corpora"]["user"]["mine"]["query_column"]
    planned = " ".join(shell_commands(tmp_path, cfg, "train") + shell_commands(tmp_path, cfg, "jain-wallace tables"))
    assert "jain-wallace tables" in planned and '"decoder_hidden"' not in planned and '"qa"' not in planned
    cfg["corpora"]["user"]["mine"]["query_column"] = "hypothesis"
    cfg["wiegreffe_pinter"] = {"datasets": ["mine"]}
    assert "config wiegreffe_pinter.datasets: ['mine'] are QA/NLI datasets" in said(dry_run(tmp_path, cfg))


def test_a_user_qa_corpus_whose_answers_no_passage_could_hold_stops_the_dry_run(tmp_path):
    """``candidates: passage`` reads each class as an answer word of the passage (J&W §3, CNN): without a query it
    is no QA corpus, an answer of two tokens is no passage token, and answers mostly not in their passages (the
    question read as the passage) would be dropped; each stops the dry run, naming the key or the answers."""
    path = tmp_path / "qa.csv"
    rows = [("we walked to the new york office", "where did we walk", "new york")]
    rows += [(f"we walked to the {place}", "where did we walk", place) for place in ("park", "office")]
    pd.DataFrame(rows * 10, columns=["story", "question", "answer"]).to_csv(path, index=False)
    cfg = user_config(path, text_column="story", label_column="answer", candidates="passage")
    assert "corpora.user.mine.candidates: passage masks a QA model's answers" in said(dry_run(tmp_path, cfg))
    cfg["corpora"]["user"]["mine"]["query_column"] = "question"
    expected = "answers must be one token each, as the candidates are the passage's tokens; {'new york': ['new', "
    assert expected in said(dry_run(tmp_path, cfg))
    # one-token answers, but the passage and question columns swapped: no answer is in its "passage"
    rows = [(f"we walked to the {place} and back", "where did we walk", place) for place in ("park", "office")]
    pd.DataFrame(rows * 20, columns=["question", "story", "answer"]).to_csv(path, index=False)
    expected = "the answer of 40 of 40 documents is not a token of its passage (document: answer, {'mine-"
    assert expected in (output := said(dry_run(tmp_path, cfg))) and "does text_column name the passages" in output


def test_a_user_tsv_gives_the_documents_of_the_same_rows_as_csv(tmp_path):
    """The same rows as TSV (format from the .tsv suffix) and as CSV give the same documents; read as CSV,
    the TSV stops the dry run naming the format that reads it."""
    rows = list(csv.reader(write_corpus(tmp_path / "mine.csv", ["pos", "neg"] * 20).open(newline="")))
    tsv = tmp_path / "mine.tsv"
    tsv.write_text("".join("\t".join(row) + "\n" for row in rows))
    output = said(dry_run(tmp_path, user_config(tsv, format="csv")))
    assert "corpora.user.mine.text_column" in output and "set format: tsv" in output, output[-3000:]
    target = "results/corpora/mine/documents.parquet"
    documents = {}
    for corpus in (tmp_path / "mine.csv", tsv):
        config = tmp_path / f"{corpus.suffix[1:]}.yaml"
        config.write_text(yaml.safe_dump(user_config(corpus)))
        snakemake(tmp_path, "--cores", "1", target, config=config)
        documents[corpus.suffix] = pd.read_parquet(tmp_path / target)
    assert len(documents[".csv"]) == 40
    pd.testing.assert_frame_equal(documents[".csv"], documents[".tsv"])


def test_user_corpus_name_with_a_hyphen_is_rejected_by_the_schema(tmp_path):
    cfg = user_config(write_corpus(tmp_path / "mine.csv", ["pos", "neg"] * 20))
    cfg["corpora"]["user"] = {"my-corpus": cfg["corpora"]["user"]["mine"]}
    cfg["datasets"]["mine"]["corpus"] = "my-corpus"
    output = said(dry_run(tmp_path, cfg))
    assert "'my-corpus' does not match" in output, output[-3000:]


def split_corpus(path: Path, per_split: dict[str, list[str]], blank: str | None = None) -> Path:
    """A user CSV with a split column: ``per_split`` lists each split's labels; texts of the ``blank`` split are
    whitespace only (the tokeniser drops them)."""
    rng = np.random.default_rng(0)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["text", "label", "split"])
        writer.writeheader()
        for split, labels in per_split.items():
            for label in labels:
                text = "  " if split == blank else " ".join(rng.choice(WORDS, size=6))
                writer.writerow({"text": text, "label": label, "split": split})
    return path


BALANCED = {"train": ["pos", "neg"] * 20, "dev": ["pos", "neg"] * 5, "test": ["pos", "neg"] * 5}


@pytest.mark.parametrize(
    "per_split,entry,blank,expected",
    [
        ({**BALANCED, "test": ["neg"] * 10}, {}, None, "test has none of class(es) ['pos']"),
        ({**BALANCED, "test": ["pos", "neg", "odd"] * 4}, {}, None, "train has none of class(es) ['odd']"),
        (BALANCED, {"label_names": ["neg", "pos", "neutral"]}, None, "none of class(es) ['neutral']"),
        (BALANCED, {}, "test", "has no test examples"),
        ({"train": BALANCED["train"]}, {}, None, "marks no row as test (rows per split: {'train': 40})"),
    ],
    ids=[
        "one-class test split",
        "class only in test",
        "a listed class without examples",
        "blank test texts",
        "train rows only",
    ],
)
def test_user_corpus_needs_every_class_in_every_split(tmp_path, per_split, entry, blank, expected):
    """A one-class test split would score macro-F1 1.0 and a class never trained on is never predicted: the dry
    run stops, naming the split and the class (documents the tokeniser drops as empty are not counted)."""
    corpus = split_corpus(tmp_path / "mine.csv", per_split, blank)
    output = said(dry_run(tmp_path, user_config(corpus, split_column="split", **entry)))
    assert expected in output and "corpora.user.mine" in output, output[-3000:]


def test_a_user_corpus_sliced_by_max_examples_is_checked_as_sliced(tmp_path):
    """``tokenise.max_examples`` slices a corpus without splits as one pool before splitting it: the dry run checks
    the slice the tokeniser will split, and says the slice is why."""
    cfg = user_config(write_corpus(tmp_path / "mine.csv", ["pos", "neg"] * 30))
    cfg["datasets"]["mine"]["tokenise"] = {"max_examples": 4}
    output = said(dry_run(tmp_path, cfg))
    assert "too few examples" in output and "(of the 4 documents tokenise.max_examples keeps)" in output, output
    cfg["datasets"]["mine"]["tokenise"] = {"max_examples": 40}
    assert dry_run(tmp_path, cfg).returncode == 0


def test_user_corpus_path_under_home_and_an_unused_entry(tmp_path, monkeypatch):
    """``~`` in a path is the user's home; a corpus entry no dataset uses is not read (its file may be gone)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    write_corpus(tmp_path / "mine.csv", ["pos", "neg"] * 20)
    cfg = user_config(Path("~/mine.csv"))
    cfg["corpora"]["user"]["old"] = {"path": str(tmp_path / "deleted.csv"), "text_column": "t", "label_column": "l"}
    proc = dry_run(tmp_path, cfg)
    assert proc.returncode == 0 and "rule corpora:" in proc.stdout, (proc.stdout + proc.stderr)[-3000:]


def test_editing_a_user_csv_reruns_what_depends_on_it(tmp_path):
    """The CSV is an input of the corpus job and its sha256 a parameter: a new row reruns the corpus and every job
    after it, even when the edit keeps the file's modification time; the other corpora are untouched."""
    corpus = write_corpus(tmp_path / "mine.csv", ["pos", "neg"] * 30)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(user_config(corpus)))
    target = "results/datasets/mine/examples.parquet"
    snakemake(tmp_path, "--cores", "1", target, config=config)
    assert "Nothing to be done" in snakemake(tmp_path, "-n", target, config=config).stdout
    before = os.stat(corpus)
    write_corpus(corpus, ["pos", "neg"] * 30, extra=[{"text": "a new review", "label": "pos"}])
    os.utime(corpus, ns=(before.st_atime_ns, before.st_mtime_ns))  # same modification time as before
    planned = snakemake(tmp_path, "-n", target, config=config).stdout
    assert "rule corpora:" in planned and "rule tokenise:" in planned, planned[-3000:]
    assert "Params have changed" in planned or "params" in planned.lower()
    snakemake(tmp_path, "--cores", "1", target, config=config)
    manifest = json.loads((tmp_path / "results/corpora/mine/manifest.json").read_text())
    assert manifest["files"][0]["sha256"] == __import__("hashlib").sha256(corpus.read_bytes()).hexdigest()


def test_a_test_sample_that_leaves_a_class_out_stops_the_dry_run(tmp_path):
    """Of a user corpus the dry run knows the test split, so a ``test_sample`` that would keep one class of it stops
    there, at the option's line, with the class names, before any job."""
    corpus = write_corpus(tmp_path / "mine.csv", ["pos", "neg"] * 30)  # a 20 % test split: 12 documents
    cfg = user_config(corpus)
    cfg["datasets"]["mine"]["tokenise"] = {"test_sample": 0.05}
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(cfg))
    stopped = said(snakemake(tmp_path, "-n", config=config, check=False))
    assert f"{config}:" in stopped and "config datasets.mine.tokenise.test_sample: datasets.mine (" in stopped, stopped
    assert "every class needs examples in train, dev and test (test has none of class(es) ['" in stopped, stopped
    assert "(tokenise.test_sample: 0.05 keeps 1 of 12 test documents)" in stopped, stopped


def test_a_gzip_compressed_user_csv_is_checked_and_read_as_the_csv_it_holds(tmp_path):
    """``mine.csv.gz`` needs no ``format`` and no gunzip: the dry run's checks read the CSV inside it (one class
    stops the run with the counts), and the corpus job gives the documents of the uncompressed file. What decides a
    rerun is what the file holds: the same CSV compressed again (gzip's header holds a time) reruns nothing, an
    edited one the corpus job."""
    for directory in ("plain", "packed", "one"):
        (tmp_path / directory).mkdir()
    plain = write_corpus(tmp_path / "plain" / "mine.csv", ["pos", "neg"] * 30)
    one_class = tmp_path / "one" / "mine.csv.gz"
    one_class.write_bytes(gzip.compress(write_corpus(tmp_path / "one.csv", ["pos"] * 60).read_bytes()))
    config = tmp_path / "one" / "config.yaml"
    config.write_text(yaml.safe_dump(user_config(one_class)))
    stopped = said(snakemake(tmp_path / "one", "-n", config=config, check=False))
    assert "corpora.user.mine: mine.csv.gz) has a single class (label 'pos', 60 examples)" in stopped, stopped
    packed = tmp_path / "packed" / "mine.csv.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    target = "results/corpora/mine/documents.parquet"
    for path in (plain, packed):
        (path.parent / "config.yaml").write_text(yaml.safe_dump(user_config(path)))
        snakemake(path.parent, "--cores", "1", target, config=path.parent / "config.yaml")
    documents = [pd.read_parquet(path.parent / target) for path in (plain, packed)]
    assert len(documents[0]) == 60
    pd.testing.assert_frame_equal(*documents)
    manifests = [
        json.loads((path.parent / "results/corpora/mine/manifest.json").read_text()) for path in (plain, packed)
    ]
    assert manifests[1]["files"][0]["content_sha256"] == manifests[0]["files"][0]["sha256"]
    assert manifests[1]["files"][0]["sha256"] == hashlib.sha256(packed.read_bytes()).hexdigest()

    config = packed.parent / "config.yaml"
    packed.write_bytes(gzip.compress(plain.read_bytes(), mtime=1))  # other bytes, the same CSV
    assert "Nothing to be done" in snakemake(packed.parent, "-n", target, config=config).stdout
    write_corpus(plain, ["pos", "neg"] * 30, extra=[{"text": "a new review", "label": "pos"}])
    packed.write_bytes(gzip.compress(plain.read_bytes(), mtime=1))
    assert "rule corpora:" in snakemake(packed.parent, "-n", target, config=config).stdout


def test_a_large_corpus_copied_back_or_its_entry_written_out_reruns_nothing(tmp_path):
    """Snakemake records a checksum only of files under 1 MB and goes by the modification time above that: the
    corpus file is an ``ancient`` input whose sha256 is the parameter, so touching a 1.3 MB corpus or copying it
    back reruns nothing, and neither does its entry written out with its defaults and another spelling of its path.
    A changed label does rerun it."""
    labels = ["pos", "neg"] * 18_000
    corpus = write_corpus(tmp_path / "mine.csv", labels)
    assert corpus.stat().st_size > 1.2 * 2**20  # above Snakemake's --max-checksum-file-size (1 MB)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(user_config(corpus)))  # an absolute path inside the working directory
    target = "results/corpora/mine/documents.parquet"
    snakemake(tmp_path, "--cores", "1", target, config=config)
    time.sleep(0.01)
    corpus.touch()
    assert "Nothing to be done" in snakemake(tmp_path, "-n", target, config=config).stdout
    copy = tmp_path / "elsewhere" / "mine.csv"
    copy.parent.mkdir()
    copy.write_bytes(corpus.read_bytes())
    corpus.write_bytes(copy.read_bytes())  # the same bytes, a new modification time
    assert "Nothing to be done" in snakemake(tmp_path, "-n", target, config=config).stdout
    restated = user_config(Path("./mine.csv"), format="csv", split_column=None, id_column=None, encoding="UTF-8")
    restated["corpora"]["user"]["mine"] |= {"query_column": None, "candidates": "all"}
    config.write_text(yaml.safe_dump(restated))
    out = snakemake(tmp_path, "-n", target, config=config).stdout
    assert "Nothing to be done" in out, out[-3000:]
    write_corpus(corpus, ["neg", "pos", *labels[2:]])  # the same size, one label changed
    assert "rule corpora:" in snakemake(tmp_path, "-n", target, config=config).stdout


def write_vectors(path: Path, dim: int, scale: float = 1.0) -> Path:
    """GloVe vectors (no header line), gzip-compressed, for the words of :func:`write_corpus`."""
    rows = [f"{word} " + " ".join(f"{scale * (i + j) / 10:.3f}" for j in range(dim)) for i, word in enumerate(WORDS)]
    path.write_bytes(gzip.compress(("\n".join(rows) + "\n").encode(), mtime=0))
    return path


def test_pretrained_vectors_are_checked_and_an_input(tmp_path):
    """A missing vectors file, one whose dimension is not the config's or one that is not binary as the config
    says stops the dry run naming the key; the file is an input of the embeddings job (with its sha256), so
    replacing it reruns what depends on it."""
    corpus = write_corpus(tmp_path / "mine.csv", ["pos", "neg"] * 30)
    cfg = user_config(corpus)
    cfg["datasets"]["mine"]["embeddings"] = {"pretrained": str(tmp_path / "glove.txt.gz"), "dim": 4}
    assert "datasets.mine.embeddings.pretrained: no file" in said(dry_run(tmp_path, cfg))
    vectors = write_vectors(tmp_path / "glove.txt.gz", 6)
    assert "datasets.mine.embeddings.dim: 4, but the vectors in" in said(dry_run(tmp_path, cfg))
    write_vectors(vectors, 4)
    cfg["datasets"]["mine"]["embeddings"]["binary"] = True
    assert "datasets.mine.embeddings.binary: true, but" in said(dry_run(tmp_path, cfg))
    del cfg["datasets"]["mine"]["embeddings"]["binary"]
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(cfg))
    target = "results/embeddings/mine/matrix.npy"
    snakemake(tmp_path, "--cores", "1", target, config=config)
    before = np.load(tmp_path / target)
    assert "Nothing to be done" in snakemake(tmp_path, "-n", target, config=config).stdout
    stamp = os.stat(vectors)
    write_vectors(vectors, 4, scale=2.0)
    os.utime(vectors, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))  # same modification time: the hash tells
    planned = snakemake(tmp_path, "-n", target, config=config).stdout
    assert "rule embeddings:" in planned and "rule tokenise:" not in planned, planned[-3000:]
    snakemake(tmp_path, "--cores", "1", target, config=config)
    assert not np.array_equal(before, np.load(tmp_path / target))


def test_a_fasttext_model_is_read_by_the_workflow(tmp_path):
    """fastText's own .bin model as a user gives it: the dry run reads its dimension off the header (a mismatch stops,
    naming the key), and the embeddings job gives the corpus's words the model lacks their subword vectors."""
    corpus = write_corpus(tmp_path / "mine.csv", ["pos", "neg"] * 30)
    fasttext_model(tmp_path / "cc.mine.6.bin", dim=6, sentences=[WORDS[::2]])  # half the corpus's words
    cfg = user_config(corpus)
    cfg["datasets"]["mine"]["embeddings"] = {"pretrained": str(tmp_path / "cc.mine.6.bin"), "dim": 4}
    message = said(dry_run(tmp_path, cfg))
    assert "datasets.mine.embeddings.dim: 4, but the vectors in" in message
    assert "(fastText model) have dimension 6" in message
    cfg["datasets"]["mine"]["embeddings"]["dim"] = 6
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(cfg))
    snakemake(tmp_path, "--cores", "1", "results/embeddings/mine/matrix.npy", config=config)
    coverage = json.loads((tmp_path / "results/embeddings/mine/coverage.json").read_text())
    vocab = json.loads((tmp_path / "results/datasets/mine/vocab.json").read_text())
    corpus_words = [word for word in vocab if word in WORDS]
    assert coverage["format"] == "fastText model" and corpus_words
    assert coverage["from_subwords"] == len([word for word in corpus_words if word not in WORDS[::2]]) > 0
    assert coverage["found"] >= len(corpus_words)


def test_a_cluster_job_hashes_the_user_corpus_and_vectors_without_reading_them_for_the_checks(tmp_path):
    """Every cluster job parses the workflow again (Snakemake's remote mode). The Snakemake that plans the run reads
    the user corpus and the vectors file for the dry run's checks, and hashes them; a job's Snakemake only hashes
    each (the sha256 is a parameter of the corpus and embeddings jobs upstream of it, which Snakemake evaluates):
    reading a large corpus in every job would cost seconds, and memory beyond a small job's request."""
    corpus = write_corpus(tmp_path / "mine.csv", ["pos", "neg"] * 20)
    vectors = write_vectors(tmp_path / "glove.txt.gz", 20)
    cfg = user_config(corpus)
    cfg["datasets"]["mine"]["embeddings"] = {"pretrained": str(vectors), "dim": 20}
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(cfg))
    trace = tmp_path / "trace"
    if strace_prefix(trace) is None:
        skip_without_strace()
    snakemake(tmp_path, "--cores", "2", "results/tables/jain_wallace/mine/table2.md", config=config)

    def opened(*args: str) -> collections.Counter:
        snakemake(tmp_path, "-n", *args, config=config, prefix=strace_prefix(trace))
        names = (Path(name).name for name in re.findall(r'open(?:at)?\(.*?"([^"]+)"', trace.read_text()))
        return collections.Counter(name for name in names if name in ("mine.csv", "glove.txt.gz"))

    planned = opened("--forcerun", "jw_tables")
    assert planned["mine.csv"] >= 2 and planned["glove.txt.gz"] >= 2, planned
    assert opened("--mode", "remote", "--target-jobs", "jw_tables:dataset=mine") == {"mine.csv": 1, "glove.txt.gz": 1}


# -- corrupt intermediates, full disks, file modes --------------------------------------------------------------
def test_corrupt_model_and_examples_are_named(planted_dataset, planted_model_dir, tmp_path):
    model = tmp_path / "model.pt"
    model.write_bytes((planted_model_dir / "model.pt").read_bytes()[:5000])  # truncated
    with pytest.raises(AttnauditError, match=rf"{model} is unreadable .*Delete it and rerun"):
        load_model(model)
    flipped = bytearray((planted_model_dir / "model.pt").read_bytes())
    flipped[len(flipped) // 2] ^= 0xFF  # inside a tensor's record: torch.load alone would not notice
    model.write_bytes(bytes(flipped))
    with pytest.raises(AttnauditError, match=rf"{model} is unreadable .*fails its CRC-32 check"):
        load_model(model)
    dataset = tmp_path / "dataset"
    dataset.mkdir()
    (dataset / "vocab.json").write_bytes((planted_dataset / "dataset" / "vocab.json").read_bytes())
    (dataset / "examples.parquet").write_bytes(b"PAR1 not really a parquet file")
    with pytest.raises(AttnauditError, match="examples.parquet is unreadable"):
        load_examples(dataset)
    matrix = tmp_path / "matrix.npy"
    np.save(matrix, np.ones((50, 8), np.float32))
    matrix.write_bytes(matrix.read_bytes()[:700])  # truncated
    with pytest.raises(AttnauditError, match=rf"{matrix} is unreadable .*Delete it and rerun"):
        load_npy(matrix)


def test_cli_prints_the_message_without_a_traceback(planted_dataset, tmp_path):
    broken = tmp_path / "model"
    broken.mkdir()
    (broken / "model.pt").write_bytes(b"not a model")
    cmd = [sys.executable, "-m", "attnaudit", "importance", "score", "--method", "gradient"]
    args = ["--dataset-dir", str(planted_dataset / "dataset"), "--model-dir", str(broken), "--out", str(tmp_path / "x")]
    proc = subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "model.pt is unreadable" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "x").exists()
    for debug_args in (["--debug", *cmd[3:], *args], [*cmd[3:], *args, "--debug"]):  # before or after the command
        debug = subprocess.run(
            [sys.executable, "-m", "attnaudit", *debug_args], capture_output=True, text=True, timeout=300
        )
        assert debug.returncode != 0 and "Traceback" in debug.stderr, debug_args


@pytest.mark.parametrize(
    "args,expected",
    [
        (
            [
                "train",
                "--dataset-dir",
                "{data}",
                "--embeddings",
                "{tmp}/m.npy",
                "--out-dir",
                "{tmp}/out",
                "--spec",
                '{{"epoch": 2}}',
            ],
            "train --spec: unknown key 'epoch'; expected some of encoder, ",
        ),
        (["explorer", "build", "--models", "{{}}", "--out-dir", "{tmp}/out"], "the plan has no 'templates'"),
        (
            ["explorer", "build", "--models", '[{{"dataset": "planted", "model": "m"}}]', "--out-dir", "{tmp}/out"],
            "entry 0 has no 'card' (needs dataset, model, card, predictions, examples)",
        ),
        (["explorer", "build", "--models", "[]", "--out-dir", "{tmp}/out"], "an empty list"),
        (
            [
                "explorer",
                "build",
                "--models",
                '[{{"dataset": "d", "model": "m", "card": "c", "predictions": "p", "examples": "e"}}]',
                "--options",
                '{{"page": 3}}',
                "--out-dir",
                "{tmp}/out",
            ],
            "explorer.page: unknown option; expected one of page_size, digits",
        ),
    ],
    ids=["train spec key", "explorer empty plan", "explorer entry", "explorer no model", "explorer option"],
)
def test_hand_written_json_arguments_are_checked(planted_dataset, tmp_path, args, expected):
    """A --spec or --models written by hand names what is wrong (the workflow's schema does not see them): an
    unknown training key is not ignored, a plan without a part is not a KeyError, and nothing is written."""
    fill = {"tmp": tmp_path, "data": planted_dataset / "dataset"}
    proc = subprocess.run(
        [sys.executable, "-m", "attnaudit", *(a.format(**fill) for a in args)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2 and expected in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "args,expected",
    [
        (["--dataset-dir", "{tmp}/nowhere", "--model-dir", "{tmp}"], "{tmp}/nowhere/examples.parquet: no such file"),
        (["--dataset-dir", "{tmp}", "--model-dir", "{tmp}"], "{tmp}/examples.parquet: is a directory, expected a file"),
        (["--dataset-dir", "{data}", "--model-dir", "{tmp}", "--options", "{{bad"], "an argument is not valid JSON"),
    ],
    ids=["missing directory", "a directory for a file", "bad JSON"],
)
def test_cli_names_a_bad_path_or_json_argument(planted_dataset, tmp_path, args, expected):
    """Stages are also run by hand: a missing path, a directory where a file belongs or an --options that is not
    JSON ends in one line naming it, never a traceback — nor "delete it and rerun" for a directory."""
    (tmp_path / "examples.parquet").mkdir()
    fill = {"tmp": tmp_path, "data": planted_dataset / "dataset"}
    cmd = [sys.executable, "-m", "attnaudit", "importance", "score", "--method", "gradient", "--out", "x.parquet"]
    proc = subprocess.run(
        [*cmd, *(a.format(**fill) for a in args)], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert proc.returncode == 2 and expected.format(**fill) in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "Delete it" not in proc.stderr


@pytest.fixture
def full_disk(tmp_path):
    """A real 64 KiB tmpfs (needs root and mount rights, as CI has); skipped with the reason otherwise, a failure
    under CI."""
    mount = tmp_path / "small"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True)
    if proc.returncode != 0:
        unavailable(f"cannot mount a small tmpfs here: {proc.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", str(mount)], check=False)


def test_a_full_disk_is_reported_and_leaves_no_partial_file(full_disk, planted_model_dir):
    model = load_model(planted_model_dir / "model.pt")  # larger than 64 KiB: does not fit
    with pytest.raises(AttnauditError, match="no space left on the device"):
        save_model(full_disk / "model.pt", model)
    frame = pd.DataFrame({"x": np.random.default_rng(0).random(400_000)})
    with pytest.raises(AttnauditError, match="no space left.*examples.parquet"):
        write_parquet(full_disk / "examples.parquet", frame)
    assert list(full_disk.iterdir()) == []  # neither the target nor a temporary file


def test_a_folder_that_cannot_be_written_is_named_by_the_output(tmp_path):
    """Writing into a folder that takes no new files (here /proc, which refuses them even to root) names the
    output the job was writing, not the hidden temporary file beside it."""
    target = Path("/proc") / f"attnaudit-{tmp_path.name}.json"
    with pytest.raises(OSError) as err:
        write_json(target, {"x": 1})
    assert err.value.filename == str(target) and ".tmp" not in str(err.value)


def test_results_get_the_usual_file_mode(tmp_path):
    write_json(tmp_path / "a.json", {"x": 1})
    mode = stat.S_IMODE(os.stat(tmp_path / "a.json").st_mode)
    assert mode == FILE_MODE and mode & stat.S_IRGRP  # readable by colleagues under the usual umask (022)


# -- interruption: SIGTERM (a Slurm time limit, scancel, kill) mid-job --------------------------------------------
def test_sigterm_mid_training_ends_the_log_with_what_the_job_used_and_writes_nothing(planted_dataset, tmp_path):
    """Slurm's time limit, ``scancel`` and ``kill`` send SIGTERM: the job stops with the exit code a shell reports for
    it (143), writes nothing (no output, no temporary file), and its log ends with the usage line ``job-costs``
    reads and what to do, without a traceback."""
    out, log = tmp_path / "model", tmp_path / "train.log"
    spec = {"encoder": "average", "attention": "additive", "epochs": 100_000}
    argv = [sys.executable, "-m", "attnaudit", "train", "--dataset-dir", str(planted_dataset / "dataset")]
    argv += ["--embeddings", str(planted_dataset / "embeddings" / "matrix.npy"), "--out-dir", str(out)]
    with log.open("w") as stderr:
        proc = subprocess.Popen([*argv, "--spec", json.dumps(spec)], stdout=subprocess.DEVNULL, stderr=stderr)
    deadline = time.time() + 300
    while "epoch 1:" not in log.read_text() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.1)
    assert proc.poll() is None, f"training ended before the signal:\n{log.read_text()}"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 128 + signal.SIGTERM, log.read_text()
    text = log.read_text()
    assert "Traceback" not in text, text
    assert read_usage(log) is not None, text
    assert text.splitlines()[-1].startswith("attnaudit train: stopped by SIGTERM after "), text
    assert not out.exists() or not list(out.iterdir()), sorted(p.name for p in out.iterdir())


def test_sigterm_while_an_output_is_written_removes_its_temporary_file(tmp_path):
    """The signal's exception runs ``io.atomic_path``'s clean-up: neither the output nor its temporary file is left
    (before, SIGTERM ended the process at once and the hidden ``.out.parquet.*.tmp`` stayed in results/)."""
    assert threading.current_thread() is threading.main_thread()  # else the handler is not set and SIGTERM kills
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated), stopping_on_sigterm(), atomic_path(tmp_path / "out.parquet") as partial:
        partial.write_bytes(b"half an output")
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(60)  # not reached: the handler runs as soon as os.kill returns
    assert list(tmp_path.iterdir()) == []
    assert signal.getsignal(signal.SIGTERM) is before  # the handler is this block's only


# -- interruption: kill -9 mid-training, then what the README says ----------------------------------------------
@pytest.mark.e2e
def test_sigkill_mid_training_then_the_readme_resume_commands(tmp_path):
    """Kill the whole Snakemake process group while a model trains; ``snakemake --unlock`` and the same command
    finish the run, and the model equals an uninterrupted run's (deterministic CPU training)."""
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "corpora": {"options": {"planted": {"n_examples": 400}}},
                "datasets": {
                    "planted": {
                        "corpus": "planted",
                        "embeddings": {"dim": 20, "epochs": 2},
                        "grid": {"encoders": ["lstm"], "attentions": ["additive"]},
                        "train": {"epochs": 12, "lstm_hidden": 32},
                    }
                },
            }
        )
    )
    target = "results/models/planted/lstm-additive-base-s0/metrics.json"
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    snakemake(clean, "--cores", "1", target, config=config)
    cmd = [*SNAKEMAKE, "--directory", str(killed), "--configfile", str(config), "--replace-workflow-config"]
    proc = subprocess.Popen(
        [*cmd, "--cores", "1", target], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    log = killed / "logs/train/planted/lstm-additive-base-s0.log"
    deadline = time.time() + 600
    while time.time() < deadline and not (log.exists() and "epoch 1:" in log.read_text()):
        time.sleep(0.2)
    assert log.exists(), "training never started"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (killed / target).exists()
    blocked = snakemake(killed, "--cores", "1", target, config=config, check=False)
    assert blocked.returncode != 0 and "--unlock" in blocked.stderr  # Snakemake's own lock says what to do
    snakemake(killed, "--unlock", config=config)
    snakemake(killed, "--cores", "1", target, config=config)
    ours, theirs = (json.loads((d / target).read_text()) for d in (killed, clean))
    assert ours["test"] == theirs["test"] and ours["history"] == theirs["history"]
    a, b = (torch.load(d / target.replace("metrics.json", "model.pt"), weights_only=False) for d in (killed, clean))
    assert all(torch.equal(a["state_dict"][k], b["state_dict"][k]) for k in a["state_dict"])
