"""Readers: one raw corpus → a frame of documents (``id, split, label, text`` [+ ``important``]).

Each reader returns ``(frame, info)``; ``info`` goes into ``manifest.json`` (dropped rows and why, label
mappings, ...). The label and split choices follow Jain & Wallace (2019) §3; file layouts are those of the
local mirror described in ``shared/corpora/MANIFEST.md`` (the same as the official distributions).
"""

from __future__ import annotations

import bz2
import codecs
import contextlib
import csv
import gzip
import hashlib
import io
import json
import logging
import lzma
import math
import re
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pandas as pd

from attnaudit import AttnauditError, ConfigKeyError, key_path
from attnaudit.io import home_expanded, sha256_file
from attnaudit.tokenise.tokenisation import JOINERS, clean_text

log = logging.getLogger(__name__)

SPLITS = ("train", "dev", "test")
#: other spellings of the splits (the Hugging Face datasets' "validation", capitals), named in the error they give
SPLIT_SPELLINGS = {
    "train": {"train", "training"},
    "dev": {"dev", "validation", "valid", "val", "development", "devel"},
    "test": {"test", "testing"},
}
COLUMNS = ["id", "split", "label", "text"]


def _frame(rows: list[dict], extra: tuple[str, ...] = ()) -> pd.DataFrame:
    """Rows → frame with the output contract's dtypes (id/split/text str, label int64)."""
    frame = pd.DataFrame(rows, columns=COLUMNS + list(extra))
    return frame.astype({"id": str, "split": str, "label": "int64", "text": str})


# --- SST ----------------------------------------------------------------------------------------------------

_SST_LEAF = re.compile(r"\(\d ([^()]+)\)")
_SST_ROOT = re.compile(r"^\s*\((\d)\s")
# Penn Treebank escapes used in the SST trees (brackets, slash, asterisk).
_PTB_UNESCAPE = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}"}


def open_zip(path: Path) -> zipfile.ZipFile:
    """Open a zip archive; a truncated or corrupt file becomes an :class:`AttnauditError`."""
    try:
        return zipfile.ZipFile(path)
    except (zipfile.BadZipFile, EOFError, OSError) as err:
        raise AttnauditError(f"{path}: not a readable zip archive (truncated or corrupt download?): {err}") from err


def _ptb_leaf(leaf: str) -> str:
    leaf = _PTB_UNESCAPE.get(leaf, leaf)
    return leaf.replace("\\/", "/").replace("\\*", "*")


def parse_sst_tree(line: str, where: str) -> tuple[int, str]:
    """One PTB tree → (root sentiment 0..4, leaves joined by spaces)."""
    root = _SST_ROOT.match(line)
    leaves = _SST_LEAF.findall(line)
    if not root or not leaves:
        raise AttnauditError(f"{where}: not a PTB sentiment tree (expected '(<0-4> ...)'): {line[:60]!r}")
    return int(root.group(1)), " ".join(_ptb_leaf(leaf) for leaf in leaves)


def read_member(archive: zipfile.ZipFile, path: Path, member: str) -> bytes:
    """One member of a distribution zip; a missing or corrupt member names the archive and the member."""
    try:
        return archive.read(member)
    except KeyError as err:
        raise AttnauditError(f"{path}: member {member} is missing") from err
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as err:  # CRC error, truncated member
        raise AttnauditError(f"{path}: cannot read member {member} (corrupt archive?): {err}") from err


def read_sst(root: Path) -> tuple[pd.DataFrame, dict]:
    """SST from ``trainDevTestTrees_PTB.zip`` (J&W §3): binary sentence-level sentiment.

    Root label = the tree's first number; neutral roots (2) are dropped and counted; label = 1 if root ≥ 3.
    Ids are ``sst-{split}-{line:05d}`` (0-based line of the tree file, so they are stable).
    """
    path = root / "trainDevTestTrees_PTB.zip"
    rows, dropped = [], {}
    with open_zip(path) as archive:
        for split in SPLITS:
            member = f"trees/{split}.txt"
            raw = read_member(archive, path, member)
            dropped[split] = 0
            for i, line in enumerate(raw.decode("utf-8").splitlines()):
                if not line.strip():
                    continue
                sentiment, text = parse_sst_tree(line, f"{path}:{member}:{i + 1}")
                if sentiment == 2:
                    dropped[split] += 1
                    continue
                rows.append({"id": f"sst-{split}-{i:05d}", "split": split, "label": int(sentiment >= 3), "text": text})
    return _frame(rows), {"dropped_neutral": dropped}


# --- IMDB ---------------------------------------------------------------------------------------------------

_BR = re.compile(r"<br\s*/?>", re.IGNORECASE)


def _imdb_key(path: Path) -> tuple[int, str]:
    stem = path.stem  # "<id>_<rating>"
    head = stem.split("_", 1)[0]
    return (int(head) if head.isdigit() else -1, stem)


def read_imdb(root: Path) -> tuple[pd.DataFrame, dict]:
    """aclImdb v1 (Maas et al. 2011) labelled train/test reviews; neg = 0, pos = 1.

    ``<br />`` tags become spaces. Splits stay "train"/"test": the tokeniser carves dev (J&W: 20 %), keeps
    documents under 400 tokens and samples 20 % of test (the registry's ``defaults``).
    """
    base = root / "aclImdb"
    rows = []
    for split in ("train", "test"):
        for label, polarity in enumerate(("neg", "pos")):
            folder = base / split / polarity
            files = sorted(folder.glob("*.txt"), key=_imdb_key)
            if not files:
                raise AttnauditError(f"{folder}: no review files (expected aclImdb/{split}/{polarity}/*.txt)")
            for path in files:
                text = _BR.sub(" ", path.read_text(encoding="utf-8"))
                rows.append(
                    {"id": f"imdb-{split}-{polarity}-{path.stem}", "split": split, "label": label, "text": text}
                )
    return _frame(rows), {"br_tags": "replaced by a space"}


# --- 20 Newsgroups ------------------------------------------------------------------------------------------

NEWSGROUPS = ("rec.sport.baseball", "rec.sport.hockey")


def read_20news(root: Path) -> tuple[pd.DataFrame, dict]:
    """20 Newsgroups bydate, baseball (0) vs hockey (1), train+test pooled as split "all" (J&W §3).

    Read as latin-1 and stripped of headers, footers and quotes exactly as scikit-learn's
    ``fetch_20newsgroups(subset="all", remove=("headers", "footers", "quotes"))`` does.
    """
    from sklearn.datasets._twenty_newsgroups import (
        strip_newsgroup_footer,
        strip_newsgroup_header,
        strip_newsgroup_quoting,
    )

    base = root / "20news-bydate"
    rows, per_source = [], {}
    for source in ("train", "test"):
        for label, group in enumerate(NEWSGROUPS):
            folder = base / f"20news-bydate-{source}" / group
            files = (
                sorted(
                    (p for p in folder.iterdir() if p.is_file()),
                    key=lambda p: (int(p.name) if p.name.isdigit() else -1, p.name),
                )
                if folder.is_dir()
                else []
            )
            if not files:
                raise AttnauditError(f"{folder}: no messages (expected 20news-bydate-{source}/{group}/<id>)")
            per_source[f"{source}/{group}"] = len(files)
            for path in files:
                text = path.read_bytes().decode("latin-1")
                text = strip_newsgroup_quoting(strip_newsgroup_footer(strip_newsgroup_header(text)))
                rows.append(
                    {
                        "id": f"20news-{source}-{group.rsplit('.', 1)[1]}-{path.name}",
                        "split": "all",
                        "label": label,
                        "text": text,
                    }
                )
    return _frame(rows), {"bydate_files": per_source, "removed": ["headers", "footers", "quotes"]}


# --- CSV helpers (AG News, ADR, user corpora) ---------------------------------------------------------------


class _ZstdFile(io.RawIOBase):
    """A zstd stream decompressed as it is read, by pyarrow's codec (Python's standard library has zstd only from
    3.14); rewound by starting over, as :func:`_content` rewinds a layer after reading its first bytes."""

    def __init__(self, raw: BinaryIO):
        self._raw = raw
        self.seek(0)

    @classmethod
    def open(cls, raw: BinaryIO, mode: str = "rb") -> _ZstdFile:
        return cls(raw)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self._stream.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def readall(self) -> bytes:
        return self._stream.read()

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if (offset, whence) != (0, io.SEEK_SET):
            raise io.UnsupportedOperation("a zstd stream is only rewound")
        import pyarrow

        self._raw.seek(0)
        self._stream = pyarrow.CompressedInputStream(pyarrow.PythonFile(_Borrowed(self._raw), mode="r"), "zstd")
        return 0


class _Borrowed:
    """A handle as pyarrow reads it (``read``, ``closed``) but never closes it: a rewound :class:`_ZstdFile` drops
    its stream, and collecting that stream would close the handle its owner still reads."""

    def __init__(self, raw: BinaryIO):
        self._raw = raw
        self.read = raw.read

    @property
    def closed(self) -> bool:
        return self._raw.closed

    def close(self) -> None:
        pass


#: compressed files, read as the file each holds (as pandas and zcat read them): the first bytes that say so
#: (bzip2's with the block or end-of-stream mark after the block size, so that no text starting "BZh" is taken for
#: one), the name, the suffix a file name adds to its format's (reviews.csv.gz), the module that reads it (``open``)
_COMPRESSIONS = (
    (re.compile(rb"\x1f\x8b"), "gzip", ".gz", gzip),
    (re.compile(rb"BZh[1-9](\x31\x41\x59\x26\x53\x59|\x17\x72\x45\x38\x50\x90)"), "bzip2", ".bz2", bz2),
    (re.compile(rb"\xfd7zXZ\x00"), "xz", ".xz", lzma),
    (re.compile(rb"\x28\xb5\x2f\xfd"), "zstd", ".zst", _ZstdFile),
)
COMPRESSED_SUFFIXES = tuple(suffix for _, _, suffix, _ in _COMPRESSIONS)
#: the first bytes of files that are no text in any encoding, and what to do with each (a tar archive's mark,
#: POSIX's or GNU's, is at byte 257)
_NOT_TEXT = (
    (re.compile(rb"PK\x03\x04"), "a zip archive (a spreadsheet's .xlsx is one); extract it, or save the sheet as CSV"),
    (re.compile(rb"\xd0\xcf\x11\xe0"), "an old Excel (.xls) workbook; save the sheet as CSV"),
    (re.compile(rb"7z\xbc\xaf\x27\x1c"), "a 7-Zip archive; extract it and point the path at a file in it"),
    (
        re.compile(rb".{257}ustar(\x0000|  \x00)", re.DOTALL),
        "a tar archive; extract it (tar -xf) and point the path at a file in it",
    ),
)
_HEAD_BYTES = 512
#: what reading a damaged or cut-off compressed file raises
_DECOMPRESSION_ERRORS = (EOFError, OSError, ValueError, lzma.LZMAError, zlib.error)
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def _compression(data: bytes) -> tuple[str, Any] | None:
    return next(((name, module) for magic, name, _, module in _COMPRESSIONS if magic.match(data)), None)


@contextlib.contextmanager
def _content(path: Path) -> Iterator[BinaryIO]:
    """A binary handle on what a file holds, as :func:`decode_file` reads it: a gzip, bzip2, xz or zstd file (compressed
    once or more) decompressed as it is read; one that does not decompress is named as such."""
    compression = None
    try:
        with contextlib.ExitStack() as files:
            handle = files.enter_context(path.open("rb"))
            while layer := _compression(handle.read(_HEAD_BYTES)):
                compression = layer[0]
                handle.seek(0)  # a file, or a decompressing one (which rewinds)
                handle = files.enter_context(layer[1].open(handle, "rb"))
            handle.seek(0)
            yield handle
    except _DECOMPRESSION_ERRORS as err:
        if compression is None:  # the file's own read error
            raise
        article = "an" if compression == "xz" else "a"
        raise AttnauditError(
            f"{path}: {article} {compression}-compressed file that does not decompress ({err}): it was cut off or "
            "damaged; compress the original again"
        ) from err


def _head(path: Path) -> bytes | None:
    """The first bytes of what a file holds; None if it cannot be read (said where it is read)."""
    try:
        with _content(path) as handle:
            return handle.read(_HEAD_BYTES)
    except (AttnauditError, OSError):  # damaged, or no file
        return None


def compressed(path: Path) -> bool:
    """Whether a file is gzip, bzip2, xz or zstd-compressed (by its first bytes, whatever its name)."""
    with path.open("rb") as handle:
        return _compression(handle.read(_HEAD_BYTES)) is not None


def content_sha256(path: Path) -> str:
    """The sha256 of what a file holds: its bytes, or a compressed file's decompressed bytes — a CSV compressed
    again (gzip's header holds a time, so pandas' ``to_csv("x.csv.gz")`` writes other bytes each time) hashes the
    same. Read as a stream: a cluster job's Snakemake hashes the corpus without holding it in memory."""
    with _content(path) as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _not_text(file: bytes | Path) -> str | None:
    """What a file (its bytes, or its path) whose first bytes are no text in any encoding, even decompressed, is,
    and what to do."""
    head = _head(file) if isinstance(file, Path) else file
    return next((advice for magic, advice in _NOT_TEXT if magic.match(head)), None) if head else None


def utf16_byte_order(data: bytes) -> str | None:
    """``"le"`` or ``"be"`` when every other one of the first 64 bytes is NUL (Latin text in UTF-16 without a
    byte-order mark), else None."""
    head = data[:64]
    if not any(head):
        return None
    return next((order for order, start in (("le", 1), ("be", 0)) if not any(head[start::2])), None)


def misread_utf16_advice(data: bytes, encoding: str) -> str | None:
    """What a file read as UTF-16 (``encoding``, without a byte-order mark: little-endian unless it says ``be``)
    that does not decode, or decodes into one line, is instead, if that can be told."""
    order = utf16_byte_order(data)
    if order:
        read_as = "be" if encoding.lower().endswith("be") else "le"
        return f"it is UTF-16 in the other byte order: set 'encoding: utf-16-{order}'" if order != read_as else None
    if not _decodes(data, "utf-8"):
        return None
    return "it is UTF-8 (no NUL byte between its characters), not UTF-16: remove 'encoding'"


def decode_file(path: Path, encoding: str = "utf-8") -> str:
    """Read a text file; a decoding error names the file, the line and the encoding. An archive or a
    spreadsheet is named as such (whatever the encoding, since e.g. latin-1 decodes any bytes), and so is UTF-16.
    A gzip, bzip2, xz or zstd file is read as the file it holds.
    A NUL character stops the read with its line: no text holds one, and UTF-8 would take it silently (UTF-16
    without a byte-order mark has one in every other byte; a file padded with NUL blocks was cut off by a crash).
    A file read as UTF-16 in the wrong byte order, or one that is no UTF-16 at all, decodes into one line of CJK
    characters: that is named too, with the encoding that reads it."""
    with _content(path) as handle:
        data = handle.read()
    what = _not_text(data)
    if what:
        raise AttnauditError(f"{path}: not a text file: its first bytes say it is {what}")
    normalised = encoding.lower().replace("_", "-")
    as_utf16 = normalised.startswith(("utf-16", "utf16"))
    try:
        text = data.decode("utf-8-sig" if normalised in ("utf-8", "utf8") else encoding)
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        if data.startswith(_UTF16_BOMS):
            advice = "it is UTF-16 (its first bytes are a UTF-16 byte-order mark): set the corpus's 'encoding: utf-16'"
        else:
            advice = (as_utf16 and misread_utf16_advice(data, encoding)) or encoding_advice(data, encoding)
        raise AttnauditError(f"{path}:{line}: cannot decode as {encoding} ({err.reason}); {advice}") from err
    except LookupError as err:
        raise AttnauditError(f"{path}: unknown encoding {encoding!r}") from err
    if not normalised.startswith(("utf-", "utf8", "utf16", "utf32")):
        check_declared_encoding(path, data, text, encoding)
    if as_utf16 and "\n" not in text and b"\n" in data:
        # read in the wrong byte order a line break is U+0A00; 8-bit text read as UTF-16 has none either
        advice = misread_utf16_advice(data, encoding) or "check the corpus's 'encoding'"
        raise AttnauditError(f"{path}: read as {encoding}, the file has no line break; {advice}")
    first_nul = text.find("\x00")
    if first_nul >= 0:
        line = text.count("\n", 0, first_nul) + 1
        order = utf16_byte_order(data)
        if order:
            advice = f"every other byte is NUL: UTF-16 without a byte-order mark; set 'encoding: utf-16-{order}'"
        else:
            advice = "no text holds one: remove them (tr -d '\\000'), or see whether a crash cut the file off"
        raise AttnauditError(f"{path}:{line}: NUL character(s); {advice}")
    return text


def _decodes(data: bytes, encoding: str) -> bool:
    try:
        data.decode(encoding)
    except UnicodeDecodeError:
        return False
    return True


def encoding_advice(data: bytes, encoding: str) -> str:
    """What to set for a file the corpus's ``encoding`` does not read: nothing if it is UTF-8; cp1252 (Windows'
    Western European, what Excel saves a CSV in) when that reads it, since latin-1, which reads any bytes, turns
    cp1252's quotes and dashes into control characters."""
    if not encoding.lower().replace("_", "-").startswith(("utf-8", "utf8")) and _decodes(data, "utf-8-sig"):
        return "the file is UTF-8: drop the corpus's 'encoding' (UTF-8 is the default)"
    if _decodes(data, "cp1252"):
        return (
            "set the corpus's 'encoding' to the one the file was written in; it reads as cp1252 (Windows' Western "
            "European, which Excel saves CSV files in): 'encoding: cp1252'"
        )
    return "set the corpus's 'encoding' to the one the file was written in (e.g. latin-1)"


def _line_of(text: str, position: int) -> tuple[int, str]:
    """The 1-based line of a position in a text, and that line (stripped, at most 60 characters)."""
    start, end = text.rfind("\n", 0, position) + 1, text.find("\n", position)
    shown = text[start : end if end >= 0 else len(text)].strip()
    return text.count("\n", 0, position) + 1, shown if len(shown) <= 60 else f"{shown[:59]}…"


def check_declared_encoding(path: Path, data: bytes, text: str, encoding: str) -> None:
    """Stop on a file that a declared 8-bit encoding decodes into the wrong text, which no error would show:
    UTF-8 read as latin-1 or cp1252 (``café`` becomes ``cafÃ©``; every non-ASCII byte of the file is part of a
    UTF-8 character, which text in an 8-bit encoding almost never is), and cp1252 read as latin-1 (its quotes and
    dashes become the C1 control characters U+0080–U+009F, which no text means)."""
    if not data.isascii() and _decodes(data, "utf-8-sig"):
        as_utf8 = data.decode("utf-8-sig")
        line, shown = _line_of(as_utf8, next((i for i, char in enumerate(as_utf8) if not char.isascii()), 0))
        misread = _line_of(text, sum(len(row) + 1 for row in text.split("\n")[: line - 1]))[1]
        raise AttnauditError(
            f"{path}:{line}: the file is UTF-8 (every non-ASCII byte in it is part of a UTF-8 character); read "
            f"as {encoding}, {shown!r} would be {misread!r}: drop the corpus's 'encoding' (UTF-8 is the default)"
        )
    control = re.search("[\x80-\x9f]", text)
    if control:
        line, shown = _line_of(text, control.start())
        raise AttnauditError(
            f"{path}:{line}: read as {encoding}, the text holds the control character U+{ord(control.group()):04X} "
            f"({shown!r}), which no text means; {encoding_advice(data, encoding)}"
        )


#: tab-separated values as GLUE and most NLP corpora write them (IANA text/tab-separated-values): one record per
#: line, no quoting, so a quote is part of the text
TSV = {"delimiter": "\t", "quoting": csv.QUOTE_NONE}


def csv_records(
    path: Path, encoding: str = "utf-8", n_fields: int | None = None, dialect: dict | None = None
) -> Iterator[tuple[int, list[str]]]:
    """Yield ``(first line number, fields)`` per CSV record; malformed rows raise with the 1-based line.

    ``n_fields``: required field count (default: the first record's count, i.e. the header's). ``dialect``:
    options of ``csv.reader`` (``TSV`` for tab-separated values; default: comma-separated, RFC 4180 quoting).
    """
    csv.field_size_limit(2**31 - 1)  # a document is one field: the module's default stops at 131,072 characters
    dialect = dialect or {}
    reader = csv.reader(io.StringIO(decode_file(path, encoding), newline=""), strict=True, **dialect)
    start = 1
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            hint = " (unterminated quoted field?)" if "end of data" in str(err) else ""
            raise AttnauditError(f"{path}:{start}: malformed CSV record: {err}{hint}") from err
        if n_fields is None:
            n_fields = len(fields)
        if fields and len(fields) != n_fields:
            raise AttnauditError(
                f"{path}:{start}: expected {n_fields} fields, found {len(fields)}: "
                f"{dialect.get('delimiter', ',').join(fields)[:80]!r}"
            )
        if fields:  # blank lines are not records
            yield start, fields
        start = reader.line_num + 1


# --- AG News ------------------------------------------------------------------------------------------------

AGNEWS_CLASSES = {"1": 0, "3": 1}  # World → 0, Business → 1 (J&W §3); Sports (2), Sci/Tech (4) dropped
_AG_BACKSLASHES = re.compile(r"\\+")


def agnews_text(title: str, description: str) -> str:
    """title + " " + description. In this CSV a backslash marks a line break (``second\\team``,
    ``results.\\\\Using``; also ``\\$`` for ``$``), so ``\\$`` → ``$`` and every other run of backslashes → " "."""
    text = f"{title} {description}".replace("\\$", "$")
    return _AG_BACKSLASHES.sub(" ", text)


def read_agnews_csv(path: Path, split: str) -> tuple[list[dict], int]:
    """One AG News CSV (class,title,description; no header) → kept rows and the number of rows dropped."""
    rows, dropped = [], 0
    for n, (line, (cls, title, description)) in enumerate(csv_records(path, "utf-8", n_fields=3)):
        if cls not in ("1", "2", "3", "4"):
            raise AttnauditError(f"{path}:{line}: class must be 1-4, found {cls!r}")
        if cls not in AGNEWS_CLASSES:
            dropped += 1
            continue
        rows.append(
            {
                "id": f"agnews-{split}-{n:06d}",
                "split": split,
                "label": AGNEWS_CLASSES[cls],
                "text": agnews_text(title, description),
            }
        )
    return rows, dropped


def read_agnews(root: Path) -> tuple[pd.DataFrame, dict]:
    """AG News ``train.csv``/``test.csv``: World (1) = 0 vs Business (3) = 1 (J&W §3); ids are
    ``agnews-{split}-{row:06d}`` (0-based CSV row). Both files are required."""
    rows, dropped = [], {}
    for split in ("train", "test"):
        kept, dropped[split] = read_agnews_csv(root / "ag_news_csv" / f"{split}.csv", split)
        rows += kept
    return _frame(rows), {"dropped_other_classes": dropped, "kept_classes": {"1": "World", "3": "Business"}}


# --- Twitter ADR --------------------------------------------------------------------------------------------


def read_adr(root: Path) -> tuple[pd.DataFrame, dict]:
    """J&W's preprocessed Twitter ADR CSV (``text,label,exp_split``); splits from ``exp_split``."""
    path = root / "adr_dataset.csv"
    records = csv_records(path)
    _, header = next(records)
    if header != ["text", "label", "exp_split"]:
        raise AttnauditError(f"{path}:1: expected header text,label,exp_split, found {','.join(header)}")
    rows = []
    for n, (line, (text, label, split)) in enumerate(records):
        if label not in ("0", "1") or split not in ("train", "test"):
            raise AttnauditError(
                f"{path}:{line}: expected label 0/1 and exp_split train/test, found {label!r}, {split!r}"
            )
        rows.append({"id": f"adr-{split}-{n:05d}", "split": split, "label": int(label), "text": text})
    return _frame(rows), {}


# --- planted-token synthetic corpus -------------------------------------------------------------------------

PLANTED_OPTIONS = {
    "n_examples": 2000,
    "min_len": 8,
    "max_len": 30,
    "vocab_size": 500,
    "n_marker_words": 5,
    "max_markers": 2,
}
_CONSONANTS, _VOWELS = "bdfgklmnprstvz", "aeiou"
_MARKER_STEMS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet")


def planted_vocabulary(size: int) -> list[str]:
    """Fixed filler vocabulary: the first ``size`` consonant-vowel words ``bababa, babade, ...`` (6 letters,
    letters only, since the tokeniser maps any token with a digit to ``qqq``)."""
    syllables = [c + v for c in _CONSONANTS for v in _VOWELS]
    n = len(syllables)
    if not 1 <= size <= n**3:
        raise AttnauditError(f"planted option vocab_size must be in 1..{n**3}, got {size}")
    return [syllables[i // n // n] + syllables[i // n % n] + syllables[i % n] for i in range(size)]


def planted_markers(n: int) -> tuple[list[str], list[str]]:
    """Marker words of class 0 (``negalpha``, ...) and class 1 (``posalpha``, ...); never filler words
    (fillers have 6 letters, markers at least 7)."""
    if not 1 <= n <= len(_MARKER_STEMS):
        raise AttnauditError(f"planted option n_marker_words must be in 1..{len(_MARKER_STEMS)}, got {n}")
    return [f"neg{s}" for s in _MARKER_STEMS[:n]], [f"pos{s}" for s in _MARKER_STEMS[:n]]


def generate_planted(
    seed: int,
    n_examples: int = 2000,
    min_len: int = 8,
    max_len: int = 30,
    vocab_size: int = 500,
    n_marker_words: int = 5,
    max_markers: int = 2,
) -> tuple[pd.DataFrame, dict]:
    """Synthetic corpus whose label is decided by known tokens, from ``numpy.random.default_rng(seed)``.

    Balanced labels; each document has a length uniform in [min_len, max_len] words, of which 1..max_markers
    (uniform) are marker words of its class at random positions and the rest uniform filler words.
    ``important`` lists the marker positions (whitespace-word indices). Split "all".
    """
    for key, value, low in (("n_examples", n_examples, 1), ("min_len", min_len, 1), ("max_markers", max_markers, 1)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
            raise AttnauditError(f"planted option {key} must be an integer ≥ {low}, got {value!r}")
    if not isinstance(max_len, (int, np.integer)) or max_len < min_len:
        raise AttnauditError(f"planted option max_len must be an integer ≥ min_len ({min_len}), got {max_len!r}")
    if min_len < max_markers:
        raise AttnauditError(f"planted option min_len ({min_len}) must be ≥ max_markers ({max_markers})")
    vocab = planted_vocabulary(vocab_size)
    markers = planted_markers(n_marker_words)
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.arange(n_examples) % 2)
    rows = []
    for i, label in enumerate(labels):
        length = int(rng.integers(min_len, max_len + 1))
        k = int(rng.integers(1, max_markers + 1))
        positions = sorted(int(p) for p in rng.choice(length, size=k, replace=False))
        words = [vocab[j] for j in rng.integers(0, len(vocab), size=length)]
        for position, m in zip(positions, rng.integers(0, len(markers[label]), size=k)):
            words[position] = markers[label][m]
        rows.append(
            {
                "id": f"planted-{i:05d}",
                "split": "all",
                "label": int(label),
                "text": " ".join(words),
                "important": positions,
            }
        )
    info = {
        "marker_words": {"0": markers[0], "1": markers[1]},
        "filler_vocabulary": f"first {vocab_size} of bababa, babade, ... (consonant-vowel x3)",
    }
    return _frame(rows, extra=("important",)), info


# --- user corpora -------------------------------------------------------------------------------------------

USER_KEYS = {
    "path",
    "format",
    "text_column",
    "label_column",
    "query_column",
    "candidates",
    "split_column",
    "id_column",
    "label_names",
    "encoding",
    "description",
    "defaults",
    "sha256",  # set by the workflow (what the file held when the DAG was built: content_sha256), not by the user
}
USER_REQUIRED = ("path", "text_column", "label_column")


def json_lines(text: str) -> list[str]:
    """The lines of a JSON Lines text, ended by ``\\n``, ``\\r\\n`` or ``\\r`` (which a JSON string cannot hold
    raw) only: ``str.splitlines`` would also split inside a string at U+2028, U+0085 and the other separators
    that ``json.dumps(..., ensure_ascii=False)`` writes as they are."""
    return re.split(r"\r\n?|\n", text)


def json_error(err: json.JSONDecodeError) -> str:
    """``msg: column n`` of a JSON error on one line."""
    return f"{err.msg}: column {err.colno}"


def _user_records(path: Path, fmt: str, encoding: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, record) from a CSV or TSV file with a header row or from JSON Lines (one object per line)."""
    if fmt in ("csv", "tsv"):
        records = csv_records(path, encoding, dialect=TSV if fmt == "tsv" else None)
        try:
            _, header = next(records)
        except StopIteration:
            raise AttnauditError(f"{path}: empty {fmt.upper()} file (expected a header row)") from None
        repeated = sorted({name for name in header if header.count(name) > 1})
        if repeated:
            raise AttnauditError(
                f"{path}:1: the header names column(s) {repeated} more than once; which one is meant is ambiguous, "
                "so give every column its own name"
            )
        for line, fields in records:
            yield line, dict(zip(header, fields))
        return
    for line, raw in enumerate(json_lines(decode_file(path, encoding)), start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as err:
            raise AttnauditError(f"{path}:{line}: invalid JSON ({json_error(err)})") from err
        if not isinstance(record, dict):
            whole = " (a JSON array of records? write one object per line)" if isinstance(record, list) else ""
            raise AttnauditError(
                f"{path}:{line}: expected one JSON object per line (JSON Lines), found a {type(record).__name__}{whole}"
            )
        yield line, record


_NUMBER = re.compile(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*")
#: labels that spell a missing value (R's ``NA``, pandas' ``None``/``NaN``, a spreadsheet's ``#N/A``), lower-cased
MISSING_LABELS = {"na", "n/a", "#n/a", "nan", "none", "null"}


def valid_unicode(value: str, at: str, column: str) -> str:
    """``value``, or an error naming the line and column if it holds a lone UTF-16 surrogate (JSON's
    ``"\\ud83d"`` without its pair: a truncated emoji), which no UTF-8 file or parquet column can store."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        raise AttnauditError(
            f"{at}: column {column!r} is not valid Unicode: a lone UTF-16 surrogate U+{ord(value[err.start]):04X} at "
            f"character {err.start + 1} (a truncated emoji, or half of a \\u escape pair?); fix or remove it"
        ) from None
    return value


def checked_label(label: Any, at: str, column: str, label_names: list | None) -> Any:
    """A raw label as read (a stripped string, or a JSON number), or an error naming the line: missing values
    (empty, null, NaN), JSON objects and arrays, and — unless ``label_names`` lists the classes — fractional
    numbers (a score column would make nearly every value a class of one example), are not class labels."""
    if isinstance(label, str):  # in NFC without format characters, as the documents: "café" is one class
        label = clean_text(label).strip().strip(JOINERS)
    if label is None or label == "" or (isinstance(label, float) and math.isnan(label)):
        raise AttnauditError(f"{at}: missing label in column {column!r}")
    named = label_names is not None and label in {str(name) for name in label_names}
    if isinstance(label, str) and label.lower() in MISSING_LABELS and not named:
        raise AttnauditError(
            f"{at}: label {label!r} in column {column!r} looks like a missing value (as R, pandas or a spreadsheet "
            "write one); fill it in or drop the row, or list it in label_names if it is a class"
        )
    if not isinstance(label, str | int | float):
        kind = {dict: "object", list: "array"}.get(type(label), type(label).__name__)
        raise AttnauditError(f"{at}: label in column {column!r} must be a class name or an integer, not a JSON {kind}")
    fractional = isinstance(label, float) or (isinstance(label, str) and _NUMBER.fullmatch(label))
    if label_names is None and fractional and _as_int(label) is None:
        raise AttnauditError(
            f"{at}: label {label!r} in column {column!r} is a fractional number; labels are class names or "
            "integers (list the classes in label_names if such names are meant)"
        )
    return label


def _label_mapping(
    values: list[Any], label_names: list[str] | None, where: list[str], names_key: tuple = ("label_names",)
) -> tuple[list[str], list[int]]:
    """Map raw labels to 0..C-1: via ``label_names``, else sorted unique values (numerically when all are integers).

    With ``label_names`` a label is the class it names. An integer label (``1``, ``1.0``, ``+1``) is the class of
    that integer when the names are integers too (``[1, 0]``: a float column's ``1.0`` is the class ``1``, not the
    name at position 1), and the position in the list when no name is an integer (``0``/``1`` of a Hugging Face
    ``ClassLabel`` beside ``[neg, pos]``)."""
    key = key_path(names_key)
    if label_names is not None:
        names = [str(n) for n in label_names]
        if len(set(names)) != len(names) or not names:
            raise ConfigKeyError(names_key, f"{label_names!r}; expected a non-empty list of distinct names")
        index = {n: i for i, n in enumerate(names)}
        numbered = {}  # the names that are integers, by their value
        for position, name in enumerate(names):
            if (number := _as_int(name)) is not None and numbered.setdefault(number, position) != position:
                raise ConfigKeyError(
                    names_key, f"{names[numbered[number]]!r} and {name!r} are the same integer; list each class once"
                )
        ids = []
        for value, at in zip(values, where):
            number = _as_int(value)
            if str(value) in index:
                ids.append(index[str(value)])
            elif number is not None and numbered:
                if number not in numbered:
                    raise AttnauditError(f"{at}: label {value!r} is not one of label_names {names}")
                ids.append(numbered[number])
            elif number is not None and 0 <= number < len(names):
                ids.append(number)
            else:
                raise AttnauditError(f"{at}: label {value!r} is not one of label_names {names}")
        return names, ids
    booleans = [isinstance(v, bool) for v in values]
    if any(booleans) and not all(booleans):
        raise AttnauditError(
            f"{where[booleans.index(True)]}: label true/false in a column whose other labels are not "
            f"({where[booleans.index(False)]}: {values[booleans.index(False)]!r}); is true the class 1, or a class "
            f"of its own? Write one kind of label, or list the classes in {key}"
        )
    ints = [_as_int(v) for v in values]
    # an integer is one class however it is written (1, 1.0, +1), beside names or not; true/false are JSON's names
    keys = [
        str(i) if i is not None else str(v).lower() if isinstance(v, bool) else str(v) for v, i in zip(values, ints)
    ]
    _check_case_variants(keys, where, key)
    if all(i is not None for i in ints):
        _check_unlabelled_mark(ints, -1, where, key, "Hugging Face datasets write -1 for an example without a label")
        uniques = [str(i) for i in sorted(set(ints))]
    else:
        _check_unlabelled_mark(keys, "-", where, key, "SNLI and MultiNLI write '-' for a pair without a gold label")
        uniques = sorted(set(keys))
    pos = {v: i for i, v in enumerate(uniques)}
    return uniques, [pos[k] for k in keys]


def _check_unlabelled_mark(labels: list, mark, where: list[str], key: str, who: str) -> None:
    """Stop on a few labels ``mark`` beside two classes or more: how some corpora write an example without a label
    (Hugging Face's -1: SNLI's 785 pairs without a gold label among 550,152 in train, GLUE's test splits; SNLI's
    and MultiNLI's own '-'), which would otherwise train as a class of its own. As a class in its own right (-1 of
    sentiment -1/0/1, '-' of '+'/'-') the mark is common, not rare. Integer marks: the classes must be 0…k. Beside
    NLI's classes (entailment, neutral, contradiction) '-' is never a class, however many rows have it."""
    classes = sorted(set(labels) - {mark})
    unlabelled = labels.count(mark)
    numbered = not isinstance(mark, int) or classes == list(range(len(classes)))
    nli = mark == "-" and {c.casefold() for c in classes} <= set(SNLI_LABELS)  # '-' is never an NLI class
    if unlabelled and len(classes) >= 2 and numbered and (nli or unlabelled < 0.02 * len(labels)):
        beside = f"0–{classes[-1]}" if isinstance(mark, int) else ", ".join(map(str, classes[:5]))
        raise AttnauditError(
            f"{where[labels.index(mark)]}: label {mark!r} on {unlabelled} of {len(labels)} rows, beside the classes "
            f"{beside}: {who}; drop those rows, or list the classes in {key} if {mark!r} is one"
        )


def _check_case_variants(keys: list[str], where: list[str], key: str) -> None:
    """Stop on two labels that differ only in case (``pos`` and ``Pos``): almost always one class mistyped, which
    would otherwise train as a class of its own; ``label_names`` lists them if they are two."""
    spellings: dict[str, dict[str, str]] = {}
    for label, at in zip(keys, where):
        spellings.setdefault(label.casefold(), {}).setdefault(label, at)
    for variants in spellings.values():
        if len(variants) > 1:
            (first, first_at), (second, second_at) = list(variants.items())[:2]
            raise AttnauditError(
                f"{second_at}: label {second!r} differs only in case from {first!r} ({first_at}); fix the one that is "
                f"mistyped, or list both in {key} if they are different classes"
            )


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*[-+]?\d+(\.0*)?\s*", value):  # "1.0" (a float column), "+1"
        return int(value.strip().split(".")[0])
    return None


def _format_of_suffix(path: str) -> str | None:
    """The format a file's name says (``.csv``, ``.tsv``, ``.jsonl``/``.json``), a compression's suffix after it
    or not (``reviews.csv.gz``)."""
    name = Path(path)
    if name.suffix.lower() in COMPRESSED_SUFFIXES:
        name = name.with_suffix("")
    return {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl"}.get(name.suffix.lower())


def user_format(name: str, config: dict) -> str:
    """``format`` if given, else from the file name (.csv, .tsv, .jsonl/.json, each also compressed: .csv.gz)."""
    path = home_expanded(config["path"])
    if path.is_dir():
        raise ConfigKeyError(
            ("corpora", "user", name, "path"), f"{config['path']} is a directory; expected a CSV, TSV or JSONL file"
        )
    fmt = config.get("format") or _format_of_suffix(config["path"])
    if fmt not in ("csv", "tsv", "jsonl"):
        what = _not_text(path)  # a name without a format's suffix: a workbook, an archive
        raise ConfigKeyError(
            ("corpora", "user", name, "path" if what else "format"),
            f"{config['path']} is {what}"
            if what
            else f"cannot tell the format of {config['path']}; set format: csv, tsv or jsonl",
        )
    return fmt


def without_restated_options(entry: dict) -> dict:
    """``corpora.user.<name>`` without the keys that restate what leaving them out means — the format its file's
    suffix says, no split or id column, UTF-8 — so that writing them out changes no job's parameters."""

    def restated(key: str, value: Any) -> bool:
        if key in ("query_column", "split_column", "id_column"):
            return value is None
        if key == "candidates":
            return value in (None, "all")
        if key == "format":
            return value == _format_of_suffix(entry.get("path", ""))
        if key == "encoding":
            try:
                return codecs.lookup(value).name == "utf-8"
            except LookupError:  # the reader names it
                return False
        return False

    return {key: value for key, value in entry.items() if not restated(key, value)}


def _one_column_hint(record: dict, fmt: str) -> str:
    """Why a header may have come out as one column: the file is separated by something else."""
    if len(record) != 1:
        return ""
    (header,) = record
    if fmt == "csv" and "\t" in header:
        return "; the header is one column holding tabs: for tab-separated values set format: tsv"
    if fmt in ("csv", "tsv") and ";" in header:
        return "; the header is one column holding ';': save the file comma-separated"
    if fmt == "tsv" and "," in header:
        return "; the header is one column holding commas: for comma-separated values set format: csv"
    return ""


def user_id(value: Any, at: str, column: str) -> str:
    """A document's id from ``column``, cleaned as the text is; a missing or blank id stops with its line (it would
    be the string "None" or "", and the explorer and every per-instance table key documents by id)."""
    id_text = "" if value is None else clean_text(valid_unicode(str(value), at, column))
    if not id_text.strip():
        raise AttnauditError(f"{at}: column {column!r} has no id ({value!r}); every row of id_column needs one")
    return id_text


def user_text(record: dict, column: str, at: str) -> str:
    """The text in ``column`` of a user record ('' for an empty or null cell), valid Unicode, HTML line breaks
    (``<br />``: a Hugging Face export of IMDB keeps them) as spaces, as J&W's IMDB preprocessing has them; the
    tokeniser would glue them to the words beside them (``film.<br``, ``/>i``)."""
    text = record[column]
    if text is not None and not isinstance(text, str):
        raise AttnauditError(f"{at}: column {column!r} must be text, found {type(text).__name__}")
    valid_unicode(text or "", at, column)
    return _BR.sub(" ", text or "")


def distinct_columns(name: str, config: dict) -> None:
    """Each of ``text_column``, ``label_column``, ``query_column``, ``split_column`` and ``id_column`` names a
    column of its own: a text read as its label trains one class per document, which no later check would name as
    the cause."""
    named: dict[str, str] = {}
    for option in ("text_column", "label_column", "query_column", "split_column", "id_column"):
        column = config.get(option)
        if column is None:
            continue
        if column in named:
            raise ConfigKeyError(
                ("corpora", "user", name, option),
                f"{column!r}, the column {named[column]} names too; each names a column of its own",
            )
        named[column] = option


def answers_from_passage(name: str, config: dict) -> bool:
    """``candidates: passage`` (J&W §3, their CNN model): each class is an answer word, and an instance may answer
    only the classes whose word occurs in its passage. It needs a QA corpus (``query_column``)."""
    if config.get("candidates") in (None, "all"):
        return False
    if config.get("candidates") != "passage":
        raise ConfigKeyError(
            ("corpora", "user", name, "candidates"), f"{config['candidates']!r}; expected all or passage"
        )
    if not config.get("query_column"):
        raise ConfigKeyError(
            ("corpora", "user", name, "candidates"),
            "passage masks a QA model's answers to the words of its passage; it needs query_column (the question "
            "beside the passage in text_column)",
        )
    return True


def read_user(name: str, config: dict) -> tuple[pd.DataFrame, dict]:
    """A user's own CSV/TSV/JSONL corpus declared in config: ``{path, format, text_column,
    label_column, query_column?, candidates?, split_column?, id_column?, label_names?, encoding?}``.

    With ``query_column`` the corpus is QA/NLI (J&W §3): the documents carry the query (question, hypothesis)
    beside the passage or premise in ``text``, which is what attention weighs. With ``candidates: passage`` they
    also carry the answer word (the class name), from which the model takes each instance's candidates, the
    classes whose word is in its passage (:func:`answers_from_passage`). Without ``split_column`` every row
    gets split "all" (the tokeniser makes seeded stratified splits). Empty texts and queries are kept (the
    tokeniser drops and counts them). The file's sha256 is recorded (a compressed file's, and that of what it holds)
    and, when the workflow passes the hash of what it holds that it planned with (``sha256``), checked.
    """
    path = home_expanded(config["path"])
    fmt, encoding = user_format(name, config), config.get("encoding") or "utf-8"  # a directory stops here
    if not path.is_file():
        raise ConfigKeyError(
            ("corpora", "user", name, "path"),
            f"file {path} does not exist (relative paths are relative to the working directory, {Path.cwd()})",
        )
    text_col, label_col, query_col = config["text_column"], config["label_column"], config.get("query_column")
    split_col, id_col = config.get("split_column"), config.get("id_column")
    with_answers = answers_from_passage(name, config)
    columns = {
        "text_column": text_col,
        "label_column": label_col,
        "query_column": query_col,
        "split_column": split_col,
        "id_column": id_col,
    }
    texts, queries, values, splits, ids, where = [], [], [], [], [], []
    line_breaks = 0  # documents with HTML line breaks (spaces now)
    for n, (line, record) in enumerate(_user_records(path, fmt, encoding)):
        at = f"{path}:{line}"
        for option, key in columns.items():
            if key is not None and key not in record:
                where = f"{path}:1: the header" if fmt in ("csv", "tsv") else f"{at}: the record"
                raise AttnauditError(
                    f"{where} has no column {key!r} (corpora.user.{name}.{option}; columns: {sorted(record)})"
                    + _one_column_hint(record, fmt)
                )
        label = checked_label(record[label_col], at, label_col, config.get("label_names"))
        if isinstance(label, str):
            valid_unicode(label, at, label_col)
        text = user_text(record, text_col, at)
        line_breaks += text != (record[text_col] or "")
        if query_col is not None:
            queries.append(user_text(record, query_col, at))
        split = "all"
        if split_col is not None:
            split = str(record[split_col]).strip()
            if split not in SPLITS:
                meant = next((known for known in SPLITS if split.lower() in SPLIT_SPELLINGS[known]), None)
                raise AttnauditError(
                    f"{at}: column {split_col!r} has {record[split_col]!r}; "
                    "expected one of train/dev/test (or omit split_column)"
                    + (f"; for {split!r} write {meant!r} throughout the file" if meant else "")
                )
        texts.append(text)
        values.append(label.strip() if isinstance(label, str) else label)
        splits.append(split)
        ids.append(user_id(record[id_col], at, id_col) if id_col is not None else f"{name}-{n:06d}")
        where.append(at)
    if not texts:
        raise AttnauditError(f"{path}: no documents")
    if len(set(ids)) != len(ids):
        dupes = sorted(pd.Series(ids)[pd.Series(ids).duplicated()].unique())[:5]
        raise AttnauditError(f"{path}: id_column {id_col!r} has duplicate ids, e.g. {dupes}")
    label_names, labels = _label_mapping(
        values, config.get("label_names"), where, ("corpora", "user", name, "label_names")
    )
    rows = [{"id": i, "split": s, "label": lab, "text": t} for i, s, lab, t in zip(ids, splits, labels, texts)]
    if query_col is None:
        frame = _frame(rows)
    elif with_answers:  # the answer word, as CNN's documents carry it
        rows = [{**row, "query": query, "answer": label_names[row["label"]]} for row, query in zip(rows, queries)]
        frame = _frame(rows, extra=("query", "answer"))
    else:
        frame = _frame([{**row, "query": query} for row, query in zip(rows, queries)], extra=("query",))
    mapping = {}
    for value, label in zip(values, labels):
        mapping.setdefault(str(value), label)
    digest, planned = content_sha256(path), config.get("sha256")
    if planned and digest != planned:
        raise AttnauditError(
            f"corpora.user.{name}.path: {path} changed after the workflow was planned (sha256 {digest[:12]}…, "
            f"planned {planned[:12]}…); rerun the same command so that everything depending on it is redone"
        )
    info = {
        "label_names": label_names,
        "label_mapping": mapping,
        "documents_with_html_line_breaks": line_breaks,  # replaced by spaces
        "files": [
            {
                "path": str(path.resolve()),
                **({"sha256": sha256_file(path), "content_sha256": digest} if compressed(path) else {"sha256": digest}),
                "bytes": path.stat().st_size,
                "verified": "checked against the sha256 the workflow planned with" if planned else "recorded",
            }
        ],
    }
    log.info("user corpus %s: %d documents from %s", name, len(frame), path)
    if line_breaks:
        log.info("user corpus %s: HTML line breaks (<br />) in %d documents read as spaces", name, line_breaks)
    return frame, info


# --- question answering and NLI (J&W §3, Appendix A.1): a passage, a query, an answer ------------------------
# Documents of these corpora carry a ``query`` column (the question or hypothesis, attended to by nobody: the
# passage/premise in ``text`` is what attention weighs) and, for CNN, an ``answer`` column (the answer word), from
# which the model takes its candidate set.

BABI_TASKS = {
    1: "qa1_single-supporting-fact",
    2: "qa2_two-supporting-facts",
    3: "qa3_three-supporting-facts",
}
BABI_DEV_SEED = 16377  # J&W's code: train_test_split(..., test_size=0.15, random_state=16377)
BABI_DEV_FRACTION = 0.15
_BABI_WORD = re.compile(r"[^\s.?,]+")


def babi_path(task: int, split: str, size: str = "en-10k") -> str:
    """Path of one bAbI v1.2 file relative to the mirror's ``babi/`` folder (as in the official tarball)."""
    return f"tasks_1-20_v1-2/{size}/{BABI_TASKS[task]}_{split}.txt"


def parse_babi(path: Path) -> tuple[list[dict], dict]:
    """One bAbI file → one record per question (J&W §3, their ``preprocess/bAbI``).

    Lines are ``ID text``; a question line is ``ID question?<TAB>answer<TAB>supporting ids``; a story restarts at
    ID 1. The passage is every earlier story sentence of the story (without its full stop) joined by " . ",
    the query the question without "?". A line whose ID neither restarts the story (1) nor follows the previous
    line stops the run with the file and line (a story that never resets, or a damaged file); so does a malformed
    question line. Questions whose answer is not a word of their story are kept and counted
    (``answer_not_in_story``); stories that end without a question are counted.
    """
    records, previous, story, asked = [], 0, [], True
    counts = {"questions": 0, "stories": 0, "answer_not_in_story": 0, "stories_without_question": 0}
    for line_no, raw in enumerate(decode_file(path).splitlines(), start=1):
        if not raw.strip():
            continue
        head, _, rest = raw.partition(" ")
        if not head.isdigit() or not rest.strip():
            raise AttnauditError(f"{path}:{line_no}: expected '<ID> <text>', found {raw[:60]!r}")
        number = int(head)
        if number == 1:
            counts["stories"] += 1
            counts["stories_without_question"] += 0 if asked else 1
            story, asked = [], False
        elif number != previous + 1:
            raise AttnauditError(
                f"{path}:{line_no}: line ID {number} follows ID {previous}: a story must restart at ID 1 and "
                "number its lines consecutively (a story that never resets, or lines missing)"
            )
        previous = number
        if "\t" not in rest:
            story.append(rest.strip().rstrip(".").strip())
            continue
        fields = rest.split("\t")
        if len(fields) < 2 or not fields[0].strip().endswith("?") or not fields[1].strip():
            raise AttnauditError(f"{path}:{line_no}: expected 'question?<TAB>answer<TAB>support', found {rest[:60]!r}")
        question, answer = fields[0].strip().rstrip("?").strip(), fields[1].strip().lower()
        if not story:
            raise AttnauditError(f"{path}:{line_no}: a question before any story sentence")
        words = {w.lower() for s in story for w in _BABI_WORD.findall(s)}
        counts["questions"] += 1
        counts["answer_not_in_story"] += answer not in words
        asked = True
        records.append({"line": line_no, "text": " . ".join(story), "query": question, "answer": answer})
    counts["stories_without_question"] += 0 if asked else 1
    return records, counts


def read_babi(root: Path, task: int, size: str = "en-10k") -> tuple[pd.DataFrame, dict]:
    """bAbI task ``task`` (1–3) of v1.2 ``size`` (J&W: en-10k): official train/test, 15 % of train → dev with
    J&W's random_state 16377; label = the answer's index in the answer vocabulary, which is every word of the
    task's files (J&W: all words, all-ones candidate mask). Ids ``babi{task}-{split}-{line:06d}``."""
    from sklearn.model_selection import train_test_split

    parsed, info = {}, {"size": size, "questions": {}}
    for split in ("train", "test"):
        parsed[split], info["questions"][split] = parse_babi(root / babi_path(task, split, size))
        if not parsed[split]:
            raise AttnauditError(f"{root / babi_path(task, split, size)}: no questions")
    vocabulary = sorted(
        {w.lower() for recs in parsed.values() for r in recs for w in _BABI_WORD.findall(f"{r['text']} {r['query']}")}
        | {r["answer"] for recs in parsed.values() for r in recs}
    )
    index = {w: i for i, w in enumerate(vocabulary)}
    _, dev = train_test_split(np.arange(len(parsed["train"])), test_size=BABI_DEV_FRACTION, random_state=BABI_DEV_SEED)
    dev = set(dev.tolist())
    rows = []
    for split, recs in parsed.items():
        for n, r in enumerate(recs):
            s = "dev" if split == "train" and n in dev else split
            rows.append(
                {
                    "id": f"babi{task}-{split}-{r['line']:06d}",
                    "split": s,
                    "label": index[r["answer"]],
                    "text": r["text"],
                    "query": r["query"],
                }
            )
    info |= {
        "label_names": vocabulary,
        "dev": {"fraction": BABI_DEV_FRACTION, "random_state": BABI_DEV_SEED, "from": "train"},
    }
    return _frame(rows, extra=("query",)).astype({"query": str}), info


SNLI_LABELS = ("neutral", "contradiction", "entailment")  # J&W's order (their Table 1: classes 0/1/2)


def read_snli_jsonl(path: Path | str, split: str, text: str | None = None) -> tuple[list[dict], dict]:
    """One ``snli_1.0_<split>.jsonl``: premise ``sentence1`` (attended), hypothesis ``sentence2`` (the query).
    Rows with gold_label "-" (no annotator majority) are dropped and counted; a row without a premise or
    hypothesis, or with an unknown label, stops with the file and line."""
    rows, dropped = [], 0
    text = decode_file(Path(path)) if text is None else text
    for line_no, raw in enumerate(json_lines(text), start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as err:
            raise AttnauditError(f"{path}:{line_no}: invalid JSON ({json_error(err)})") from err
        gold = record.get("gold_label")
        if gold == "-":
            dropped += 1
            continue
        if gold not in SNLI_LABELS:
            raise AttnauditError(f"{path}:{line_no}: gold_label {gold!r} is not one of {SNLI_LABELS} or '-'")
        for key in ("sentence1", "sentence2"):
            if not isinstance(record.get(key), str) or not record[key].strip():
                role = "premise" if key == "sentence1" else "hypothesis"
                raise AttnauditError(f"{path}:{line_no}: no {role} ({key} missing or empty)")
        pair = str(record.get("pairID") or f"{line_no:07d}")
        rows.append(
            {
                "id": f"snli-{split}-{pair}",
                "split": split,
                "label": SNLI_LABELS.index(gold),
                "text": record["sentence1"],
                "query": record["sentence2"],
            }
        )
    return rows, {"dropped_no_gold_label": dropped}


def read_snli(root: Path) -> tuple[pd.DataFrame, dict]:
    """SNLI 1.0 from the official ``snli_1.0.zip`` (members ``snli_1.0/snli_1.0_{train,dev,test}.jsonl``)."""
    path = root / "snli_1.0.zip"
    rows, info = [], {}
    with open_zip(path) as archive:
        for split in SPLITS:
            member = f"snli_1.0/snli_1.0_{split}.jsonl"
            data = read_member(archive, path, member)
            kept, info[split] = read_snli_jsonl(f"{path}:{member}", split, data.decode("utf-8"))
            rows += kept
    return _frame(rows, extra=("query",)), {"per_split": info, "label_order": list(SNLI_LABELS)}


_ENTITY = re.compile(r"@entity\d+")


def read_cnn_file(path: Path, split: str) -> tuple[list[dict], dict]:
    """Chen et al. (2016)'s ``cnn/<split>.txt``: blocks separated by blank lines, line 0 the question (with
    ``@placeholder``), line 1 the answer entity, line 2 the passage. The candidates are the passage's ``@entity``
    tokens (J&W). A block whose passage has no @entity, or whose answer is not among them, is dropped and
    counted; a block without three lines stops with the file and line."""
    rows, counts = [], {"blocks": 0, "no_entity_in_passage": 0, "answer_not_in_passage": 0}
    lines = decode_file(path).splitlines()
    start = 0
    while start < len(lines):
        while start < len(lines) and not lines[start].strip():
            start += 1
        if start >= len(lines):
            break
        end = start
        while end < len(lines) and lines[end].strip():
            end += 1
        block = lines[start:end]
        if len(block) < 3:
            raise AttnauditError(
                f"{path}:{start + 1}: a block needs 3 lines (question, answer, passage), found {len(block)}"
            )
        question, answer, passage = (s.strip() for s in block[:3])
        counts["blocks"] += 1
        entities = set(_ENTITY.findall(passage))
        if not entities:
            counts["no_entity_in_passage"] += 1
        elif answer not in entities:
            counts["answer_not_in_passage"] += 1
        else:
            rows.append(
                {
                    "id": f"cnn-{split}-{start + 1:08d}",
                    "split": split,
                    "text": passage,
                    "query": question,
                    "answer": answer,
                }
            )
        start = end
    return rows, counts


def read_cnn(root: Path) -> tuple[pd.DataFrame, dict]:
    """CNN cloze QA (Hermann et al. 2015) in Chen et al.'s format: ``cnn/{train,dev,test}.txt``. Label = the
    answer's index among every ``@entity`` of the corpus (sorted by number); the model masks its logits to the
    passage's entities (J&W: candidates = the passage's @entity tokens)."""
    rows, info = [], {}
    for split in SPLITS:
        kept, info[split] = read_cnn_file(root / "cnn" / f"{split}.txt", split)
        rows += kept
    entities = sorted(
        {r["answer"] for r in rows} | {e for r in rows for e in _ENTITY.findall(r["text"])},
        key=lambda e: int(e.removeprefix("@entity")),
    )
    index = {e: i for i, e in enumerate(entities)}
    for r in rows:
        r["label"] = index[r["answer"]]
    frame = _frame(rows, extra=("query", "answer"))
    return frame, {"blocks": info, "label_names": entities}


# --- MIMIC-III (J&W §3: Diabetes, Anemia), from a user-supplied directory -------------------------------------

MIMIC_TABLES = {
    "NOTEEVENTS": ("ROW_ID", "SUBJECT_ID", "HADM_ID", "CATEGORY", "TEXT"),
    "DIAGNOSES_ICD": ("ROW_ID", "SUBJECT_ID", "HADM_ID", "SEQ_NUM", "ICD9_CODE"),
}
MIMIC_OPTIONS = {"path": None}


def mimic_table(directory: Path, table: str) -> Path:
    """``<TABLE>.csv`` or ``<TABLE>.csv.gz`` (the PhysioNet release ships gzipped CSVs)."""
    for name in (f"{table}.csv.gz", f"{table}.csv"):
        if (directory / name).is_file():
            return directory / name
    raise AttnauditError(
        f"{directory}: MIMIC-III table {table} is missing (expected {table}.csv.gz or {table}.csv; the reader needs "
        f"{', '.join(f'{t}.csv[.gz]' for t in MIMIC_TABLES)})"
    )


def _read_mimic_table(path: Path, table: str) -> pd.DataFrame:
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = [c for c in MIMIC_TABLES[table] if c not in frame.columns]
    if missing:
        raise AttnauditError(
            f"{path}:1: MIMIC-III {table} is missing column(s) {missing} (header: {list(frame.columns)})"
        )
    return frame


def read_mimic(task: str, options: dict) -> tuple[pd.DataFrame, dict]:
    """MIMIC-III discharge summaries (``NOTEEVENTS``, CATEGORY "Discharge summary") with the admission's ICD-9
    codes (``DIAGNOSES_ICD``), J&W §3: ``diabetes`` — 1 if the admission has a code 250.xx, else 0;
    ``anemia`` — admissions with acute posthemorrhagic anemia (285.1, label 0) or anemia in chronic disease
    (285.2x, label 1); admissions with both are dropped and counted. Several summaries of one admission are
    joined in ROW_ID order. attnaudit never downloads MIMIC (credentialed access): ``options.path`` is the folder.
    Split "all": the tokeniser draws test and dev splits (J&W's own splits are not published)."""
    if not options.get("path"):
        raise AttnauditError(
            f"corpus mimic_{task}: set corpora.options.mimic_{task}.path to a MIMIC-III folder holding "
            f"{', '.join(f'{t}.csv[.gz]' for t in MIMIC_TABLES)} (PhysioNet, credentialed access)"
        )
    directory = home_expanded(options["path"])
    if not directory.is_dir():
        raise AttnauditError(f"corpus mimic_{task}: {directory} is not a directory")
    paths = {t: mimic_table(directory, t) for t in MIMIC_TABLES}
    notes = _read_mimic_table(paths["NOTEEVENTS"], "NOTEEVENTS")
    codes = _read_mimic_table(paths["DIAGNOSES_ICD"], "DIAGNOSES_ICD")
    notes = notes[(notes["CATEGORY"].str.strip() == "Discharge summary") & (notes["HADM_ID"] != "")]
    notes = notes.assign(_row=pd.to_numeric(notes["ROW_ID"])).sort_values("_row")
    text = notes.groupby("HADM_ID", sort=True)["TEXT"].agg("\n".join)
    by_admission = codes.groupby("HADM_ID")["ICD9_CODE"].agg(lambda s: {c.strip() for c in s})
    counts = {"admissions_with_summary": int(len(text)), "no_codes": 0, "both_anemia_types": 0, "not_selected": 0}
    rows = []
    for hadm, summary in text.items():
        icd = by_admission.get(hadm)
        if icd is None:
            counts["no_codes"] += 1
            continue
        if task == "diabetes":
            label = int(any(c.startswith("250") for c in icd))
        else:
            acute, chronic = "2851" in icd, any(c.startswith("2852") for c in icd)
            if acute and chronic:
                counts["both_anemia_types"] += 1
                continue
            if not (acute or chronic):
                counts["not_selected"] += 1
                continue
            label = int(chronic)
        rows.append({"id": f"mimic_{task}-{hadm}", "split": "all", "label": label, "text": summary})
    if not rows:
        raise AttnauditError(f"corpus mimic_{task}: no admission in {directory} is selected ({counts})")
    files = [
        {
            "path": str(p.resolve()),
            "sha256": sha256_file(p),
            "bytes": p.stat().st_size,
            "verified": "recorded (credentialed user data, no pinned checksum)",
        }
        for p in paths.values()
    ]
    return _frame(rows), {"selection": counts, "files": files}
