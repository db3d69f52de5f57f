"""Tests for the corpora stage: reader counts against the local mirror (expected numbers from
shared/corpora/MANIFEST.md and the papers), checksum/download/extraction failures, user corpora, planted corpus."""

from __future__ import annotations

import argparse
import bz2
import dataclasses
import gzip
import hashlib
import io
import json
import lzma
import os
import shutil
import tarfile
import urllib.error
from pathlib import Path

import pandas as pd
import pyarrow
import pytest
from conftest import mirror_dir, required_mirror

from attnaudit import AttnauditError, ConfigKeyError
from attnaudit.corpora import build_corpus, fetch, get_spec, readers, run
from attnaudit.corpora.registry import REGISTRY, CorpusFile, CorpusSpec, CorpusTree

MIRROR = mirror_dir()  # read once: the tests below take $ATTNAUDIT_MIRROR out of their environment


def found_mirror() -> Path:
    """:data:`MIRROR`, or :func:`conftest.required_mirror`'s skip (a failure under CI)."""
    return MIRROR or required_mirror()


@pytest.fixture
def corpus_mirror() -> Path:
    return found_mirror()


needs_mirror = pytest.mark.usefixtures("corpus_mirror")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _counts(frame: pd.DataFrame) -> dict:
    return {(s, int(lab)): int(n) for (s, lab), n in frame.groupby(["split", "label"]).size().items()}


def _check_contract(frame: pd.DataFrame) -> None:
    assert list(frame.columns[:4]) == ["id", "split", "label", "text"]
    assert frame["label"].dtype == "int64"
    assert frame["id"].is_unique
    assert all(isinstance(t, str) for t in frame["text"])


@pytest.fixture(autouse=True)
def _no_env_mirror(monkeypatch):
    """Tests pass the mirror explicitly; a user's $ATTNAUDIT_MIRROR must not change what they see."""
    monkeypatch.delenv("ATTNAUDIT_MIRROR", raising=False)


@pytest.fixture
def offline(monkeypatch):
    """No network and no waiting: every download attempt fails at once."""
    calls = []

    def refuse(url, *args, **kwargs):
        calls.append(url)
        raise urllib.error.URLError("network disabled in tests")

    monkeypatch.setattr(fetch.urllib.request, "urlopen", refuse)
    monkeypatch.setattr(fetch, "BACKOFF_SECONDS", 0)
    return calls


# --- reader counts against the mirror -----------------------------------------------------------------------


@needs_mirror
def test_sst_counts(tmp_path):
    frame, manifest = build_corpus("sst", mirror=MIRROR, raw_dir=tmp_path / "raw")
    _check_contract(frame)
    # MANIFEST.md §1 / SST-2: 6,920 / 872 / 1,821 sentences without neutral roots
    assert _counts(frame) == {
        ("train", 0): 3310,
        ("train", 1): 3610,
        ("dev", 0): 428,
        ("dev", 1): 444,
        ("test", 0): 912,
        ("test", 1): 909,
    }
    assert manifest["reader"]["dropped_neutral"] == {"train": 1624, "dev": 229, "test": 389}
    assert manifest["counts"]["train"] == {"negative": 3310, "positive": 3610}
    assert manifest["files"][0]["sha256"] == _sha((MIRROR / "sst/trainDevTestTrees_PTB.zip").read_bytes())
    assert manifest["source"]["kind"] == "mirror"
    assert not (tmp_path / "raw").exists()  # the mirror held everything: nothing copied
    text = " ".join(frame["text"])
    assert "-LRB-" not in text and "-RRB-" not in text and "\\/" not in text
    assert "(" in text and ")" in text
    first = frame.iloc[0]
    assert first["id"] == "sst-train-00000" and first["label"] == 1
    assert first["text"].startswith("The Rock is destined to be the 21st Century 's new `` Conan ''")


@pytest.fixture(scope="module")
def imdb(tmp_path_factory):
    """Verifying + reading the 50,002 IMDB files is the slow part: once per session."""
    return build_corpus("imdb", mirror=found_mirror(), raw_dir=tmp_path_factory.mktemp("raw"))


def test_imdb_counts(imdb):
    frame, manifest = imdb
    _check_contract(frame)
    assert _counts(frame) == {("train", 0): 12500, ("train", 1): 12500, ("test", 0): 12500, ("test", 1): 12500}
    assert manifest["files"][0]["files_verified"] == 50002
    assert not frame["text"].str.contains("<br", regex=False).any()
    by_id = frame.set_index("id")["text"]
    assert by_id["imdb-train-pos-0_9"].startswith("Bromwell High is a cartoon comedy.")
    assert by_id["imdb-test-neg-0_2"].startswith("Once again Mr. Costner")
    assert manifest["defaults"]["max_tokens"] == 400 and manifest["defaults"]["test_sample"] == 0.2


@needs_mirror
def test_20news_counts_and_sklearn_equivalence(tmp_path):
    from sklearn.datasets import load_files
    from sklearn.datasets._twenty_newsgroups import (
        strip_newsgroup_footer,
        strip_newsgroup_header,
        strip_newsgroup_quoting,
    )

    frame, manifest = build_corpus("20news", mirror=MIRROR, raw_dir=tmp_path)
    _check_contract(frame)
    # standard bydate sizes: baseball 597 train + 397 test, hockey 600 + 399 (MANIFEST.md §3)
    assert _counts(frame) == {("all", 0): 994, ("all", 1): 999}
    assert manifest["label_names"] == ["baseball", "hockey"]
    assert manifest["files"][0]["files_verified"] == 18846
    # same texts as scikit-learn's own loading path (load_files latin-1 + its remove=... functions)
    bunch = load_files(
        MIRROR / "20newsgroups/20news-bydate/20news-bydate-test",
        categories=["rec.sport.hockey"],
        encoding="latin1",
        shuffle=False,
    )
    expected = {
        f"20news-test-hockey-{Path(f).name}": strip_newsgroup_quoting(strip_newsgroup_footer(strip_newsgroup_header(t)))
        for f, t in zip(bunch.filenames, bunch.data)
    }
    got = frame.set_index("id")["text"]
    assert len(expected) == 399
    assert all(got[k] == v for k, v in expected.items())
    assert not any(t.startswith("From:") for t in got)


@needs_mirror
def test_agnews_test_split_counts():
    rows, dropped = readers.read_agnews_csv(MIRROR / "ag_news/ag_news_csv/test.csv", "test")
    frame = pd.DataFrame(rows)
    # 1,900 per class in test (readme.txt): World + Business = 3,800
    assert len(frame) == 3800 and dropped == 3800
    assert frame["label"].value_counts().to_dict() == {0: 1900, 1: 1900}
    assert not frame["text"].str.contains("\\", regex=False).any()
    assert frame["text"].iloc[0].startswith("Fears for T N pension after talks Unions representing")


@needs_mirror
def test_agnews_without_train_fails_clearly(tmp_path, offline):
    raw = tmp_path / "raw"
    with pytest.raises(AttnauditError) as err:
        build_corpus("agnews", mirror=MIRROR, raw_dir=raw)
    message = str(err.value)
    url = REGISTRY["agnews"].files[0].urls[0]
    assert "train.csv" in message
    assert str(MIRROR / "ag_news") in message
    assert url in message and url.startswith("https://")
    assert offline == [url] * 3  # three tries
    assert not (raw / "ag_news_csv" / "train.csv").exists()
    assert not any(p.name.endswith(".part") for p in raw.rglob("*"))


@needs_mirror
def test_adr_counts(tmp_path):
    frame, manifest = build_corpus("adr", mirror=MIRROR, raw_dir=tmp_path)
    _check_contract(frame)
    assert _counts(frame) == {("train", 0): 15008, ("train", 1): 1995, ("test", 0): 3752, ("test", 1): 499}
    assert manifest["defaults"]["class_weighting"] is True
    assert manifest["defaults"]["dev_fraction"] == 0.15


# --- planted ------------------------------------------------------------------------------------------------


def test_planted_deterministic_and_markers(tmp_path):
    a, manifest = build_corpus("planted", raw_dir=tmp_path, seed=3)
    b, _ = build_corpus("planted", raw_dir=tmp_path, seed=3)
    c, _ = build_corpus("planted", raw_dir=tmp_path, seed=4)
    pd.testing.assert_frame_equal(a, b)
    assert not a["text"].equals(c["text"])
    _check_contract(a)
    assert len(a) == 2000 and set(a["split"]) == {"all"}
    assert a["label"].value_counts().to_dict() == {0: 1000, 1: 1000}
    markers = manifest["reader"]["marker_words"]
    neg, pos = set(markers["0"]), set(markers["1"])
    assert len(neg) == len(pos) == 5 and not neg & pos
    for text, label, important in zip(a["text"], a["label"], a["important"]):
        words = text.split()
        assert 8 <= len(words) <= 30
        assert 1 <= len(important) <= 2 and list(important) == sorted(set(important))
        own = pos if label == 1 else neg
        assert {words[i] for i in important} <= own
        assert all(w not in neg | pos for i, w in enumerate(words) if i not in set(important))
        assert text.replace(" ", "").isalpha() and text == text.lower()
    fillers = {w for t in a["text"] for w in t.split()} - neg - pos
    assert len(fillers) <= 500


def test_planted_options(tmp_path):
    frame, manifest = build_corpus(
        "planted", raw_dir=tmp_path, options={"n_examples": 10, "min_len": 3, "max_len": 3, "max_markers": 3}
    )
    assert len(frame) == 10 and all(len(t.split()) == 3 for t in frame["text"])
    assert manifest["options"]["n_examples"] == 10 and manifest["options"]["vocab_size"] == 500
    with pytest.raises(
        AttnauditError, match="corpora.options.planted.n_exampels: unknown option; expected one of max_len, max_markers"
    ):
        build_corpus("planted", raw_dir=tmp_path, options={"n_exampels": 10})
    with pytest.raises(AttnauditError, match="min_len"):
        build_corpus("planted", raw_dir=tmp_path, options={"min_len": 1, "max_markers": 2})
    with pytest.raises(AttnauditError, match="corpora.options.sst.n_examples: unknown option; corpus sst takes none"):
        build_corpus("sst", raw_dir=tmp_path, options={"n_examples": 1})


# --- checksums, truncated archives, downloads ---------------------------------------------------------------


@needs_mirror
def test_checksum_mismatch_names_file_and_hashes(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "sst").mkdir(parents=True)
    data = bytearray((MIRROR / "sst/trainDevTestTrees_PTB.zip").read_bytes())
    data[1000] ^= 0xFF
    (mirror / "sst/trainDevTestTrees_PTB.zip").write_bytes(bytes(data))
    out, manifest = tmp_path / "out/documents.parquet", tmp_path / "out/manifest.json"
    with pytest.raises(AttnauditError) as err:
        run("sst", out=out, manifest=manifest, raw_dir=tmp_path / "raw", mirror=mirror)
    message = str(err.value)
    assert "trainDevTestTrees_PTB.zip" in message
    assert REGISTRY["sst"].files[0].sha256 in message  # expected
    assert _sha(bytes(data)) in message  # actual
    assert not out.exists() and not manifest.exists() and not (tmp_path / "raw").exists()


@needs_mirror
def test_truncated_zip_gives_clear_error(tmp_path):
    data = (MIRROR / "sst/trainDevTestTrees_PTB.zip").read_bytes()
    folder = tmp_path / "mirror" / "sst"
    folder.mkdir(parents=True)
    (folder / "trainDevTestTrees_PTB.zip").write_bytes(data[: len(data) // 2])
    with pytest.raises(AttnauditError, match="sha256 mismatch"):
        build_corpus("sst", mirror=tmp_path / "mirror", raw_dir=tmp_path / "raw")
    # the reader on its own (checksum bypassed) also refuses with a message, not a BadZipFile traceback
    with pytest.raises(AttnauditError, match="truncated or corrupt"):
        readers.read_sst(folder)


def _tree_fixture(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    """A small corpus folder with a SHA256SUMS list, as in the mirror."""
    folder = tmp_path / "mirror" / "toy"
    files = {"toy/a.txt": b"alpha\n", "toy/sub/b.txt": b"bravo\n" * 100}
    for rel, data in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
    (folder / "SHA256SUMS").write_text("".join(f"{_sha(d)}  {rel}\n" for rel, d in files.items()))
    return folder, files


def _toy_spec(tree_or_file) -> CorpusSpec:
    return CorpusSpec(
        name="toy",
        description="",
        citation="",
        mirror_dir="toy",
        files=(tree_or_file,),
        reader=lambda root, options, seed: (pd.DataFrame(), {}),
        label_names=("a",),
        defaults={},
    )


def test_tree_verification(tmp_path):
    folder, files = _tree_fixture(tmp_path)
    sums_sha = _sha((folder / "SHA256SUMS").read_bytes())
    archive = CorpusFile("toy.tar.gz", ("file:///nonexistent/toy.tar.gz",), "0" * 64)
    ok = fetch.fetch_corpus(
        _toy_spec(CorpusTree("toy", "SHA256SUMS", sums_sha, archive)), tmp_path / "mirror", tmp_path / "raw"
    )
    assert ok.root == folder and ok.files[0]["files_verified"] == 2

    # one listed file altered: the error names it and both hashes
    (folder / "toy/sub/b.txt").write_bytes(b"bravo\n" * 99 + b"brave\n")
    with pytest.raises(AttnauditError) as err:
        fetch.fetch_corpus(
            _toy_spec(CorpusTree("toy", "SHA256SUMS", sums_sha, archive)), tmp_path / "mirror", tmp_path / "raw"
        )
    assert "b.txt" in str(err.value) and _sha(files["toy/sub/b.txt"]) in str(err.value)
    assert _sha((folder / "toy/sub/b.txt").read_bytes()) in str(err.value)

    # a file the list does not name (an editor backup) would be read with the others: it stops the run
    (folder / "toy/sub/b.txt").write_bytes(files["toy/sub/b.txt"])
    (folder / "toy/sub/b.txt~").write_bytes(b"stray\n")
    with pytest.raises(AttnauditError, match=r"b.txt~: in a verified corpus tree but not listed in .*SHA256SUMS"):
        fetch.fetch_corpus(
            _toy_spec(CorpusTree("toy", "SHA256SUMS", sums_sha, archive)), tmp_path / "mirror", tmp_path / "raw"
        )
    (folder / "toy/sub/b.txt~").unlink()

    # the list itself does not match its pinned hash
    with pytest.raises(AttnauditError, match="SHA256SUMS: sha256 mismatch"):
        fetch.fetch_corpus(
            _toy_spec(CorpusTree("toy", "SHA256SUMS", "f" * 64, archive)), tmp_path / "mirror", tmp_path / "raw"
        )


def _tar_gz(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for rel, data in files.items():
            info = tarfile.TarInfo(rel)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_download_and_extract_tree(tmp_path, monkeypatch):
    monkeypatch.setattr(fetch, "BACKOFF_SECONDS", 0)
    files = {"toyroot/a.txt": b"alpha\n", "toyroot/sub/b.txt": b"bravo\n"}
    blob = _tar_gz(files)
    (tmp_path / "srv").mkdir()
    (tmp_path / "srv/toy.tar.gz").write_bytes(blob)
    url = (tmp_path / "srv/toy.tar.gz").as_uri()
    tree = CorpusTree("toy", "SHA256SUMS", "0" * 64, CorpusFile("toy.tar.gz", (url,), _sha(blob)), "toyroot")
    raw = tmp_path / "raw"
    located = fetch.fetch_corpus(_toy_spec(tree), None, raw)  # no mirror: download, verify, extract
    assert located.root == raw and located.source["kind"] == "raw_dir"
    assert (raw / "toy/a.txt").read_bytes() == b"alpha\n" and (raw / "toy/sub/b.txt").read_bytes() == b"bravo\n"
    assert located.files[0]["sha256"] == _sha(blob)
    assert sorted(p.name for p in raw.iterdir()) == ["toy", "toy.tar.gz"]  # no temp folders or .part files
    # second run reuses the verified extraction without downloading
    (tmp_path / "srv/toy.tar.gz").unlink()
    assert fetch.fetch_corpus(_toy_spec(tree), None, raw).files[0]["sha256"] == _sha(blob)
    # ... and checks it again: an edited or an added file stops the run, naming it
    (raw / "toy/sub/b.txt").write_bytes(b"edited\n")
    with pytest.raises(AttnauditError, match=r"b.txt: changed since it was extracted from the verified archive"):
        fetch.fetch_corpus(_toy_spec(tree), None, raw)
    (raw / "toy/sub/b.txt").write_bytes(b"bravo\n")
    (raw / "toy/sub/extra.txt").write_bytes(b"added by hand\n")
    with pytest.raises(AttnauditError, match=r"extra.txt: in a verified corpus tree but not listed"):
        fetch.fetch_corpus(_toy_spec(tree), None, raw)


def test_truncated_archive_download(tmp_path, monkeypatch):
    monkeypatch.setattr(fetch, "BACKOFF_SECONDS", 0)
    blob = _tar_gz({"toyroot/a.txt": os.urandom(50_000)})
    cut = blob[: len(blob) // 2]
    (tmp_path / "toy.tar.gz").write_bytes(cut)
    url = (tmp_path / "toy.tar.gz").as_uri()
    raw = tmp_path / "raw"
    # pinned to the full archive: the truncated download is a checksum mismatch, nothing is kept
    tree = CorpusTree("toy", "SHA256SUMS", "0" * 64, CorpusFile("toy.tar.gz", (url,), _sha(blob)), "toyroot")
    with pytest.raises(AttnauditError) as err:
        fetch.fetch_corpus(_toy_spec(tree), None, raw)
    assert _sha(blob) in str(err.value) and _sha(cut) in str(err.value)
    assert list(raw.iterdir()) == []
    # even if the pin matched the truncated bytes, extraction fails cleanly and atomically
    tree = CorpusTree("toy", "SHA256SUMS", "0" * 64, CorpusFile("toy.tar.gz", (url,), _sha(cut)), "toyroot")
    with pytest.raises(AttnauditError, match="truncated or corrupt"):
        fetch.fetch_corpus(_toy_spec(tree), None, raw)
    assert not (raw / "toy").exists() and not any(p.name.startswith(".extract-") for p in raw.iterdir())


def test_download_retries_then_names_url(tmp_path, offline):
    item = CorpusFile("data/x.csv", ("https://example.org/x.csv",), "0" * 64)
    (tmp_path / "empty-mirror").mkdir()
    with pytest.raises(AttnauditError) as err:
        fetch.fetch_corpus(_toy_spec(item), tmp_path / "empty-mirror", tmp_path / "raw")
    assert offline == ["https://example.org/x.csv"] * 3
    assert "x.csv" in str(err.value) and str(tmp_path / "empty-mirror" / "toy") in str(err.value)
    assert "https://example.org/x.csv" in str(err.value)


def test_single_file_copied_from_mirror_when_partial(tmp_path, offline):
    """A mirror holding only some files: those are verified and copied; the missing one is reported."""
    (tmp_path / "mirror/toy").mkdir(parents=True)
    (tmp_path / "mirror/toy/b.csv").write_bytes(b"x\n")
    have = CorpusFile("b.csv", ("https://example.org/b.csv",), _sha(b"x\n"))
    missing = CorpusFile("a.csv", ("https://example.org/a.csv",), "0" * 64)
    spec = dataclasses.replace(_toy_spec(have), files=(have, missing))
    with pytest.raises(AttnauditError, match="a.csv is missing"):
        fetch.fetch_corpus(spec, tmp_path / "mirror", tmp_path / "raw")
    assert (tmp_path / "raw/b.csv").read_bytes() == b"x\n"
    assert not (tmp_path / "raw/a.csv").exists()


# --- user corpora -------------------------------------------------------------------------------------------


def _user(tmp_path: Path, name: str, content: str, **config) -> dict:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    fmt = "jsonl" if name.endswith((".jsonl", ".json")) else "csv"
    return {"mine": {"path": str(path), "format": fmt, "text_column": "text", "label_column": "label", **config}}


def test_user_csv_labels_splits_and_empty_text(tmp_path):
    cfg = _user(
        tmp_path,
        "c.csv",
        'doc,text,label,part\na,"good, very good",pos,train\nb,,neg,test\nc,"multi\nline",pos,dev\n',
        split_column="part",
        id_column="doc",
    )
    frame, manifest = build_corpus("mine", raw_dir=tmp_path, user_corpora=cfg)
    _check_contract(frame)
    assert frame.to_dict("list") == {
        "id": ["a", "b", "c"],
        "split": ["train", "test", "dev"],
        "label": [1, 0, 1],
        "text": ["good, very good", "", "multi\nline"],
    }
    assert manifest["label_names"] == ["neg", "pos"]
    assert manifest["reader"]["label_mapping"] == {"pos": 1, "neg": 0}
    assert manifest["files"][0]["sha256"] == _sha((tmp_path / "c.csv").read_bytes())
    # given label_names fix the order; no split_column → "all"; no id_column → generated ids
    cfg["mine"].update(label_names=["pos", "neg"])
    del cfg["mine"]["split_column"], cfg["mine"]["id_column"]
    frame, manifest = build_corpus("mine", raw_dir=tmp_path, user_corpora=cfg)
    assert frame["label"].tolist() == [0, 1, 0] and set(frame["split"]) == {"all"}
    assert frame["id"].tolist() == ["mine-000000", "mine-000001", "mine-000002"]


def test_user_csv_integer_labels_sorted_numerically(tmp_path):
    cfg = _user(tmp_path, "n.csv", "text,label\nx,10\ny,2\nz,2\n")
    frame, manifest = build_corpus("mine", raw_dir=tmp_path, user_corpora=cfg)
    assert manifest["label_names"] == ["2", "10"] and frame["label"].tolist() == [1, 0, 0]


@pytest.mark.parametrize(
    "content, line, what",
    [
        ("text,label\nok,1\ntoo,many,fields\nok,0\n", 3, "expected 2 fields, found 3"),
        ('text,label\nok,1\nfine,0\n"never closed,1\nok,0\n', 4, "unterminated"),
        ('text,label\nok,1\n"multi\nline",1\nno label,\n', 5, "missing label"),
    ],
)
def test_user_csv_malformed_row_names_line(tmp_path, content, line, what):
    cfg = _user(tmp_path, "bad.csv", content)
    with pytest.raises(AttnauditError) as err:
        build_corpus("mine", raw_dir=tmp_path, user_corpora=cfg)
    assert f"bad.csv:{line}:" in str(err.value) and what in str(err.value)


@pytest.mark.parametrize(
    "value, hint",
    [
        ("validation", "; for 'validation' write 'dev' throughout the file"),
        ("Train", "; for 'Train' write 'train' throughout the file"),
        ("x", ""),
    ],
)
def test_user_csv_bad_split_names_row_and_column(tmp_path, value, hint):
    """A split value that is not train/dev/test stops with the line and column, and a spelling of one of them (the
    Hugging Face datasets' "validation") with the value to write instead."""
    cfg = _user(tmp_path, "s.csv", f"text,label,part\na,1,train\nb,0,{value}\n", split_column="part")
    with pytest.raises(AttnauditError, match=rf"s.csv:3: column 'part' has '{value}'") as err:
        build_corpus("mine", raw_dir=tmp_path, user_corpora=cfg)
    assert str(err.value).endswith(f"(or omit split_column){hint}")


def test_user_jsonl(tmp_path):
    cfg = _user(
        tmp_path, "u.jsonl", '{"text": "hello", "label": 1}\n\n{"text": "", "label": 0}\n{"text": null, "label": 1}\n'
    )
    frame, _ = build_corpus("mine", raw_dir=tmp_path, user_corpora=cfg)
    assert frame["text"].tolist() == ["hello", "", ""] and frame["label"].tolist() == [1, 0, 1]

    cfg = _user(tmp_path, "bad.jsonl", '{"text": "a", "label": 1}\n{"text": "b", "label": 0,}\n')
    with pytest.raises(AttnauditError) as err:
        build_corpus("mine", raw_dir=tmp_path, user_corpora=cfg)
    assert "bad.jsonl:2:" in str(err.value) and "invalid JSON" in str(err.value)

    cfg = _user(tmp_path, "nolabel.jsonl", '{"text": "a", "label": 1}\n{"text": "b"}\n')
    with pytest.raises(
        AttnauditError, match=r"nolabel.jsonl:2: the record has no column 'label' \(corpora.user.mine.label_column;"
    ):
        build_corpus("mine", raw_dir=tmp_path, user_corpora=cfg)


def test_user_csv_header_naming_a_column_twice_is_rejected(tmp_path):
    cfg = _user(tmp_path, "d.csv", "id,text,label,text\n1,good,pos,train\n2,bad,neg,test\n")
    with pytest.raises(AttnauditError, match=r"d.csv:1: the header names column\(s\) \['text'\] more than once"):
        build_corpus("mine", raw_dir=tmp_path, user_corpora=cfg)


def test_user_tsv_is_tab_separated_without_quoting(tmp_path):
    """TSV as GLUE writes it: a tab separates fields, a line ends a record and a quote is text; the format
    follows from the .tsv suffix, Windows line ends are line ends, and a row with a tab too many names its line."""
    content = 'text\tlabel\nit \'s a "great" film\tpos\n"unbalanced quote\tneg\r\n\nfine\tpos\n'
    path = tmp_path / "g.tsv"
    path.write_text(content, encoding="utf-8", newline="")
    cfg = {"mine": {"path": str(path), "text_column": "text", "label_column": "label"}}
    frame, manifest = build_corpus("mine", raw_dir=tmp_path, user_corpora=cfg)
    assert frame["text"].tolist() == ['it \'s a "great" film', '"unbalanced quote', "fine"]
    assert frame["label"].tolist() == [1, 0, 1] and manifest["label_names"] == ["neg", "pos"]
    path.write_text(content + "a\ttab too\tmany\n", encoding="utf-8")
    with pytest.raises(AttnauditError, match=r"g\.tsv:6: expected 2 fields, found 3: 'a\\ttab too\\tmany'"):
        build_corpus("mine", raw_dir=tmp_path, user_corpora=cfg)


@pytest.mark.parametrize(
    "name, content, fmt, hint",
    [
        (
            "t.csv",
            "text\tlabel\nx\tpos\ny\tneg\n",
            "csv",
            "the header is one column holding tabs: for tab-separated values set format: tsv",
        ),
        (
            "s.csv",
            "text;label\nx;pos\ny;neg\n",
            "csv",
            "the header is one column holding ';': save the file comma-separated",
        ),
        (
            "c.tsv",
            "text,label\nx,pos\ny,neg\n",
            "tsv",
            "the header is one column holding commas: for comma-separated values set format: csv",
        ),
    ],
)
def test_user_file_with_another_separator_says_which(tmp_path, name, content, fmt, hint):
    """A header that comes out as one column names what separates it and the format that reads it."""
    cfg = _user(tmp_path, name, content, format=fmt)
    with pytest.raises(AttnauditError, match=r":1: the header has no column 'text'") as err:
        build_corpus("mine", raw_dir=tmp_path, user_corpora=cfg)
    assert str(err.value).endswith(hint)


_TABLE = "text,label\nnice film,pos\nbad film,neg\n"


NOT_TEXT = pytest.mark.parametrize(
    "data, what, name",
    [
        (
            b"PK\x03\x04\x14\x00\x06\x00" + bytes(range(256)),
            "a zip archive (a spreadsheet's .xlsx is one)",
            "mine.xlsx",
        ),
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(range(256)), "an old Excel (.xls) workbook", "mine.xls"),
        (_tar_gz({"mine.csv": _TABLE.encode()}), "a tar archive; extract it (tar -xf)", "mine.tgz"),
        (b"7z\xbc\xaf\x27\x1c\x00\x04" + bytes(range(256)), "a 7-Zip archive; extract it", "mine.7z"),
    ],
    ids=["xlsx", "xls", "tar.gz", "7z"],
)


@NOT_TEXT
@pytest.mark.parametrize("encoding", [None, "latin-1"])
def test_user_file_that_is_no_text_is_named(tmp_path, data, what, name, encoding):
    """A spreadsheet or an archive stops with what it is, even under an encoding that decodes any bytes."""
    path = tmp_path / "mine.csv"
    path.write_bytes(data)
    cfg = {"mine": {"path": str(path), "text_column": "text", "label_column": "label", "encoding": encoding}}
    with pytest.raises(AttnauditError, match="not a text file: its first bytes say it is") as err:
        build_corpus("mine", raw_dir=tmp_path, user_corpora=cfg)
    assert what in str(err.value) and str(path) in str(err.value)


@NOT_TEXT
def test_a_user_file_named_as_no_text_is_named_for_what_it_is(tmp_path, data, what, name):
    """Under its own name (``mine.xlsx``, ``mine.tgz``, ``mine.7z``: no format's suffix) the entry is checked
    before any job runs: what the file is, not a format to set (``format: csv`` would only lead to the same file's
    bytes)."""
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(ConfigKeyError) as err:
        get_spec("mine", {"mine": {"path": str(path), "text_column": "text", "label_column": "label"}})
    assert err.value.key == ("corpora", "user", "mine", "path"), err.value.key
    assert str(err.value).startswith(f"config corpora.user.mine.path: {path} is {what}"), str(err.value)


def _zstd(data: bytes) -> bytes:
    return pyarrow.Codec("zstd").compress(data, asbytes=True)


COMPRESSIONS = {"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress, "zst": _zstd}


@pytest.mark.parametrize("suffix", sorted(COMPRESSIONS))
@pytest.mark.parametrize("plain", ["mine.csv", "mine.tsv", "mine.jsonl"])
def test_a_compressed_user_file_gives_the_documents_of_the_file_it_holds(tmp_path, plain, suffix):
    """A user corpus compressed with gzip, bzip2, xz or zstd is read as the file it holds, as pandas and zcat read
    it: its format from the name under the compression's suffix (``mine.csv.gz``), or from ``format`` whatever the
    name (a ``mine.csv`` that is compressed, and one compressed twice), with the same documents, labels and
    manifest counts as the plain file's."""
    rows = [("nice film", "pos"), ("bad film, and long", "neg"), ("so so", "pos")]
    table = {
        "csv": "text,label\n" + "".join(f'"{t}",{label}\n' for t, label in rows),
        "tsv": "text\tlabel\n" + "".join(f"{t}\t{label}\n" for t, label in rows),
        "jsonl": "".join(json.dumps({"text": t, "label": label}) + "\n" for t, label in rows),
    }[plain.rsplit(".", 1)[1]].encode()
    compress = COMPRESSIONS[suffix]
    (tmp_path / plain).write_bytes(table)
    expected, expected_info = build_corpus("mine", raw_dir=tmp_path, user_corpora=_entry(tmp_path / plain))
    assert expected["text"].tolist() == [t for t, _ in rows]  # the plain file is read at all
    fmt = plain.rsplit(".", 1)[1]
    for name, data, config in [
        (f"{plain}.{suffix}", compress(table), {}),
        (f"packed-{plain}", compress(table), {}),
        (f"twice-{plain}.{suffix}", compress(compress(table)), {}),
        (f"{plain}.{suffix}.bin", compress(table), {"format": fmt}),
    ]:
        (tmp_path / name).write_bytes(data)
        frame, info = build_corpus("mine", raw_dir=tmp_path, user_corpora=_entry(tmp_path / name, **config))
        pd.testing.assert_frame_equal(frame, expected)
        assert _without_files(info) == _without_files(expected_info), name


def _entry(path: Path, **config) -> dict:
    return {"mine": {"path": str(path), "text_column": "text", "label_column": "label", **config}}


def _without_files(info: dict) -> dict:
    """A corpus manifest's entries apart from those naming the file (its path, size and checksum)."""
    return {key: value for key, value in info.items() if key not in ("files", "source", "description")}


@pytest.mark.parametrize("suffix", sorted(COMPRESSIONS))
def test_a_compressed_user_file_cut_off_is_named_as_such(tmp_path, suffix):
    """A compressed file cut off (an interrupted download or copy) stops with the file and the compression,
    not a decoding error in text it never was."""
    data = COMPRESSIONS[suffix](("text,label\n" + "a long enough review,pos\n" * 400).encode())
    path = tmp_path / f"mine.csv.{suffix}"
    path.write_bytes(data[: len(data) // 2])
    name = {"gz": "a gzip", "bz2": "a bzip2", "xz": "an xz", "zst": "a zstd"}[suffix]
    with pytest.raises(AttnauditError, match=rf"{name}-compressed file that does not decompress .*cut off") as err:
        build_corpus("mine", raw_dir=tmp_path, user_corpora=_entry(path))
    assert str(err.value).startswith(str(path)), str(err.value)


def test_a_text_that_begins_as_a_compressions_mark_is_text(tmp_path):
    """bzip2's mark is three letters and a digit: a text beginning with them is read as text."""
    path = tmp_path / "mine.csv"
    path.write_text("BZh9,label\nfine,pos\nno,neg\n")
    frame, _ = build_corpus("mine", raw_dir=tmp_path, user_corpora=_entry(path, text_column="BZh9"))
    assert frame["text"].tolist() == ["fine", "no"]


_QUOTED = "text,label\nplain,pos\n\u201cquoted\u201d caf\u00e9 \u2013 d\u00e9j\u00e0 vu,neg\n"


@pytest.mark.parametrize(
    "written, encoding, expected",
    [
        ("cp1252", None, r"mine\.csv:3: cannot decode as utf-8 .*reads as cp1252 .*'encoding: cp1252'"),
        ("cp1252", "latin-1", r"mine\.csv:3: read as latin-1, .*control character U\+0093 .*'encoding: cp1252'"),
        ("utf-8", "latin-1", r"mine\.csv:3: the file is UTF-8 .* caf\u00c3\u00a9 .*drop the corpus's 'encoding'"),
        ("utf-8", "cp1252", r"mine\.csv:3: cannot decode as cp1252 .*the file is UTF-8: drop the corpus's 'encoding'"),
        ("cp1252", "cp1252", None),
        ("latin-1", "latin-1", None),
    ],
)
def test_user_file_in_another_8_bit_encoding_is_read_or_named(tmp_path, written, encoding, expected):
    """Excel on Windows saves CSV files in cp1252. Read as UTF-8 the error says which encoding reads the file; read as
    latin-1, which decodes any bytes, cp1252's quotes and dashes would become control characters, and a UTF-8 file
    would become ``cafÃ©``: both stop with the line instead of training on garbled text."""
    path = tmp_path / "mine.csv"
    text = (
        _QUOTED
        if written != "latin-1"
        else _QUOTED.replace("\u201c", "<").replace("\u201d", ">").replace("\u2013", "-")
    )
    path.write_bytes(text.encode(written))
    cfg = {"mine": {"path": str(path), "text_column": "text", "label_column": "label", "encoding": encoding}}
    if expected is None:
        frame, _ = build_corpus("mine", raw_dir=tmp_path, user_corpora=cfg)
        assert frame["text"].tolist() == [line.rsplit(",", 1)[0] for line in text.splitlines()[1:]]
        return
    with pytest.raises(AttnauditError, match=expected):
        build_corpus("mine", raw_dir=tmp_path, user_corpora=cfg)


def test_user_utf16_file_names_the_encoding_that_reads_it(tmp_path):
    """UTF-16 (as Excel's "Unicode text" writes it) fails under UTF-8 naming its byte-order mark, and reads with
    ``encoding: utf-16``."""
    path = tmp_path / "mine.csv"
    path.write_bytes(_TABLE.encode("utf-16"))
    cfg = {"mine": {"path": str(path), "text_column": "text", "label_column": "label"}}
    with pytest.raises(AttnauditError, match=r"mine\.csv:1: cannot decode as utf-8 .*byte-order mark.*utf-16"):
        build_corpus("mine", raw_dir=tmp_path, user_corpora=cfg)
    cfg["mine"]["encoding"] = "utf-16"
    frame, _ = build_corpus("mine", raw_dir=tmp_path, user_corpora=cfg)
    assert frame["text"].tolist() == ["nice film", "bad film"]


@pytest.mark.parametrize("order", ["le", "be"])
def test_user_utf16_without_byte_order_mark_names_its_byte_order(tmp_path, order):
    """UTF-16 without a byte-order mark decodes as UTF-8 with a NUL in every other byte; that is named, with the
    encoding that reads it."""
    path = tmp_path / "mine.csv"
    path.write_bytes(_TABLE.encode(f"utf-16-{order}"))
    cfg = {"mine": {"path": str(path), "text_column": "text", "label_column": "label"}}
    with pytest.raises(AttnauditError, match=rf"mine\.csv:1: NUL character.*encoding: utf-16-{order}"):
        build_corpus("mine", raw_dir=tmp_path, user_corpora=cfg)
    cfg["mine"]["encoding"] = f"utf-16-{order}"
    frame, _ = build_corpus("mine", raw_dir=tmp_path, user_corpora=cfg)
    assert frame["text"].tolist() == ["nice film", "bad film"]


@pytest.mark.parametrize(
    "written, encoding, expected",
    [
        (
            "utf-16-le",
            "utf-16-be",
            r"read as utf-16-be, the file has no line break; it is UTF-16 in the other byte "
            r"order: set 'encoding: utf-16-le'",
        ),
        ("utf-16-be", "utf-16", r"read as utf-16, .*in the other byte order: set 'encoding: utf-16-be'"),
        ("utf-8", "utf-16-le", r"read as utf-16-le, the file has no line break; it is UTF-8 .*remove 'encoding'"),
        ("utf-8 odd", "utf-16", r"mine\.csv:4: cannot decode as utf-16 \(truncated data\); it is UTF-8 .*not UTF-16"),
    ],
    ids=["le as be", "be as le", "utf-8 as utf-16", "odd length"],
)
def test_user_file_read_as_the_wrong_utf16_says_which_encoding_reads_it(tmp_path, written, encoding, expected):
    """A UTF-16 file read in the other byte order, or a UTF-8 file read as UTF-16, decodes into one line of CJK
    characters (a line break becomes U+0A00), which used to end as "no documents"; the encoding that reads it is
    named instead."""
    path = tmp_path / "mine.csv"
    path.write_bytes(_TABLE.encode(written.split()[0]) + (b"!" if written.endswith("odd") else b""))
    cfg = {"mine": {"path": str(path), "text_column": "text", "label_column": "label", "encoding": encoding}}
    with pytest.raises(AttnauditError, match=expected):
        build_corpus("mine", raw_dir=tmp_path, user_corpora=cfg)


@pytest.mark.parametrize(
    "data, line",
    [(b"text,label\nnice film,pos\nbad\x00 film,neg\n", 3), (_TABLE.encode() + bytes(4096), 4)],
    ids=["inside a text", "a file padded after a crash"],
)
@pytest.mark.parametrize("encoding", ["utf-8", "latin-1"])
def test_user_file_with_nul_characters_names_their_line(tmp_path, data, line, encoding):
    """A NUL, which UTF-8 and latin-1 decode silently, stops the read with its line instead of becoming part of a
    word (or of an empty last record)."""
    path = tmp_path / "mine.csv"
    path.write_bytes(data)
    cfg = {"mine": {"path": str(path), "text_column": "text", "label_column": "label", "encoding": encoding}}
    with pytest.raises(AttnauditError, match=rf"mine\.csv:{line}: NUL character.*remove them"):
        build_corpus("mine", raw_dir=tmp_path, user_corpora=cfg)


def test_user_jsonl_lines_end_only_at_newlines(tmp_path):
    """U+2028 and U+0085 are valid raw inside a JSON string (``json.dumps(ensure_ascii=False)`` writes them);
    CR, LF and CRLF end lines."""
    rows = [{"text": "one\u2028two\x85three", "label": "pos"}, {"text": "four", "label": "neg"}]
    content = "\r".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\r\n" + json.dumps(rows[1]) + "\n"
    frame, _ = build_corpus("mine", raw_dir=tmp_path, user_corpora=_user(tmp_path, "u.jsonl", content))
    assert frame["text"].tolist() == ["one\u2028two\x85three", "four", "four"]
    assert frame["label"].tolist() == [1, 0, 0]


@pytest.mark.parametrize(
    "name, content, what",
    [
        ("n.csv", "text,label\na,pos\nb,NaN\n", "n.csv:3: label 'NaN' in column 'label' looks like a missing value"),
        ("n.jsonl", '{"text": "a", "label": 1}\n{"text": "b", "label": NaN}\n', "n.jsonl:2: missing label"),
        ("o.jsonl", '{"text": "a", "label": {"y": "pos"}}\n', "o.jsonl:1: label in column 'label' must be a class"),
        ("f.csv", "text,label\na,1\nb,0.731\n", "f.csv:3: label '0.731' in column 'label' is a fractional number"),
        ("f.jsonl", '{"text": "a", "label": 0.25}\n', "f.jsonl:1: label 0.25 in column 'label' is a fractional"),
        # probably mistakes: each would train as a class of its own (label_names keeps one that is meant)
        ("r.csv", "text,label\na,pos\nb,NA\n", "r.csv:3: label 'NA' in column 'label' looks like a missing value"),
        ("x.csv", "text,label\na,pos\nb,#N/A\n", "x.csv:3: label '#N/A' in column 'label' looks like a missing"),
        (
            "m.jsonl",
            "".join(f'{{"text": "t{i}", "label": "{("entailment", "neutral")[i % 2]}"}}\n' for i in range(60))
            + '{"text": "b", "label": "-"}\n',
            "m.jsonl:61: label '-' on 1 of 61 rows, beside the classes entailment, neutral: SNLI and MultiNLI write",
        ),
        (  # beside NLI's classes '-' is no class however often it occurs (here 1 row in 4)
            "nli.csv",
            "text,label\n" + "a,entailment\nb,contradiction\nc,neutral\nd,-\n" * 10,
            "nli.csv:5: label '-' on 10 of 40 rows, beside the classes contradiction, entailment, neutral: SNLI and",
        ),
        ("p.jsonl", '{"text": "a", "label": "pos"}\n{"text": "b", "label": "None"}\n', "p.jsonl:2: label 'None'"),
        ("c.csv", "text,label\na,pos\nb,neg\nc,Pos\n", "c.csv:4: label 'Pos' differs only in case from 'pos'"),
        ("b.jsonl", '{"text": "a", "label": 1}\n{"text": "b", "label": true}\n', "b.jsonl:2: label true/false in a"),
        (
            "h.csv",
            "text,label\n" + "a,0\nb,1\nc,2\n" * 20 + "d,-1\n",
            "h.csv:62: label -1 on 1 of 61 rows, beside the classes 0–2: Hugging Face datasets write -1 for an",
        ),
        (
            "j.json",
            '[{"text": "a", "label": 1}]\n',
            "j.json:1: expected one JSON object per line (JSON Lines), found a",
        ),
    ],
)
def test_user_labels_that_are_no_class_or_probably_a_mistake_stop_with_the_line(tmp_path, name, content, what):
    """No class: a missing label, an object, a fraction. Probably a mistake: a missing value written as text, a class
    spelled in two cases, booleans among numbers; the message says how to keep one when it is meant
    (``label_names``)."""
    with pytest.raises(AttnauditError) as err:
        build_corpus("mine", raw_dir=tmp_path, user_corpora=_user(tmp_path, name, content))
    assert what in str(err.value)


def test_user_labels_listed_in_label_names_are_classes_whatever_they_look_like(tmp_path):
    cfg = _user(tmp_path, "l.csv", "text,label\na,NA\nb,Pos\nc,pos\nd,NA\n", label_names=["pos", "Pos", "NA"])
    frame, manifest = build_corpus("mine", raw_dir=tmp_path, user_corpora=cfg)
    assert frame["label"].tolist() == [2, 1, 0, 2] and manifest["label_names"] == ["pos", "Pos", "NA"]
    cfg = _user(tmp_path, "i.csv", "text,label\na,2\nb,0\n", label_names=[2, 0])  # integers, as the file has them
    assert build_corpus("mine", raw_dir=tmp_path, user_corpora=cfg)[0]["label"].tolist() == [0, 1]
    signs = "text,label\n" + "a,+\nb,-\n" * 20  # sentiment +/-: '-' is a class, not a rare mark
    _, manifest = build_corpus("mine", raw_dir=tmp_path, user_corpora=_user(tmp_path, "pm.csv", signs))
    assert manifest["label_names"] == ["+", "-"]
    three_way = "text,label\n" + "a,-1\nb,0\nc,1\n" * 20  # sentiment -1/0/1: -1 is a class, not a rare marker
    frame, manifest = build_corpus("mine", raw_dir=tmp_path, user_corpora=_user(tmp_path, "s.csv", three_way))
    assert manifest["label_names"] == ["-1", "0", "1"] and frame["label"].tolist()[:3] == [0, 1, 2]
    cfg = _user(tmp_path, "h.csv", "text,label\n" + "a,0\nb,1\n" * 30 + "c,-1\n", label_names=["-1", "0", "1"])
    assert build_corpus("mine", raw_dir=tmp_path, user_corpora=cfg)[0]["label"].tolist()[-3:] == [1, 2, 0]
    booleans = '{"text": "a", "label": true}\n{"text": "b", "label": false}\n'
    frame, manifest = build_corpus("mine", raw_dir=tmp_path, user_corpora=_user(tmp_path, "t.jsonl", booleans))
    assert manifest["label_names"] == ["false", "true"] and frame["label"].tolist() == [1, 0]


def test_user_labels_and_ids_are_cleaned_like_the_text(tmp_path):
    """A label or id differs from another only by what nobody sees (a zero-width space, a right-to-left override, a
    decomposed accent): the same NFC and format-character cleaning as the documents makes them one."""
    content = "id,text,label\na,x,pos\nb\u200b,y,pos\u200b\nc,z,caf\u00e9\nd,w,cafe\u0301\ne,v,\u202eneg\n"
    cfg = _user(tmp_path, "u.csv", content, id_column="id")
    frame, manifest = build_corpus("mine", raw_dir=tmp_path, user_corpora=cfg)
    assert manifest["label_names"] == ["caf\u00e9", "neg", "pos"] and frame["label"].tolist() == [2, 2, 0, 0, 1]
    assert frame["id"].tolist() == ["a", "b", "c", "d", "e"]


@pytest.mark.parametrize(
    "name, content, said",
    [
        ("u.csv", "id,text,label\na,x,pos\n,y,neg\n", "u.csv:3: column 'id' has no id ('')"),
        ("u.csv", "id,text,label\na,x,pos\n \u200b,y,neg\n", "u.csv:3: column 'id' has no id (' \\u200b')"),
        ("u.jsonl", '{"id": 1, "text": "x", "label": "pos"}\n{"id": null, "text": "y", "label": "neg"}\n', "u.jsonl:2"),
    ],
)
def test_user_row_without_an_id_names_its_line(tmp_path, name, content, said):
    """An empty or null id would become the id "" or "None" (one row's passes the duplicate check): it stops with
    the line."""
    with pytest.raises(AttnauditError) as err:
        build_corpus("mine", raw_dir=tmp_path, user_corpora=_user(tmp_path, name, content, id_column="id"))
    assert said in str(err.value) and "every row of id_column needs one" in str(err.value)


def test_user_csv_document_longer_than_the_csv_modules_field_limit(tmp_path):
    """Python's csv module stops at 131,072 characters a field unless told otherwise; one long review passes it."""
    long = "word " * 40_000
    cfg = _user(tmp_path, "long.csv", f'text,label\nshort,pos\n"{long}",neg\n')
    frame, _ = build_corpus("mine", raw_dir=tmp_path, user_corpora=cfg)
    assert frame["text"].tolist() == ["short", long]


def test_user_integer_labels_written_as_floats_are_the_same_class(tmp_path):
    """A CSV written from a float column says 1.0 where another file says 1; JSON 1 and 1.0 are equal anyway."""
    for name, content in [
        ("i.csv", "text,label\na,1\nb,1.0\nc,0.0\n"),
        ("i.jsonl", '{"text": "a", "label": 1}\n{"text": "b", "label": 1.0}\n{"text": "c", "label": 0}\n'),
    ]:
        frame, manifest = build_corpus("mine", raw_dir=tmp_path, user_corpora=_user(tmp_path, name, content))
        assert manifest["label_names"] == ["0", "1"] and frame["label"].tolist() == [1, 1, 0], name
    # beside class names too, and with a sign (sentiment files write +1/-1)
    frame, manifest = build_corpus(
        "mine", raw_dir=tmp_path, user_corpora=_user(tmp_path, "m.csv", "text,label\na,1\nb,1.0\nc,other\nd,+1\ne,-1\n")
    )
    assert manifest["label_names"] == ["-1", "1", "other"] and frame["label"].tolist() == [1, 1, 2, 1, 0]
    # a fractional name is a class name when label_names lists it
    cfg = _user(tmp_path, "h.csv", "text,label\na,0.5\nb,1\n", label_names=["0.5", "1"])
    assert build_corpus("mine", raw_dir=tmp_path, user_corpora=cfg)[0]["label"].tolist() == [0, 1]


def test_user_integer_labels_written_as_floats_are_the_class_label_names_names(tmp_path):
    """With integer ``label_names`` an integer label is the class of that integer however it is written: a float
    column's ``1.0`` (or ``+1``) beside ``[1, 0]`` is the class ``1``, not the name at position 1; star ratings
    written 1.0…5.0 are the classes 1…5. Without integer names an integer is a position (a ``ClassLabel``)."""
    content = "text,label\na,1\nb,1.0\nc,+1\nd,0\ne,0.0\nf,00\n"
    frame, manifest = build_corpus(
        "mine", raw_dir=tmp_path, user_corpora=_user(tmp_path, "m.csv", content, label_names=[1, 0])
    )
    assert manifest["label_names"] == ["1", "0"] and frame["label"].tolist() == [0, 0, 0, 1, 1, 1]
    stars = "text,label\n" + "".join(f"{c},{s}.0\n" for c, s in zip("abcde", range(1, 6)))
    cfg = _user(tmp_path, "s.csv", stars, label_names=[1, 2, 3, 4, 5])
    assert build_corpus("mine", raw_dir=tmp_path, user_corpora=cfg)[0]["label"].tolist() == [0, 1, 2, 3, 4]
    cfg = _user(tmp_path, "p.csv", "text,label\na,1\nb,0.0\n", label_names=["neg", "pos"])
    assert build_corpus("mine", raw_dir=tmp_path, user_corpora=cfg)[0]["label"].tolist() == [1, 0]
    with pytest.raises(AttnauditError, match=r"s.csv:2: label '1.0' is not one of label_names \['2', '3'\]"):
        build_corpus("mine", raw_dir=tmp_path, user_corpora=_user(tmp_path, "s.csv", stars, label_names=[2, 3]))
    with pytest.raises(AttnauditError, match=r"label_names: '1' and '1.0' are the same integer"):
        build_corpus("mine", raw_dir=tmp_path, user_corpora=_user(tmp_path, "m.csv", content, label_names=[1, 1.0]))


def test_user_config_errors(tmp_path):
    cfg = _user(tmp_path, "c.csv", "text,label\na,1\n")
    cfg["mine"]["text_colum"] = "x"
    with pytest.raises(AttnauditError, match=r"config corpora.user.mine.text_colum: unknown key; expected one of"):
        get_spec("mine", cfg)
    with pytest.raises(AttnauditError, match="corpora.user.mine.path"):
        build_corpus(
            "mine",
            raw_dir=tmp_path,
            user_corpora={"mine": {**_user(tmp_path, "c.csv", "")["mine"], "path": str(tmp_path / "no")}},
        )
    with pytest.raises(AttnauditError, match="collides"):
        get_spec("sst", {"sst": cfg["mine"]})
    for directory in (tmp_path, tmp_path / "data.csv"):  # a name without a format's suffix, and one with it
        directory.mkdir(exist_ok=True)
        entry = {key: value for key, value in cfg["mine"].items() if key not in ("format", "text_colum")}
        with pytest.raises(AttnauditError, match=r"corpora.user.mine.path: .* is a directory"):
            build_corpus("mine", raw_dir=tmp_path, user_corpora={"mine": {**entry, "path": str(directory)}})
    missing_column = _user(tmp_path, "c.csv", "text,stars\na,1\n")
    with pytest.raises(AttnauditError, match=r"c.csv:1: the header has no column 'label' \(corpora.user.mine.label_"):
        build_corpus("mine", raw_dir=tmp_path, user_corpora=missing_column)
    bad_names = _user(tmp_path, "c.csv", "text,label\na,1\n", label_names=["a", "a"])
    with pytest.raises(
        AttnauditError,
        match=r"config corpora.user.mine.label_names: \['a', 'a'\]; expected a non-empty list of distinct",
    ):
        build_corpus("mine", raw_dir=tmp_path, user_corpora=bad_names)


def test_unknown_corpus_lists_valid_names():
    with pytest.raises(AttnauditError) as err:
        get_spec("imbd", {"mine": {}})
    for name in ["sst", "imdb", "20news", "agnews", "adr", "planted", "mine"]:
        assert name in str(err.value)


def test_registry_defaults():
    expected = {"sst": 1, "imdb": 10, "20news": 2, "agnews": 5, "adr": 2, "planted": 1}
    # QA/NLI (J&W's min_df: bAbI 1, SNLI 3, CNN 8) and MIMIC
    expected |= {"babi1": 1, "babi2": 1, "babi3": 1, "babi3_1k": 1, "snli": 3, "cnn": 8}
    expected |= {"mimic_diabetes": 5, "mimic_anemia": 5}
    assert {name: spec.defaults["min_count"] for name, spec in REGISTRY.items()} == expected
    assert REGISTRY["20news"].defaults["test_fraction"] == 0.2
    assert REGISTRY["agnews"].defaults["dev_fraction"] == 0.15


# --- CLI ----------------------------------------------------------------------------------------------------


def test_cli_writes_documents_and_manifest(tmp_path):
    from attnaudit import corpora

    parser = argparse.ArgumentParser()
    corpora.add_cli(parser.add_subparsers(dest="command"))
    out, manifest = tmp_path / "d/documents.parquet", tmp_path / "d/manifest.json"
    args = parser.parse_args(
        [
            "corpora",
            "--corpus",
            "planted",
            "--out",
            str(out),
            "--manifest",
            str(manifest),
            "--raw-dir",
            str(tmp_path / "raw"),
            "--options",
            '{"n_examples": 50}',
            "--seed",
            "7",
        ]
    )
    args.func(args)
    frame = pd.read_parquet(out)
    meta = json.loads(manifest.read_text())
    assert len(frame) == 50 and list(frame.columns) == ["id", "split", "label", "text", "important"]
    assert all(list(words) == sorted(words) for words in frame["important"])
    assert meta["seed"] == 7 and meta["counts"] == {"all": {"negative": 25, "positive": 25}}
    assert meta["label_names"] == ["negative", "positive"] and meta["source"]["kind"] == "generated"
    expected, _ = build_corpus("planted", raw_dir=tmp_path, options={"n_examples": 50}, seed=7)
    assert frame["text"].tolist() == expected["text"].tolist()

    bad = parser.parse_args(
        [
            "corpora",
            "--corpus",
            "planted",
            "--out",
            str(out),
            "--manifest",
            str(manifest),
            "--raw-dir",
            str(tmp_path),
            "--options",
            "{n_examples: 5}",
        ]
    )
    with pytest.raises(AttnauditError, match="--options"):
        bad.func(bad)


def test_mirror_from_environment(tmp_path, monkeypatch):
    folder, _ = _tree_fixture(tmp_path)
    tree = CorpusTree(
        "toy",
        "SHA256SUMS",
        _sha((folder / "SHA256SUMS").read_bytes()),
        CorpusFile("toy.tar.gz", ("file:///nonexistent/toy.tar.gz",), "0" * 64),
    )
    monkeypatch.setenv("ATTNAUDIT_MIRROR", str(tmp_path / "mirror"))
    located = fetch.fetch_corpus(_toy_spec(tree), None, tmp_path / "raw")
    assert located.root == folder and located.source["kind"] == "mirror"


def test_a_mirror_that_is_not_a_directory_is_named(tmp_path, monkeypatch):
    """A typo in the mirror path would send every corpus to the network without a word: it stops, naming where
    the path was set."""
    with pytest.raises(AttnauditError, match=r"corpora.mirror \(--mirror\): .*/nowhere is not a directory"):
        build_corpus("sst", mirror=tmp_path / "nowhere", raw_dir=tmp_path / "raw")
    monkeypatch.setenv("ATTNAUDIT_MIRROR", str(tmp_path / "nowhere"))
    with pytest.raises(AttnauditError, match=r"\$ATTNAUDIT_MIRROR: .*/nowhere is not a directory"):
        build_corpus("sst", raw_dir=tmp_path / "raw")


@pytest.mark.parametrize(
    "content, column",
    [
        ('{"text": "a", "label": "pos"}\n{"text": "smile \\ud83d", "label": "neg"}\n', "text"),
        ('{"text": "a", "label": "pos"}\n{"text": "b", "label": "neg\\udc00"}\n', "label"),
        ('{"text": "a", "label": "pos", "id": "x"}\n{"text": "b", "label": "neg", "id": "\\ud83dy"}\n', "id"),
    ],
)
def test_user_jsonl_lone_surrogate_names_line_and_column(tmp_path, content, column):
    """A lone UTF-16 surrogate (a truncated emoji) is valid JSON but no UTF-8 text: the file, line and column
    are named (it was a pyarrow UnicodeEncodeError naming none of them)."""
    cfg = _user(tmp_path, "s.jsonl", content, id_column="id" if column == "id" else None)
    with pytest.raises(AttnauditError) as err:
        build_corpus("mine", raw_dir=tmp_path, user_corpora=cfg)
    assert f"s.jsonl:2: column {column!r} is not valid Unicode: a lone UTF-16 surrogate" in str(err.value)


def test_user_csv_surrogates_name_the_line(tmp_path):
    """CSV: UTF-8 cannot hold a surrogate (a decoding error with the line); an encoding that decodes one (UTF-7)
    is named like JSONL."""
    (tmp_path / "u8.csv").write_bytes(b"text,label\na,pos\nsmile \xed\xa0\xbd,neg\n")
    cfg = {"mine": {"path": str(tmp_path / "u8.csv"), "text_column": "text", "label_column": "label"}}
    with pytest.raises(AttnauditError, match=r"u8.csv:3: cannot decode as utf-8"):
        build_corpus("mine", raw_dir=tmp_path, user_corpora=cfg)
    (tmp_path / "u7.csv").write_bytes(b"text,label\na,pos\nsmile +2D0-,neg\n")
    cfg = {"mine": {"path": str(tmp_path / "u7.csv"), "text_column": "text", "label_column": "label"}}
    cfg["mine"]["encoding"] = "utf-7"
    with pytest.raises(AttnauditError, match=r"u7.csv:3: column 'text' is not valid Unicode: a lone UTF-16 surr"):
        build_corpus("mine", raw_dir=tmp_path, user_corpora=cfg)


@needs_mirror
def test_raw_dir_under_home_is_expanded(tmp_path, monkeypatch):
    """``corpora.raw_dir: ~/…`` is the user's home, as the mirror and user corpus paths are (it used to make a
    folder named "~" and ask for a file that was already in place)."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ATTNAUDIT_MIRROR", raising=False)
    monkeypatch.chdir(tmp_path)
    raw = tmp_path / "home" / "raw" / "sst"
    raw.mkdir(parents=True)
    shutil.copy(MIRROR / "sst" / "trainDevTestTrees_PTB.zip", raw)
    documents, manifest = build_corpus("sst", raw_dir="~/raw/sst")
    assert manifest["source"]["kind"] == "raw_dir" and manifest["source"]["path"] == str(raw)
    pd.testing.assert_frame_equal(documents, build_corpus("sst", mirror=MIRROR, raw_dir=tmp_path / "unused")[0])
    assert not (tmp_path / "~").exists()


def test_a_path_under_the_home_of_no_user_is_a_missing_file(tmp_path):
    """``~alice/corpus.csv`` on a machine without a user alice is a file that does not exist, named with its key,
    where ``Path.expanduser`` raised a bare RuntimeError ("Could not determine home directory") under a traceback."""
    nobody = "~no-such-user-of-attnaudit/corpus.csv"
    entry = {"mine": {"path": nobody, "text_column": "text", "label_column": "label"}}
    with pytest.raises(ConfigKeyError, match=rf"config corpora.user.mine.path: file {nobody} does not exist"):
        build_corpus("mine", raw_dir=tmp_path, user_corpora=entry)
    with pytest.raises(AttnauditError, match=r"corpora.mirror \(--mirror\): ~no-such-user-of-attnaudit/m is not a dir"):
        fetch.mirror_path("~no-such-user-of-attnaudit/m")


def test_a_host_that_never_answers_is_tried_once(tmp_path, monkeypatch):
    """A server that accepts the connection and never answers (a firewall or dead proxy) is not retried: three
    tries of the timeout each used to hold a corpus job for minutes per URL."""
    import socket

    monkeypatch.setattr(fetch, "TIMEOUT_SECONDS", 0.2)
    monkeypatch.setattr(fetch, "BACKOFF_SECONDS", 0)
    calls, real = [], fetch._download_once
    monkeypatch.setattr(fetch, "_download_once", lambda url, tmp: calls.append(url) or real(url, tmp))
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        url = f"http://127.0.0.1:{server.getsockname()[1]}/x.csv"
        item = CorpusFile("x.csv", (url,), "0" * 64)
        with pytest.raises(AttnauditError, match=r"x.csv is missing: .* no answer within 0.2 s"):
            fetch.fetch_corpus(_toy_spec(item), None, tmp_path / "raw")
    assert calls == [url] and not list((tmp_path / "raw").rglob("*.part"))


def test_user_html_line_breaks_are_spaces_as_in_jws_imdb(tmp_path):
    """A Hugging Face export of IMDB keeps ``<br />``: read as a space, as J&W's IMDB preprocessing (and our IMDB
    reader) has it, counted in the manifest; the tokeniser would otherwise glue it to the words beside it."""
    from attnaudit.tokenise import tokenize_texts

    content = 'text,label\n"A great film.<br /><br />I loved it.",pos\n"Dull.<BR>Very<br/>dull",neg\nfine,pos\n'
    frame, manifest = build_corpus("mine", raw_dir=tmp_path, user_corpora=_user(tmp_path, "imdb.csv", content))
    assert tokenize_texts(frame["text"].tolist()[:2], lowercase=True) == [
        ["a", "great", "film", ".", "i", "loved", "it", "."],
        ["dull", ".", "very", "dull"],
    ]
    assert manifest["reader"]["documents_with_html_line_breaks"] == 2
