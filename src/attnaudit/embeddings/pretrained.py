"""User-supplied word vectors as they are distributed (J&W Appendix A initialise from FastText/GloVe vectors).

Read: word2vec text (fastText's ``.vec``), word2vec binary (``GoogleNews-vectors-negative300.bin``) and GloVe
text, which has no ``<words> <dimension>`` header line, each also compressed (``.gz``, ``.bz2``, ``.xz``: as
smart_open, gensim's file layer, opens them), and fastText's own model (``cc.en.300.bin``). The format is read from
the file's first bytes; ``binary``, if the config gives it, is checked against it. What cannot be read says what
the file is: a zip archive (GloVe and fastText ship zips) names its members.

Vectors files are read by hand rather than with gensim's ``load_word2vec_format``, which builds the matrix of every
word in the file (GoogleNews: 3M × 300 floats, 3.6 GB) and rejects GloVe 840B's lines whose word holds a space: one
pass keeps the vocabulary's words only and parses no other line's numbers. Of a fastText model the dictionary is read
and the matrix memory-mapped (:func:`read_fasttext_model`), and a word the model lacks gets the vector of its
character n-grams, as fastText's ``print-word-vectors`` gives it (Bojanowski et al. 2017).
"""

from __future__ import annotations

import gzip
import logging
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnaudit import AttnauditError, ConfigKeyError
from attnaudit.io import sha256_file
from attnaudit.specials import SPECIALS

log = logging.getLogger(__name__)

#: the first int32 of a fastText model file (``FASTTEXT_FILEFORMAT_MAGIC_INT32`` in fastText's source)
FASTTEXT_MAGIC = (793712314).to_bytes(4, "little")
HEAD_BYTES = 1 << 16  # enough for a header and a 300-d first vector in either format
SAMPLE_LINES = 10  # GloVe: its dimension is the most common count of numbers on these lines (a tie: the first's)
TEXT_BYTES = frozenset(range(0x20, 0x7F)) | {0x09, 0x0A, 0x0D}  # what text vectors are written in
#: the config key of the vectors file, relative to a dataset's block (the workflow roots it: ``keys_located``)
PRETRAINED = ("embeddings", "pretrained")


@dataclass(frozen=True)
class VectorsFormat:
    """How a vectors file is laid out: word2vec ``header`` line or none (GloVe), ``binary`` floats or text."""

    binary: bool
    header: bool
    dim: int
    fasttext_model: bool = False  # fastText's own .bin: vectors of any word, from its character n-grams

    def __str__(self) -> str:
        if self.fasttext_model:
            return "fastText model"
        return "GloVe text" if not self.header else f"word2vec {'binary' if self.binary else 'text'}"


def _opened(path: str | Path):
    from smart_open import open as smart_open

    return smart_open(str(path), "rb")


def _floats(fields: list[bytes]) -> bool:
    try:
        np.array(fields, dtype=np.float64)
    except ValueError:
        return False
    return True


def _head(path: Path) -> bytes:
    """The file's first bytes, decompressed as gensim would read them; a zip or an unnamed compression says so."""
    with path.open("rb") as handle:
        magic = handle.read(4)
    if magic.startswith(b"PK\x03\x04"):
        with zipfile.ZipFile(path) as archive:
            members = [name for name in archive.namelist() if not name.endswith("/")]
        listed = ", ".join(members[:5]) + (f" and {len(members) - 5} more" if len(members) > 5 else "")
        raise ConfigKeyError(PRETRAINED, f"{path} is a zip archive ({listed}); unzip it and name one file")
    if magic.startswith(b"\x1f\x8b") and path.suffix != ".gz":
        raise ConfigKeyError(PRETRAINED, f"{path} is gzip-compressed; name it with the suffix .gz")
    try:
        with _opened(path) as handle:
            head = handle.read(HEAD_BYTES)
    except (OSError, EOFError, gzip.BadGzipFile) as err:
        raise ConfigKeyError(PRETRAINED, f"{path} cannot be decompressed ({err})") from err
    except ImportError as err:  # smart_open reads .zst and .lz4 with packages not installed here
        raise ConfigKeyError(
            PRETRAINED,
            f"reading a {path.suffix} file needs a package this installation lacks ({err}); "
            "decompress it, or compress it as .gz, .bz2 or .xz",
        ) from err
    return head


def vectors_format(path: str | Path) -> VectorsFormat:
    """The layout of the vectors file at ``path``, from its first bytes; an error naming ``embeddings.pretrained`` and
    the file says what it is when it is no vectors file."""
    path = Path(path)
    head = _head(path)
    if head.startswith(FASTTEXT_MAGIC):  # int32 magic, int32 version, then the training args, dim first
        if len(head) < 12:
            raise ConfigKeyError(PRETRAINED, f"{path} is a fastText model cut short after its magic number")
        return VectorsFormat(binary=True, header=True, dim=int.from_bytes(head[8:12], "little"), fasttext_model=True)
    lines = head.split(b"\n")
    first = lines[0].split()
    if len(first) == 2 and all(part.isdigit() for part in first):
        dim = int(first[1])
        record = head[len(lines[0]) + 1 :]
        text_fields = record.split(b"\n", 1)[0].rstrip().split(b" ")
        if len(text_fields) == dim + 1 and _floats(text_fields[1:]):
            return VectorsFormat(binary=False, header=True, dim=dim)
        floats = record[record.find(b" ") + 1 :][: 4 * dim]
        if b" " in record and len(floats) == 4 * dim and not all(byte in TEXT_BYTES for byte in floats):
            return VectorsFormat(binary=True, header=True, dim=dim)
        raise ConfigKeyError(
            PRETRAINED,
            f"{path} has the word2vec header '{lines[0].decode(errors='replace')}' but its first "
            f"vector is neither {dim} numbers in text nor {dim} binary floats",
        )
    complete = [line.rstrip().split(b" ") for line in lines[:-1][:SAMPLE_LINES]] or [lines[0].rstrip().split(b" ")]
    if any(len(fields) < 2 or not _floats(fields[1:]) for fields in complete[:1]):
        raise ConfigKeyError(
            PRETRAINED,
            f"{path} is no vectors file: its first line is neither a word2vec header "
            "('<words> <dimension>') nor a word followed by numbers (GloVe)",
        )
    sizes = [len(fields) - 1 for fields in complete]
    return VectorsFormat(binary=False, header=False, dim=max(sizes, key=sizes.count))


def first_words(path: str | Path, n: int = 5) -> str:
    """The words of a vectors file's first ``n`` vectors (of a binary file, its first), for a message."""
    layout = vectors_format(path)
    head = _head(Path(path))
    body = head.split(b"\n", 1)[1] if layout.header else head
    if layout.binary:
        words = [body[: body.find(b" ")].lstrip(b"\n")]
    else:
        words = [line.partition(b" ")[0] for line in body.split(b"\n")[:n] if line.strip()]
    return ", ".join(repr(word.decode("utf-8", "replace")) for word in words)


def check_pretrained(path: str, dim: int, binary: bool | None) -> VectorsFormat:
    """Before any job runs: the vectors file ``path`` exists, is vectors in a format this reads, has the
    dimension the config asks for, and is binary or text as ``binary`` says (``None``: whatever it is)."""
    file = Path(path)
    if not file.is_file():
        raise ConfigKeyError(PRETRAINED, f"{'is a directory' if file.is_dir() else 'no file'} {path}")
    layout = vectors_format(file)
    if layout.fasttext_model and file.suffix in (".gz", ".bz2", ".xz"):
        raise ConfigKeyError(
            PRETRAINED,
            f"{path} is a compressed fastText model; decompress it (gunzip), as fastText's "
            "instructions say: its matrix is read straight from the file",
        )
    if layout.dim != dim:
        raise ConfigKeyError(
            ("embeddings", "dim"), f"{dim}, but the vectors in {path} ({layout}) have dimension {layout.dim}"
        )
    if binary is not None and binary != layout.binary:
        raise ConfigKeyError(
            ("embeddings", "binary"),
            f"{str(binary).lower()}, but {path} is {layout}; leave binary out (the file says) "
            f"or set it to {str(layout.binary).lower()}",
        )
    return layout


def _text_records(handle, layout: VectorsFormat, wanted: dict[bytes, str], path: Path):
    """(word, vector) of the wanted words of a text file; no other line's numbers are parsed. A word holding a
    space (GloVe 840B has some) is never a token, so its line is passed over."""
    announced = int(handle.readline().split()[0]) if layout.header else None
    lines = 0
    for number, line in enumerate(handle, start=2 if layout.header else 1):
        lines += 1
        key = line.partition(b" ")[0]
        word = wanted.get(key)
        if word is None:
            continue
        fields = line.rstrip().rsplit(b" ", layout.dim)
        if fields[0] != key:
            continue
        if len(fields) != layout.dim + 1 or not _floats(fields[1:]):
            raise AttnauditError(f"embeddings.pretrained: {path} line {number}: {word!r} has no {layout.dim} numbers")
        yield word, finite(np.array(fields[1:], dtype=np.float32), word, f"{path} line {number}")
    if announced is not None and lines < announced:  # cut off at a line's end (a download that stopped)
        raise AttnauditError(
            f"embeddings.pretrained: {path} ends after {lines} of the {announced} vectors its header announces: "
            "it was cut off; download it again"
        )


def finite(vector: np.ndarray, word: str, where: str) -> np.ndarray:
    """``vector``, or an error naming where it is if it holds NaN or infinity (a training job would diverge)."""
    if not np.isfinite(vector).all():
        bad = vector[~np.isfinite(vector)][0]
        raise AttnauditError(f"embeddings.pretrained: {where}: the vector of {word!r} holds {bad}; fix or remove it")
    return vector


def _binary_records(handle, layout: VectorsFormat, wanted: dict[bytes, str], path: Path):
    """(word, vector) of the wanted words of a word2vec binary file: ``<word> `` then ``dim`` float32 per record
    (word2vec.c ends a record with a newline, gensim does not)."""
    words = int(handle.readline().split()[0])
    width = 4 * layout.dim
    buffer, at = b"", 0
    for record in range(words):
        while (end := buffer.find(b" ", at)) < 0 or len(buffer) < end + 1 + width:
            block = handle.read(1 << 20)
            if not block:
                raise AttnauditError(
                    f"embeddings.pretrained: {path} ends after {record} of the {words} vectors its header announces"
                )
            buffer, at = buffer[at:] + block, 0
        word = wanted.get(buffer[at:end].lstrip(b"\n"))
        if word is not None:
            vector = np.frombuffer(buffer, dtype="<f4", count=layout.dim, offset=end + 1).copy()
            yield word, finite(vector, word, f"{path} vector {record + 1}")
        at = end + 1 + width


def raise_none_found(path, vocab: dict[str, int], first: str):
    """A file with none of the vocabulary's words is the wrong file: every row would stay random."""
    frequent = [word for word in sorted(vocab, key=vocab.get) if word not in SPECIALS][:5]
    raise AttnauditError(
        f"embeddings.pretrained: {path} has none of the vocabulary's {len(vocab)} words (its most frequent: "
        f"{', '.join(map(repr, frequent))}; the file's first: {first}): is it the vectors meant, in the corpus's "
        "language and casing (tokenise.lowercase)?"
    )


def load_pretrained(path: str, vocab: dict[str, int], dim: int, binary: bool | None = None, sha256: str | None = None):
    """gensim KeyedVectors of the words of ``vocab`` the vectors file at ``path`` has (a repeated word: its first
    vector), read in one pass, and the file's :class:`VectorsFormat`; ``sha256``, given by the workflow when it
    planned the job, must still be the file's. None of them in the file stops: it is the wrong file."""
    from gensim.models import KeyedVectors

    if not Path(path).exists():
        raise AttnauditError(f"embeddings.pretrained: file {path} does not exist")
    if sha256 and sha256_file(path) != sha256:
        raise AttnauditError(
            f"embeddings.pretrained: {path} changed after the workflow was planned; rerun the same command so that "
            "everything depending on it is redone"
        )
    layout = check_pretrained(path, dim, binary)
    if layout.fasttext_model:
        return _fasttext_model_vectors(path, vocab), layout
    wanted = {word.encode("utf-8"): word for word in vocab}
    records = _binary_records if layout.binary else _text_records
    found: dict[str, np.ndarray] = {}
    repeated: list[str] = []
    try:
        with _opened(path) as handle:
            for word, vector in records(handle, layout, wanted, Path(path)):
                if found.setdefault(word, vector) is not vector:
                    repeated.append(word)
    except (OSError, EOFError) as err:
        raise AttnauditError(f"embeddings.pretrained: {path} cannot be read to its end ({err})") from err
    if repeated:  # as gensim's load_word2vec_format does
        log.warning(
            "%s lists %d of the vocabulary's words more than once (e.g. %s); the first vector of each is used",
            path,
            len(set(repeated)),
            ", ".join(map(repr, sorted(set(repeated))[:5])),
        )
    if not found:
        raise_none_found(path, vocab, first_words(path))
    vectors = KeyedVectors(layout.dim)
    if found:
        vectors.add_vectors(list(found), np.stack(list(found.values())))
    return vectors, layout


@dataclass
class FastTextModel:
    """fastText's .bin as laid out by its ``FastText::saveModel``: the training arguments, the dictionary (words
    first, each with its count and entry type) and the input matrix, ``nwords`` word rows then ``bucket`` n-gram
    rows, memory-mapped (only the rows a vocabulary needs are read)."""

    words: dict[str, int]  # word → row
    nwords: int  # the n-gram rows follow the word rows
    minn: int
    maxn: int
    bucket: int
    matrix: np.ndarray  # [nwords + bucket, dim] float32, memory-mapped

    def vector(self, word: str) -> np.ndarray | None:
        """The word's vector as fastText (and gensim's ``FastTextKeyedVectors``) composes it: a word of the model,
        the mean of its own row and its n-grams' rows; another, the mean of its n-grams' rows (None without any),
        summed in float32 in gensim's order (a cumulative sum is sequential), so the vectors equal gensim's bit for
        bit."""
        from gensim.models.fasttext import ft_ngram_hashes

        hashes = ft_ngram_hashes(word, self.minn, self.maxn, self.bucket) if self.bucket else []
        rows = ([self.words[word]] if word in self.words else []) + [self.nwords + h for h in hashes]
        if not rows:
            return None
        return np.cumsum(self.matrix[rows], axis=0, dtype=np.float32)[-1] / np.float32(len(rows))


def read_fasttext_model(path: str | Path) -> FastTextModel:
    """Read the header and dictionary of fastText's model at ``path`` and map its input matrix (written by hand:
    gensim's ``load_facebook_vectors`` reads the whole model, twice the input matrix in memory, ~10 GB for
    cc.en.300.bin; its n-gram hash is used for the vectors). A supervised (classifier) or quantised (.ftz) model
    and one cut short stop, saying so (a compressed one stops in :func:`check_pretrained`)."""
    path = Path(path)
    where = f"embeddings.pretrained: {path}"
    with path.open("rb") as handle:
        data = handle.read(1 << 20)
        try:
            # int32 magic and version; twelve int32 arguments (dim, ws, epoch, minCount, neg, wordNgrams, loss,
            # model, bucket, minn, maxn, lrUpdateRate) and the double t; the dictionary's int32 size, nwords and
            # nlabels, int64 ntokens and pruneidx_size; then its entries
            dim, *_, bucket, minn, maxn, _rate = struct.unpack_from("<12i", data, 8)
            size, nwords, nlabels, _tokens, pruned = struct.unpack_from("<3i2q", data, 64)
            offset = 92
            if nlabels:
                raise AttnauditError(f"{where} is a supervised fastText model (a classifier), not word vectors")
            words: dict[str, int] = {}
            for index in range(size):
                while (end := data.find(b"\0", offset)) < 0 or len(data) < end + 10:
                    more = handle.read(1 << 20)
                    if not more:
                        raise struct.error("the dictionary ends early")
                    data, offset = data[offset:] + more, 0
                if index < nwords:
                    words.setdefault(data[offset:end].decode("utf-8", "backslashreplace"), index)
                offset = end + 10  # the word's NUL, its int64 count and int8 entry type
            start = handle.tell() - len(data) + offset + 8 * max(pruned, 0)
            handle.seek(start)
            head = handle.read(17)
            quantised, rows, columns = struct.unpack("<?2q", head)
        except struct.error as err:
            raise AttnauditError(f"{where} cannot be read as a fastText model ({err})") from err
    if quantised:
        raise AttnauditError(f"{where} is a quantised fastText model (.ftz); give the .bin it was quantised from")
    if (rows, columns) != (nwords + bucket, dim) or path.stat().st_size < start + 17 + 4 * rows * columns:
        raise AttnauditError(
            f"{where} cannot be read as a fastText model: its input matrix is not {nwords} words + {bucket} buckets "
            f"× {dim} floats to the end of the file (cut short?)"
        )
    matrix = np.memmap(path, dtype="<f4", mode="r", offset=start + 17, shape=(rows, columns))
    return FastTextModel(words=words, nwords=nwords, minn=minn, maxn=maxn, bucket=bucket, matrix=matrix)


def _fasttext_model_vectors(path: str, vocab: dict[str, int]):
    """gensim KeyedVectors of every word of ``vocab`` but the specials from fastText's model at ``path``: a word the
    model has, its vector; any other, the mean of its character n-grams' vectors (as fastText's
    ``print-word-vectors`` and gensim's ``load_facebook_vectors`` give them; a word without n-grams stays out and
    gets a seeded random row, as with other formats). A model with none of the vocabulary's words stops, as a
    vectors file does."""
    from gensim.models import KeyedVectors

    model = read_fasttext_model(path)
    words = [word for word in vocab if word not in SPECIALS]
    in_model = [word for word in words if word in model.words]
    if not in_model:  # n-grams give any word a vector, a German model's to an English corpus too
        raise_none_found(path, vocab, ", ".join(map(repr, list(model.words)[:5])))
    found = {word: finite(vector, word, path) for word in words if (vector := model.vector(word)) is not None}
    vectors = KeyedVectors(model.matrix.shape[1])
    vectors.add_vectors(list(found), np.stack(list(found.values())))
    for word in found:
        if word not in model.words:  # a per-word attribute (gensim's vecattr), counted in coverage.json
            vectors.set_vecattr(word, "from_subwords", True)
    return vectors
