import numpy as np
import pytest

from attnaudit import AttnauditError
from attnaudit.data import PAD
from attnaudit.embeddings import aligned_matrix, load_pretrained, run
from attnaudit.io import read_json


def test_trained_vectors_are_deterministic_and_aligned(planted_dataset, tmp_path):
    run(str(planted_dataset / "dataset"), str(tmp_path / "a"), {"dim": 8, "epochs": 2}, seed=1)
    run(str(planted_dataset / "dataset"), str(tmp_path / "b"), {"dim": 8, "epochs": 2}, seed=1)
    a, b = np.load(tmp_path / "a" / "matrix.npy"), np.load(tmp_path / "b" / "matrix.npy")
    vocab = read_json(planted_dataset / "dataset" / "vocab.json")
    assert a.shape == (len(vocab), 8)
    np.testing.assert_array_equal(a, b)
    assert not a[vocab[PAD]].any()
    assert read_json(tmp_path / "a" / "coverage.json")["coverage"] > 0.9


def test_pretrained_text_vectors_and_oov_rows_from_a_seeded_normal(tmp_path):
    path = tmp_path / "vectors.txt"
    path.write_text("2 3\nfilm 1 2 3\ngood 0.5 0.5 0.5\n")
    vectors = load_pretrained(str(path), binary=False)
    vocab = {PAD: 0, "<unk>": 1, "film": 2, "nope": 3}
    matrix, coverage = aligned_matrix(vectors, vocab, 3, seed=0)
    np.testing.assert_allclose(matrix[2], [1, 2, 3])
    assert coverage["found"] == 1
    again, _ = aligned_matrix(vectors, vocab, 3, seed=0)
    np.testing.assert_array_equal(matrix, again)


def test_bad_pretrained_file_is_a_clear_error(tmp_path):
    path = tmp_path / "broken.txt"
    path.write_text("not a header\n")
    with pytest.raises(AttnauditError, match="broken.txt"):
        load_pretrained(str(path), binary=False)
    vocab = {PAD: 0}
    good = tmp_path / "v.txt"
    good.write_text("1 3\nfilm 1 2 3\n")
    with pytest.raises(AttnauditError, match="dimension 3"):
        aligned_matrix(load_pretrained(str(good), False), vocab, 300, seed=0)


def test_an_unknown_option_is_named(planted_dataset, tmp_path):
    """The CLI runs without the workflow's schema: a typo in --options stops instead of training the defaults."""
    with pytest.raises(AttnauditError, match=r"^embeddings\.dimm: unknown option; expected one of method, dim"):
        run(str(planted_dataset / "dataset"), str(tmp_path / "out"), {"dimm": 10}, seed=0)
