import subprocess
import sys

import pandas as pd
import pytest

from attnaudit import AttnauditError
from attnaudit.data import BOS, EOS, PAD, UNK
from attnaudit.tokenise import build_vocab, tokenise_documents, tokenize_texts
from attnaudit.tokenise.tokenisation import check_spaced_script, check_splits, unspaced_script_shares


def docs(rows):
    return pd.DataFrame(rows, columns=["id", "split", "label", "text"])


def test_spacy_tokens_lowercase_and_digits_become_qqq():
    assert tokenize_texts(["The 2 films cost $30 in 1999, in 3d!"]) == [
        ["the", "qqq", "films", "cost", "$", "qqq", "in", "qqq", ",", "in", "qqq", "!"]
    ]


def test_the_language_chooses_spacys_tokenizer():
    """``language`` is spaCy's tokenizer of that language: Chinese, which the English one keeps a clause whole,
    a token per character (spaCy's default segmenter), and French elisions split off their word."""
    chinese = "这部电影很好看，推荐2019年。"
    assert tokenize_texts([chinese]) == [["qqq", "。"]]  # the clause holds a digit
    assert tokenize_texts([chinese], language="zh") == [
        ["这", "部", "电", "影", "很", "好", "看", "，", "推", "荐", "qqq", "qqq", "qqq", "qqq", "年", "。"]
    ]
    assert tokenize_texts(["C'est l'histoire"]) == [["c'est", "l'histoire"]]
    assert tokenize_texts(["C'est l'histoire"], language="fr") == [["c'", "est", "l'", "histoire"]]
    frame = docs(
        [
            (f"d{i}", split, i % 2, "好看" if i % 2 else "难看")
            for i, split in enumerate(["train"] * 4 + ["dev", "dev", "test", "test"])
        ]
    )
    examples, vocab, stats = tokenise_documents(frame, {"language": "zh"}, seed=0)
    assert examples["tokens"].iloc[0] == [BOS, "难", "看", EOS] and {"好", "难", "看"} <= set(vocab)
    assert stats["options"]["language"] == "zh"


def test_chinese_words_with_jieba_and_a_segmenter_only_for_chinese():
    """``segmenter: jieba`` (spaCy's Chinese tokenizer with jieba) gives words; a segmenter is for Chinese only."""
    review = "这部电影非常好看，演员的表演也很出色。"
    assert tokenize_texts([review], language="zh", segmenter="jieba") == [
        ["这部", "电影", "非常", "好看", "，", "演员", "的", "表演", "也", "很", "出色", "。"]
    ]
    with pytest.raises(AttnauditError, match="tokenise.segmenter: 'jieba' — a segmenter is chosen for Chinese only"):
        tokenize_texts([review], language="en", segmenter="jieba")


def test_a_language_spacy_has_no_tokenizer_of_is_named():
    with pytest.raises(AttnauditError, match="tokenise.language: spaCy has no tokenizer of 'qq'"):
        tokenize_texts(["text"], language="qq")


@pytest.mark.parametrize(
    "package,language,segmenter,expected",
    [
        (
            "pythainlp",
            "th",
            "char",
            "tokenise.language: spaCy's tokenizer of 'th' needs a package that is not "
            "installed: The Thai tokenizer requires the PyThaiNLP library",
        ),
        (
            "jieba",
            "zh",
            "jieba",
            "tokenise.segmenter: spaCy's tokenizer of 'zh' with segmenter 'jieba' needs a package "
            "that is not installed: Jieba not installed. To use jieba, install it with `pip  install jieba`",
        ),
    ],
)
def test_a_tokenizer_whose_package_is_missing_names_it(package, language, segmenter, expected):
    """Where spaCy's tokenizer of a language needs a package that is not installed (here: hidden from a new
    process, installed or not), the message says which."""
    code = (
        f"import sys; sys.modules[{package!r}] = None\n"
        "from attnaudit.tokenise import tokenize_texts\n"
        f"tokenize_texts(['text'], language={language!r}, segmenter={segmenter!r})"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode != 0 and expected in proc.stderr, proc.stderr[-2000:]


@pytest.mark.parametrize(
    "texts,stops",
    [
        (["这部电影很好看，推荐。", "质量一般，有点失望。"], "Han"),
        (["この映画はとても面白かった。", "つまらない映画でした。"], "Kana"),
        (["หนังเรื่องนี้สนุกมาก", "ไม่ชอบเลย"], "Thai"),
        (["A fine film.", "Dull, and too long."], None),
        (["A fine film, 很好.", "Dull, and far too long for what it says."], None),  # a few Han letters among English
        (["Der Film war überraschend gut.", "Ein Film über Москва."], None),  # spaced scripts
    ],
)
def test_a_corpus_in_a_script_without_spaces_needs_its_language(texts, stops):
    """The English tokenizer would keep a Chinese, Japanese or Thai clause whole: such a corpus stops, naming the
    key and the script; English with a few Chinese letters, or other spaced scripts, does not."""
    shares = unspaced_script_shares(pd.Series(texts), seed=0)
    assert all(0 < share <= 1 for share in shares.values()), shares  # of the letters: Thai's vowel signs are none
    key = ("datasets", "mine", "tokenise", "language")
    check = lambda: check_spaced_script(pd.Series(texts * 3), "datasets.mine", key, 0)
    if stops is None:
        check()
    else:
        with pytest.raises(
            AttnauditError, match=rf"config datasets.mine.tokenise.language: en \(the default\).* is \d+% {stops}"
        ):
            check()


@pytest.mark.parametrize(
    "language,segmenter,shown",
    [
        ("zh", "char", "这部电影很好。 i p h o n e 也很好！"),  # a token per character, Latin letters too
        ("zh", "jieba", "这部电影很好。 iphone 也很好！"),
        ("xx", "char", "这部电影很好。iphone 也很好！"),  # one token per clause
    ],
)
def test_chinese_tokens_are_shown_as_the_text_writes_them(language, segmenter, shown):
    """Shown as text (heatmaps, explorer), tokens of a script written without spaces are joined, CJK punctuation
    included, and the others spaced; English and Korean tokens keep a space between every two."""
    from attnaudit.writing_systems import join_tokens, joined_indices

    tokens = tokenize_texts(["这部电影很好。iPhone 也很好！"], language=language, segmenter=segmenter)[0]
    assert join_tokens(tokens) == shown
    assert len(shown) == sum(map(len, tokens)) + len(tokens) - 1 - len(joined_indices(tokens))
    for text, language in (("A fine film, far too long.", "en"), ("한국 영화는 정말 재미있어요.", "xx")):
        tokens = tokenize_texts([text], language=language)[0]
        assert joined_indices(tokens) == [] and join_tokens(tokens) == " ".join(tokens)


def test_thai_and_japanese_tokens_are_joined_and_marked_tokens_spaced():
    from attnaudit.writing_systems import join_tokens

    assert join_tokens(["<s>", "หนัง", "เรื่อง", "นี้", "สนุก", "</s>"]) == "<s> หนังเรื่องนี้สนุก </s>"
    assert join_tokens(["<s>", "映画", "は", "「", "面白い", "」", "。", "</s>"]) == "<s> 映画は「面白い」。 </s>"
    chinese = ["<s>", "早餐", ",", "没有", "(", "午饭", ")", "很", "好", "!", "qqq", "元", "</s>"]
    assert join_tokens(chinese) == "<s> 早餐,没有(午饭)很好! qqq 元 </s>"
    assert join_tokens(["café", "qqq", "films", ",", "(", "fine", ")"]) == "café qqq films , ( fine )"


def test_unicode_is_nfc_and_invisible_format_characters_make_no_tokens():
    """A composed and a decomposed "café" are one vocabulary word; a lone LRM, zero-width space or bidi override
    is no token, and one inside a word leaves it; ZWNJ inside a (Persian) word is spelling and stays."""
    persian = "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"
    texts = ["caf\u00e9 cafe\u0301", "good \u200e movie \u200b", f"zero\u200bwidth \u202eover {persian} \u200d"]
    assert tokenize_texts(texts) == [["caf\u00e9"] * 2, ["good", "movie"], ["zerowidth", "over", persian]]
    frame = docs(
        [
            ("d0", "train", 0, "caf\u00e9 good"),
            ("d1", "train", 1, "cafe\u0301 bad"),
            ("d2", "train", 1, "\u200e \u200b\ufeff"),
            ("d3", "dev", 0, "fine"),
            ("d4", "dev", 1, "ok"),
            ("d5", "test", 0, "x"),
            ("d6", "test", 1, "y"),
        ]
    )
    _, vocab, stats = tokenise_documents(frame, {}, seed=0)
    assert [w for w in vocab if w.startswith("caf")] == ["caf\u00e9"] and stats["dropped"]["empty"] == 1


def test_vocab_from_train_with_min_count_and_specials_first():
    vocab = build_vocab([["a", "b", "a"], ["c", "a", "b"]], min_count=2)
    assert list(vocab)[:4] == [PAD, UNK, BOS, EOS]
    assert list(vocab)[4:] == ["a", "b"]  # by count, c dropped


def test_text_read_as_labels_gives_a_short_message(tmp_path):
    """Text and label columns swapped: every article is a class of its own. The message says so and lists a few of
    them cut to 40 characters, where it used to list whole articles, 15 KB of them."""
    from attnaudit.tokenise.tokenisation import check_user_dataset

    path = tmp_path / "mine.csv"
    article = "a long news article about the Olympic games " * 5
    path.write_text("p,a\n" + "".join(f"{['world', 'sports'][i % 2]},{i} {article}\n" for i in range(120)))
    entry = {"path": str(path), "text_column": "p", "label_column": "a"}  # swapped
    with pytest.raises(AttnauditError, match="does the label column hold class labels") as err:
        check_user_dataset("mine", "mine", entry, {}, seed=0)
    assert len(str(err.value)) < 4000 and f"0 {article[:37]}…" in str(err.value), str(err.value)


def test_a_class_whose_every_document_is_empty_is_named(tmp_path):
    """Every text of one class empty (an export that lost them) leaves one class after the tokeniser drops empty
    documents; it is named as such, by the dry run's check and by the tokenise job, not as a corpus with a single
    class whose label column would be to blame."""
    from attnaudit.tokenise.tokenisation import check_user_dataset

    path = tmp_path / "mine.csv"
    path.write_text("p,a\n" + "".join(f"news {i},world\n\u200b <br />,sports\n" for i in range(40)))
    entry = {"path": str(path), "text_column": "p", "label_column": "a"}
    expected = r"every document of class \{'sports': 40\} .* is empty .*so the class would vanish"
    with pytest.raises(AttnauditError, match=expected + r"; does text_column 'p' name the right column"):
        check_user_dataset("mine", "mine", entry, {}, seed=0)
    rows = [(f"w{i}", "all", 0, f"news {i}") for i in range(40)] + [(f"s{i}", "all", 1, " ") for i in range(40)]
    frame = docs(rows)
    frame.attrs["label_names"] = ["world", "sports"]
    with pytest.raises(AttnauditError, match=expected):
        tokenise_documents(frame, {}, seed=0)


def test_markers_empty_documents_dropped_and_counted():
    frame = docs(
        [
            ("d0", "train", 0, "good film"),
            ("d1", "train", 1, "   "),
            ("d2", "dev", 1, "bad"),
            ("d3", "test", 0, "fine"),
            ("d4", "train", 1, "great film"),
            ("d5", "dev", 0, "okay"),
            ("d6", "test", 1, "superb"),
        ]
    )
    examples, vocab, stats = tokenise_documents(frame, {}, seed=0)
    assert stats["dropped"]["empty"] == 1
    assert "d1" not in set(examples["id"])
    first = examples.set_index("id").loc["d0", "tokens"]
    assert list(first) == [BOS, "good", "film", EOS]
    assert "bad" not in vocab  # vocabulary only from train


def test_dev_and_test_examples_that_repeat_training_ones_are_counted_not_removed():
    """A test document that tokenises like a training one (case and spacing aside) counts, as does a text that
    carries two labels; every example stays. With a query (QA/NLI), the same passage asked another question is
    another example."""
    frame = docs(
        [
            ("d0", "train", 0, "Good film"),
            ("d1", "train", 1, "bad film"),
            ("d2", "train", 1, "good  film"),
            ("d3", "dev", 0, "fine"),
            ("d4", "dev", 1, "bad film"),
            ("d5", "test", 0, "GOOD film"),
            ("d6", "test", 1, "superb"),
            ("d7", "test", 0, "bad film"),
        ]
    )
    examples, _, stats = tokenise_documents(frame, {}, seed=0)
    assert len(examples) == len(frame)
    assert stats["repeated"] == {"dev_also_in_train": 1, "test_also_in_train": 2, "texts_with_several_labels": 2}
    qa = frame.assign(query=["where", "why", "when", "why", "why", "why", "who", "who"])
    _, _, stats = tokenise_documents(qa, {}, seed=0)
    assert stats["repeated"] == {"dev_also_in_train": 1, "test_also_in_train": 0, "texts_with_several_labels": 0}


def test_max_tokens_and_min_tokens_filters_are_counted():
    frame = docs(
        [(f"d{i}", "train" if i < 6 else "test", i % 2, " ".join(["w"] * (i + 1))) for i in range(8)]
        + [
            ("dv0", "dev", 0, "w w w"),
            ("dv1", "dev", 1, "w w w"),
            ("dv2", "dev", 1, "w w"),
            ("t0", "test", 0, "w w w"),
            ("t1", "test", 1, "w w w w"),
        ]
    )
    examples, _, stats = tokenise_documents(frame, {"max_tokens": 6, "min_tokens": 5}, seed=0)
    lengths = examples["tokens"].map(len) - 2
    assert lengths.max() < 6 and (lengths + 2).min() >= 5
    assert stats["dropped"]["n_tokens >= 6"] == 3


def test_a_split_left_without_a_class_names_the_dataset_and_what_was_dropped():
    """Classification needs every class in train, dev and test (a one-class test split scores macro-F1 1.0); when
    tokenising's drops empty a split, the message says so rather than blaming the splits."""
    rows = [(f"d{i}", split, i % 2, "w w") for i, split in enumerate(["train"] * 8 + ["dev"] * 2 + ["test"] * 2)]
    with pytest.raises(AttnauditError, match=r"^mine: .*test has none of class\(es\) \[1\]"):
        tokenise_documents(docs([*rows[:-1], ("t", "test", 0, "w")]), {}, seed=0, where="mine")
    with pytest.raises(AttnauditError) as err:  # counts by class name; a few classes raise no suspicion
        check_splits(docs([*rows[:-1], ("t", "test", 0, "w")]), "mine", True, class_names=["neg", "pos"])
    assert "'test': {'neg': 2}" in str(err.value) and "label column hold" not in str(err.value)
    long_test = [(i, split, label, "w w w w w w w w" if split == "test" else text) for i, split, label, text in rows]
    with pytest.raises(AttnauditError) as err:
        tokenise_documents(docs(long_test), {"max_tokens": 5}, seed=0, where="mine")
    assert str(err.value).startswith("mine has no test examples") and "n_tokens >= 5': 2" in str(err.value)
    # QA/NLI answers are many classes that no split holds all of: not checked
    qa = docs([*rows[:-1], ("t", "test", 0, "w")]).assign(query="where")
    assert len(tokenise_documents(qa, {}, seed=0)[0]) == 12


@pytest.mark.parametrize(
    "options,expected",
    [
        ({"max_tokens": 2}, "tokenise.max_tokens: 2 drops each document of that many tokens or more"),
        ({"min_tokens": 9}, "tokenise.min_tokens: 9 drops each document shorter than that"),
    ],
)
def test_length_options_that_drop_every_document_are_named(options, expected):
    """``max_tokens`` drops rather than truncates (J&W's code): set below every document's length it leaves nothing,
    and the message names the option, not the split fractions."""
    rows = [(f"d{i}", "all", i % 2, "a few words") for i in range(40)]
    with pytest.raises(AttnauditError) as err:
        tokenise_documents(docs(rows), options, seed=0, where="mine")
    assert str(err.value).startswith("mine: tokenising drops every document") and expected in str(err.value)
    assert "fraction" not in str(err.value)


@pytest.mark.parametrize(
    "options, texts, expected",
    [
        (
            {"max_tokens": 5},
            ("a few", "w w w w w w w w"),
            "tokenise.max_tokens: 5 drops each document of that many tokens or more (it does not truncate): "
            "20 documents",
        ),
        (
            {"min_tokens": 6},
            ("w w w w w w w w", "a few"),
            "tokenise.min_tokens: 6 drops each document shorter than that (sentence markers included): 20 documents",
        ),
    ],
)
def test_a_length_filter_that_drops_a_whole_class_is_named(options, texts, expected):
    """A length filter that drops every document of a class (all the long reviews are negative) is named with the
    documents it drops per label, rather than a one-class dataset's advice to check the label column."""
    rows = [(f"d{i}", "all", i % 2, texts[i % 2]) for i in range(40)]  # label 1's documents are the ones dropped
    with pytest.raises(AttnauditError) as err:
        tokenise_documents(docs(rows), options, seed=0, where="mine")
    message = str(err.value)
    assert message.startswith("mine: the length filters drop every document of label(s) [1]"), message
    assert f"{expected}, by label {{1: 20}}; raise or remove the filter" in message, message
    assert "label column" not in message
    examples, _, _ = tokenise_documents(docs(rows), {}, seed=0, where="mine")  # without the filter: both classes
    assert set(examples["label"]) == {0, 1}


def test_the_tokenise_job_names_classes_by_the_names_the_corpus_job_read(tmp_path):
    """documents.parquet carries the corpus's class names (written by the corpus stage), so the tokenise job's
    messages say 'neg', as the dry run's do, rather than label 0."""
    from attnaudit import corpora
    from attnaudit.tokenise import tokenisation

    csv = tmp_path / "mine.csv"
    lines = [
        f'"{"a long and rather tiresome film " * 5 if i % 2 else "a good film"}",{"neg" if i % 2 else "pos"}'
        for i in range(40)
    ]
    csv.write_text("text,label\n" + "\n".join(lines) + "\n")
    documents = tmp_path / "documents.parquet"
    entry = {"path": str(csv), "text_column": "text", "label_column": "label"}
    manifest = corpora.run(
        "mine", out=documents, manifest=tmp_path / "manifest.json", raw_dir=tmp_path, user_corpora={"mine": entry}
    )
    assert pd.read_parquet(documents).attrs["label_names"] == manifest["label_names"]
    with pytest.raises(AttnauditError) as err:
        tokenisation.run(str(documents), str(tmp_path / "mine"), {"max_tokens": 10}, seed=0)
    message = str(err.value)
    assert "the length filters drop every document of class(es) ['neg']" in message, message
    assert "20 documents, by label {'neg': 20}" in message, message
    with pytest.raises(AttnauditError) as err:
        tokenisation.run(str(documents), str(tmp_path / "mine"), {"test_sample": 0.07}, seed=0)
    message = str(err.value)
    assert "test has none of class(es) ['" in message and "'train': {'neg': " in message, message
    assert tokenisation.run(str(documents), str(tmp_path / "mine"), {}, seed=0)["total"] == 40


def test_a_min_count_that_leaves_no_word_is_named():
    """A ``min_count`` above every train word's count would make every token <unk> (a vocabulary of the specials
    alone: a model, and its attention, over nothing): it stops naming the option and the most frequent word."""
    rows = [(f"d{i}", "all", i % 2, f"the film was {'good' if i % 2 else 'bad'}, the end") for i in range(40)]
    tokenise_documents(docs(rows), {"min_count": 20}, seed=0, where="mine")  # 'the' is in every train document
    with pytest.raises(AttnauditError) as err:
        tokenise_documents(docs(rows), {"min_count": 100}, seed=0, where="mine")
    train_count = int(str(err.value).split("occurs ")[1].split(" ")[0])
    assert 40 <= train_count < 80, str(err.value)  # twice in each train document
    assert str(err.value) == (
        f"mine: tokenise.min_count: 100 leaves no word in the vocabulary (the train split's most frequent word, "
        f"'the', occurs {train_count} times), so every token would be <unk>; lower it"
    )


def test_pooled_corpus_gets_seeded_stratified_splits():
    frame = docs([(f"d{i}", "all", i % 2, f"word{'x' * (i % 7)} text") for i in range(200)])
    a, _, stats = tokenise_documents(frame, {"test_fraction": 0.2, "dev_fraction": 0.25}, seed=3)
    b, _, _ = tokenise_documents(frame, {"test_fraction": 0.2, "dev_fraction": 0.25}, seed=3)
    c, _, _ = tokenise_documents(frame, {"test_fraction": 0.2, "dev_fraction": 0.25}, seed=4)
    assert stats["counts"]["test"] == {"0": 20, "1": 20}
    assert stats["counts"]["dev"] == {"0": 20, "1": 20}
    pd.testing.assert_frame_equal(a, b)
    assert not a["split"].equals(c.set_index("id").loc[a["id"], "split"].reset_index(drop=True))


def test_test_sample_keeps_a_seeded_fraction():
    frame = docs(
        [(f"t{i}", "test", i % 2, "some text") for i in range(100)]
        + [(f"r{i}", "train", i % 2, "other text") for i in range(50)]
    )
    examples, _, stats = tokenise_documents(frame, {"test_sample": 0.2, "dev_fraction": 0.2}, seed=0)
    assert (examples["split"] == "test").sum() == 20
    assert stats["dropped"]["test not in the 20% sample"] == 80


@pytest.mark.parametrize(
    "fraction, expected",
    [(0.01, "mine has no test examples"), (0.07, "mine: every class needs examples in train, dev and test")],
)
def test_a_test_sample_that_leaves_a_class_out_of_test_is_named(fraction, expected):
    """A small ``test_sample`` of a small test split can keep no document, or one class only: audits of nothing, a
    macro-F1 of one class. It stops with the counts and what the sample kept."""
    frame = docs([(f"d{i}", "all", i % 2, "the film was good" if i % 2 else "the film was bad") for i in range(80)])
    with pytest.raises(AttnauditError) as err:
        tokenise_documents(frame, {"test_sample": fraction}, seed=0, where="mine")
    kept = round(fraction * 16)  # of the 16 test documents the 20 % test split holds
    assert str(err.value).startswith(expected), str(err.value)
    assert str(err.value).endswith(f"(tokenise.test_sample: {fraction} keeps {kept} of 16 test documents)")
    examples, _, _ = tokenise_documents(frame, {"test_sample": 0.25}, seed=0, where="mine")
    test_labels = examples.loc[examples["split"] == "test", "label"]
    assert len(test_labels) == 4 and set(test_labels) == {0, 1}


def test_unknown_split_value_is_rejected():
    with pytest.raises(AttnauditError, match="unknown split values"):
        tokenise_documents(docs([("a", "validation", 0, "x")]), {}, seed=0)


def test_planted_positions_point_at_markers(planted_dataset):
    examples = pd.read_parquet(planted_dataset / "dataset" / "examples.parquet")
    for tokens, important in zip(examples["tokens"], examples["important"]):
        assert len(important) >= 1
        assert all(tokens[p].startswith(("pos", "neg")) for p in important)


def test_an_unknown_option_is_named():
    with pytest.raises(AttnauditError, match=r"^config tokenise\.min_cnt: unknown option; expected one of min_count"):
        tokenise_documents(docs([("a", "train", 0, "w w")]), {"min_cnt": 2}, seed=0)


@pytest.mark.parametrize(
    "rows, entry, expected",
    [
        (
            ["p,q,a"] + [f"mary went home {i},,{'ab'[i % 2]}" for i in range(60)],
            {"query_column": "q"},
            "query_column 'q'",
        ),
        (["p,q,a"] + [f"\u200b ,q {i},{'ab'[i % 2]}" for i in range(60)], {}, "text_column 'p'"),
    ],
)
def test_a_column_empty_in_every_row_is_named_before_any_job(tmp_path, rows, entry, expected):
    """A text or query column with nothing in any row (a header naming the wrong column of an export) is named by
    the dry run's check, not reported as too few examples for a dev split."""
    from attnaudit.tokenise.tokenisation import check_user_dataset

    path = tmp_path / "mine.csv"
    path.write_text("\n".join(rows) + "\n")
    entry = {"path": str(path), "text_column": "p", "label_column": "a", **entry}
    with pytest.raises(AttnauditError, match=rf"every row's {expected} is empty .* does it name the right column"):
        check_user_dataset("mine", "mine", entry, {}, seed=0)
