import gzip
import importlib.util
import json
import lzma
import zipfile
from pathlib import Path

import numpy as np
import pytest
from gensim.models import FastText
from gensim.models.fasttext import load_facebook_vectors, save_facebook_model

from attnaudit import AttnauditError
from attnaudit.data import PAD
from attnaudit.embeddings import aligned_matrix, load_pretrained, run, vectors_format
from attnaudit.io import read_json
from attnaudit.specials import SPECIALS


def test_trained_vectors_are_deterministic_and_aligned(planted_dataset, tmp_path):
    run(str(planted_dataset / "dataset"), str(tmp_path / "a"), {"dim": 8, "epochs": 2}, seed=1)
    run(str(planted_dataset / "dataset"), str(tmp_path / "b"), {"dim": 8, "epochs": 2}, seed=1)
    a, b = np.load(tmp_path / "a" / "matrix.npy"), np.load(tmp_path / "b" / "matrix.npy")
    vocab = read_json(planted_dataset / "dataset" / "vocab.json")
    assert a.shape == (len(vocab), 8)
    np.testing.assert_array_equal(a, b)
    assert not a[vocab[PAD]].any()
    assert read_json(tmp_path / "a" / "coverage.json")["coverage"] > 0.9


@pytest.mark.parametrize("method", ["word2vec", "fasttext"])
def test_a_min_count_that_leaves_no_word_to_train_is_named(planted_dataset, tmp_path, method):
    """An ``embeddings.min_count`` above every train word's count stops naming the option and the most frequent word
    (gensim says "you must first build vocabulary before training the model"; the sentence markers, in every
    sentence, would be all it trains)."""
    dataset = str(planted_dataset / "dataset")
    with pytest.raises(AttnauditError) as err:
        run(dataset, str(tmp_path / "a"), {"dim": 8, "epochs": 1, "min_count": 10**6, "method": method}, seed=1)
    message = str(err.value)
    assert message.startswith(f"embeddings.min_count: 1000000 leaves {method} no word to train"), message
    assert message.endswith("times); lower it") and "'<s>'" not in message, message
    count = int(message.split("occurs ")[1].split(" ")[0])
    run(dataset, str(tmp_path / "b"), {"dim": 8, "epochs": 1, "min_count": count, "method": method}, seed=1)
    assert read_json(tmp_path / "b" / "coverage.json")["found"] >= 1  # at that count the word is trained


def test_pretrained_text_vectors_and_oov_rows_from_a_seeded_normal(tmp_path):
    path = tmp_path / "vectors.txt"
    path.write_text("2 3\nfilm 1 2 3\ngood 0.5 0.5 0.5\n")
    vocab = {PAD: 0, "<unk>": 1, "film": 2, "nope": 3}
    vectors, _ = load_pretrained(str(path), vocab, 3)
    matrix, coverage = aligned_matrix(vectors, vocab, 3, seed=0)
    np.testing.assert_allclose(matrix[2], [1, 2, 3])
    assert coverage["found"] == 1
    again, _ = aligned_matrix(vectors, vocab, 3, seed=0)
    np.testing.assert_array_equal(matrix, again)


def test_bad_pretrained_file_is_a_clear_error(tmp_path):
    path = tmp_path / "broken.txt"
    path.write_text("not a header\n")
    with pytest.raises(AttnauditError, match="broken.txt is no vectors file"):
        load_pretrained(str(path), {PAD: 0}, 3)
    good = tmp_path / "v.txt"
    good.write_text("1 3\nfilm 1 2 3\n")
    with pytest.raises(AttnauditError, match=r"embeddings.dim: 300, but .* \(word2vec text\) have dimension 3"):
        load_pretrained(str(good), {PAD: 0}, 300)


def test_an_unknown_option_is_named(planted_dataset, tmp_path):
    """The CLI runs without the workflow's schema: a typo in --options stops instead of training the defaults."""
    with pytest.raises(AttnauditError, match=r"^config embeddings\.dimm: unknown option; expected one of method, dim"):
        run(str(planted_dataset / "dataset"), str(tmp_path / "out"), {"dimm": 10}, seed=0)


# -- user vectors as they are distributed ------------------------------------------------------------------------
WORDS = ["the", ",", "film", "café", "n't", "<unk>", "good"]


def reference_vectors(dim: int = 5):
    """Vectors written by gensim's own word2vec writer, the reference every layout must read back to."""
    from gensim.models import KeyedVectors

    vectors = KeyedVectors(dim)
    rows = np.random.default_rng(0).standard_normal((len(WORDS), dim)).astype(np.float32)
    rows[2] = 0.0  # a zero vector is binary NUL bytes
    vectors.add_vectors(WORDS, rows)
    return vectors


def glove(path, vectors, opener=open):
    """GloVe's text layout: the word2vec text without its header line."""
    with opener(path, "wt", encoding="utf-8") as handle:
        for word in vectors.index_to_key:
            handle.write(word + " " + " ".join(repr(float(x)) for x in vectors[word]) + "\n")


def word2vec_c_binary(path, vectors):
    """word2vec.c's binary layout, which ends every record with a newline (gensim's writer does not)."""
    with open(path, "wb") as handle:
        handle.write(f"{len(vectors)} {vectors.vector_size}\n".encode())
        for word in vectors.index_to_key:
            handle.write(word.encode() + b" " + vectors[word].astype("<f4").tobytes() + b"\n")


LAYOUTS = {
    "vectors.vec": ("word2vec text", lambda path, v: v.save_word2vec_format(str(path))),
    "vectors.vec.gz": ("word2vec text", lambda path, v: v.save_word2vec_format(str(path))),
    "vectors.bin": ("word2vec binary", lambda path, v: v.save_word2vec_format(str(path), binary=True)),
    "vectors.bin.bz2": ("word2vec binary", lambda path, v: v.save_word2vec_format(str(path), binary=True)),
    "word2vec_c.bin": ("word2vec binary", word2vec_c_binary),
    "glove.6B.5d.txt": ("GloVe text", glove),
    "glove.txt.xz": ("GloVe text", lambda path, v: glove(path, v, lzma.open)),
}


@pytest.mark.parametrize("name", LAYOUTS)
def test_every_layout_of_vectors_reads_back_what_gensim_wrote(tmp_path, name):
    """word2vec text and binary (gensim's and word2vec.c's), GloVe without a header, compressed or not: the format
    is read off the file, and the vocabulary's words come back bit-identical; the rest is not kept."""
    layout, write = LAYOUTS[name]
    reference = reference_vectors()
    write(tmp_path / name, reference)
    assert str(vectors_format(tmp_path / name)) == layout
    vocab = {PAD: 0, "film": 1, "café": 2, "good": 3, "<unk>": 4, "unseen": 5}
    vectors, read = load_pretrained(str(tmp_path / name), vocab, 5)
    assert str(read) == layout and sorted(vectors.index_to_key) == sorted(["film", "café", "good", "<unk>"])
    for word in vectors.index_to_key:
        np.testing.assert_array_equal(vectors[word], reference[word])
    with pytest.raises(AttnauditError, match=rf"embeddings.binary: {str(not read.binary).lower()}, but .*{name}"):
        load_pretrained(str(tmp_path / name), vocab, 5, binary=not read.binary)


ENGLISH = [["the", "film", "was", "good"], ["a", "bad", "film"], ["good", "acting", "and", "a", "good", "plot"]]


def fasttext_model(path, dim: int = 5, sentences=ENGLISH):
    """A fastText model trained by gensim and written in fastText's own .bin format (gensim's writer)."""
    model = FastText(vector_size=dim, min_count=1, bucket=2000, min_n=3, max_n=5, workers=1, seed=1)
    model.build_vocab(sentences * 20)
    model.train(sentences * 20, total_examples=20 * len(sentences), epochs=5)
    save_facebook_model(model, str(path))
    return model


def test_a_fasttext_model_gives_words_it_lacks_their_subword_vectors(tmp_path, planted_dataset):
    """fastText's own .bin (cc.en.300.bin): its words read back as the model has them, and a word it lacks gets the
    vector fastText composes from its character n-grams (the trained model's own ``wv[word]``); the specials keep
    their seeded rows, and coverage.json counts the composed words apart."""
    model = fasttext_model(tmp_path / "cc.en.5.bin")
    layout = vectors_format(tmp_path / "cc.en.5.bin")
    assert (str(layout), layout.dim, layout.binary) == ("fastText model", 5, True)
    vocab = {PAD: 0, "<unk>": 1, "film": 2, "films": 3, "goodness": 4, "good": 5}
    vectors, _ = load_pretrained(str(tmp_path / "cc.en.5.bin"), vocab, 5)
    assert vectors.index_to_key == ["film", "films", "goodness", "good"]
    assert "films" not in model.wv.key_to_index
    whole = load_facebook_vectors(str(tmp_path / "cc.en.5.bin"))  # gensim's reader, the whole model in memory
    for word in vectors.index_to_key:
        np.testing.assert_array_equal(vectors[word], whole[word])
        np.testing.assert_allclose(vectors[word], model.wv[word], rtol=0, atol=1e-6)
    with pytest.raises(
        AttnauditError, match=r"embeddings.dim: 300, but .*cc.en.5.bin \(fastText model\) have dimension 5"
    ):
        load_pretrained(str(tmp_path / "cc.en.5.bin"), vocab, 300)

    dataset = planted_dataset / "dataset"
    words = [w for w in read_json(dataset / "vocab.json") if w not in SPECIALS]
    fasttext_model(tmp_path / "planted.bin", dim=8, sentences=[words[::2]])  # knows every other word
    run(str(dataset), str(tmp_path / "out"), {"dim": 8, "pretrained": str(tmp_path / "planted.bin")}, seed=0)
    coverage = read_json(tmp_path / "out" / "coverage.json")
    assert coverage["format"] == "fastText model"
    assert (coverage["found"], coverage["from_subwords"]) == (len(words), len(words[1::2]))
    german = fasttext_model(tmp_path / "cc.de.5.bin", sentences=[["der", "film", "war", "gut"]])
    with pytest.raises(AttnauditError, match=r"cc.de.5.bin has none of the vocabulary's 4 words .*'der'"):
        load_pretrained(str(tmp_path / "cc.de.5.bin"), {PAD: 0, "films": 1, "goodness": 2, "bad": 3}, 5)
    assert "films" in german.wv  # n-grams would have given it a vector

    packed = tmp_path / "cc.en.5.bin.gz"
    packed.write_bytes(gzip.compress((tmp_path / "cc.en.5.bin").read_bytes()))
    assert str(vectors_format(packed)) == "fastText model"
    with pytest.raises(AttnauditError, match=r"cc.en.5.bin.gz is a compressed fastText model; decompress it"):
        load_pretrained(str(packed), vocab, 5)
    supervised = bytearray((tmp_path / "cc.en.5.bin").read_bytes())
    supervised[72:76] = (2).to_bytes(4, "little")  # the dictionary's label count: a classifier's model
    (tmp_path / "classifier.bin").write_bytes(supervised)
    with pytest.raises(AttnauditError, match=r"classifier.bin is a supervised fastText model \(a classifier\)"):
        load_pretrained(str(tmp_path / "classifier.bin"), vocab, 5)
    cut = tmp_path / "cut.bin"
    cut.write_bytes((tmp_path / "cc.en.5.bin").read_bytes()[:5000])
    with pytest.raises(AttnauditError, match=r"cut.bin cannot be read as a fastText model"):
        load_pretrained(str(cut), vocab, 5)


def test_a_model_written_by_fasttext_reads_as_fasttext_gives_its_vectors():
    """``tests/data/fasttext``: a model written by fastText's own C++ code (0.9.3, ``make.py``) and the vectors its
    ``get_word_vector`` gives, of words in the model and of words it composes from n-grams: read by attnaudit, the
    same vectors, to float32 rounding (fastText scales by 1/n where gensim and we divide by n)."""
    fixture = Path(__file__).parent / "data" / "fasttext"
    reference = json.loads((fixture / "vectors.json").read_text())
    vocab = {PAD: 0, **{word: i + 1 for i, word in enumerate(reference["vectors"])}}
    vectors, layout = load_pretrained(str(fixture / "small.bin"), vocab, 8)
    assert str(layout) == "fastText model" and vectors.index_to_key == list(reference["vectors"])
    assert [w for w in vectors.index_to_key if not vectors.get_vecattr(w, "from_subwords")] == reference["in_model"]
    for word, expected in reference["vectors"].items():
        np.testing.assert_allclose(vectors[word], np.float32(expected), rtol=3e-7, atol=1e-8)


def test_glove_words_with_spaces_and_repeated_words(tmp_path):
    """GloVe 840B has words that hold spaces ('at name@domain.com'), which gensim's reader rejects: such a line is
    never a token's and is passed over; a repeated word keeps its first vector, as gensim does."""
    path = tmp_path / "glove.840B.3d.txt"
    path.write_text("the 1 2 3\nat name@domain.com 9 9 9\nat 4 5 6\nthe 7 8 9\n. . . 0.5 0.5 0.5\n")
    vectors, layout = load_pretrained(str(path), {"the": 0, "at": 1, ".": 2}, 3)
    assert (layout.header, layout.dim) == (False, 3)
    assert vectors.index_to_key == ["the", "at"]
    np.testing.assert_array_equal(vectors["at"], [4, 5, 6])
    np.testing.assert_array_equal(vectors["the"], [1, 2, 3])
    path.write_text("the 1 2 3\nof 1 1 1\nat 4 5\n")
    with pytest.raises(AttnauditError, match=r"line 3: 'at' has no 3 numbers"):
        load_pretrained(str(path), {"the": 0, "at": 1}, 3)


def test_vectors_cut_off_or_not_finite_stop_with_their_place(tmp_path, caplog):
    """A word2vec text file cut off at a line's end (a download that stopped) reads as fewer vectors than its header
    announces, and a NaN or infinity in a vector would make training diverge with no word of the file: both stop
    naming the file, and the line or record; a word listed twice keeps its first vector with a warning."""
    from gensim.models import KeyedVectors

    path = tmp_path / "cut.vec"
    path.write_text("5000 3\nthe 1 2 3\nat 4 5 6\n")
    with pytest.raises(AttnauditError, match=r"cut.vec ends after 2 of the 5000 vectors its header announces"):
        load_pretrained(str(path), {"the": 0, "at": 1}, 3)
    path.write_text("3 3\nthe 1 2 3\nof nan 1 1\nat 4 inf 6\n")
    with pytest.raises(AttnauditError, match=r"cut.vec line 4: the vector of 'at' holds inf"):
        load_pretrained(str(path), {"the": 0, "at": 1}, 3)
    assert load_pretrained(str(path), {"the": 0}, 3)[0].index_to_key == ["the"]  # a NaN of a word not used
    binary = tmp_path / "nan.bin"
    written = KeyedVectors(3)
    written.add_vectors(["the", "at"], np.array([[1, 2, 3], [4, np.nan, 6]], dtype=np.float32))
    written.save_word2vec_format(str(binary), binary=True)
    with pytest.raises(AttnauditError, match=r"nan.bin vector 2: the vector of 'at' holds nan"):
        load_pretrained(str(binary), {"the": 0, "at": 1}, 3)
    path.write_text("3 3\nthe 1 2 3\nat 4 5 6\nthe 7 8 9\n")
    with caplog.at_level("WARNING"):
        vectors, _ = load_pretrained(str(path), {"the": 0, "at": 1}, 3)
    np.testing.assert_array_equal(vectors["the"], [1, 2, 3])
    assert "lists 1 of the vocabulary's words more than once (e.g. 'the')" in caplog.text


def test_vectors_files_that_are_something_else_say_what_they_are(tmp_path):
    reference = reference_vectors()
    text = tmp_path / "wiki-news-300d-1M.vec"
    reference.save_word2vec_format(str(text))
    archive = tmp_path / "wiki-news-300d-1M.vec.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        handle.write(text, text.name)
    with pytest.raises(AttnauditError, match=r"is a zip archive \(wiki-news-300d-1M.vec\); unzip it"):
        vectors_format(archive)
    unnamed = tmp_path / "vectors.txt"
    unnamed.write_bytes(gzip.compress(text.read_bytes()))
    with pytest.raises(AttnauditError, match="vectors.txt is gzip-compressed; name it with the suffix .gz"):
        vectors_format(unnamed)
    if importlib.util.find_spec("zstandard") is None:  # smart_open reads .zst with it
        zstd = tmp_path / "vectors.vec.zst"
        zstd.write_bytes(b"\x28\xb5\x2f\xfd" + bytes(16))
        with pytest.raises(AttnauditError, match=r"reading a .zst file needs a package this installation lacks"):
            vectors_format(zstd)
    binary = tmp_path / "vectors.bin"
    reference.save_word2vec_format(str(binary), binary=True)
    binary.write_bytes(binary.read_bytes()[:-7])
    with pytest.raises(AttnauditError, match=rf"vectors.bin ends after 6 of the {len(WORDS)} vectors"):
        load_pretrained(str(binary), {"good": 0}, 5)
    broken = tmp_path / "broken.vec"
    broken.write_text("2 5\nthe 1 2 3\n")
    with pytest.raises(AttnauditError, match="first vector is neither 5 numbers in text nor 5 binary floats"):
        vectors_format(broken)


@pytest.mark.parametrize("binary", [False, True])
def test_vectors_with_none_of_the_vocabulary_stop_showing_both(tmp_path, binary):
    """A file in another language or casing would leave every row random, 'pretrained' in name only: it stops,
    showing the vocabulary's most frequent words and the file's first."""
    from gensim.models import KeyedVectors

    german = KeyedVectors(3)
    german.add_vectors(["der", "die", "und"], np.eye(3, dtype=np.float32))
    path = tmp_path / ("de.bin" if binary else "de.vec")
    german.save_word2vec_format(str(path), binary=binary)
    vocab = {PAD: 0, "<unk>": 1, "<s>": 2, "</s>": 3, "the": 4, "film": 5, ",": 6}
    first = "'der'" if binary else "'der', 'die', 'und'"
    match = (
        rf"has none of the vocabulary's 7 words \(its most frequent: 'the', 'film', ','; the file's first: {first}\)"
    )
    with pytest.raises(AttnauditError, match=match):
        load_pretrained(str(path), vocab, 3)
