"""QA/NLI with query-conditioned attention (J&W §2–§3): the bAbI, SNLI, CNN and MIMIC readers on small files in
their distribution formats (generated here), bad input, query tokens through tokenise/collate, and the QA model's
interface (decode with sample dimensions, given attention, gradients, deletions, candidates, save/load)."""

from __future__ import annotations

import gzip
import json
import zipfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from attnaudit import AttnauditError
from attnaudit.corpora import build_corpus, readers
from attnaudit.corpora.registry import REGISTRY
from attnaudit.data import collate, encode_split
from attnaudit.importance import get_method
from attnaudit.importance.gradient import autograd_gradient_times_embedding
from attnaudit.models import Batch, input_gradients, load_model, save_model
from attnaudit.models.qa import QAConfig, QAModel, candidate_ids
from attnaudit.specials import SPECIALS
from attnaudit.tokenise.tokenisation import tokenise_documents

# --- bAbI ----------------------------------------------------------------------------------------------------

BABI_STORY = """1 Mary moved to the bathroom.
2 John went to the hallway.
3 Where is Mary? \tbathroom\t1
4 Daniel went back to the hallway.
5 Sandra moved to the garden.
6 Where is Daniel? \thallway\t4
1 Sandra travelled to the office.
2 Where is Sandra? \toffice\t1
"""


def write_babi(root: Path, task: int, train: str, test: str, size: str = "en-10k") -> None:
    for split, text in (("train", train), ("test", test)):
        path = root / readers.babi_path(task, split, size)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_babi_reader_passage_query_answer_and_dev_split(tmp_path):
    write_babi(tmp_path, 1, BABI_STORY * 10, BABI_STORY)
    frame, info = readers.read_babi(tmp_path, 1)
    test = frame[frame["split"] == "test"].sort_values("id")
    first = test.iloc[0]
    assert first["text"] == "Mary moved to the bathroom . John went to the hallway"
    assert first["query"] == "Where is Mary"
    assert info["label_names"][first["label"]] == "bathroom"
    # the second question sees every earlier story sentence (questions are not part of the passage)
    assert test.iloc[1]["text"].count(" . ") == 3
    # a new story (ID 1) starts a new passage
    assert test.iloc[2]["text"] == "Sandra travelled to the office"
    counts = frame["split"].value_counts()
    assert counts["train"] + counts["dev"] == 30 and counts["test"] == 3
    assert counts["dev"] == round(0.15 * 30) or abs(counts["dev"] - 0.15 * 30) <= 1
    assert info["questions"]["train"]["answer_not_in_story"] == 0


def test_babi_answer_not_in_story_is_counted_not_dropped(tmp_path):
    bad = "1 Mary moved to the bathroom.\n2 Where is Mary? \tkitchen\t1\n"
    write_babi(tmp_path, 1, BABI_STORY * 4 + bad, BABI_STORY)
    frame, info = readers.read_babi(tmp_path, 1)
    assert info["questions"]["train"]["answer_not_in_story"] == 1
    assert (frame["label"] == info["label_names"].index("kitchen")).sum() == 1


def test_babi_story_that_never_resets_names_file_and_line(tmp_path):
    broken = "1 Mary moved to the bathroom.\n2 Where is Mary? \tbathroom\t1\n5 John went to the hallway.\n"
    write_babi(tmp_path, 2, broken, BABI_STORY)
    with pytest.raises(AttnauditError, match=r"qa2_two-supporting-facts_train\.txt:3: .*restart at ID 1"):
        readers.read_babi(tmp_path, 2)
    write_babi(tmp_path, 2, "3 Mary moved to the bathroom.\n", BABI_STORY)
    with pytest.raises(AttnauditError, match=r"train\.txt:1: line ID 3"):
        readers.read_babi(tmp_path, 2)


def test_babi_malformed_question_line(tmp_path):
    write_babi(tmp_path, 1, "1 Mary moved.\n2 Where is Mary?\t\t1\n", BABI_STORY)
    with pytest.raises(AttnauditError, match=r"train\.txt:2: expected 'question\?"):
        readers.read_babi(tmp_path, 1)


def test_babi_registry_pins_the_mirror_files_except_the_missing_one():
    for name in ("babi1", "babi2", "babi3", "babi3_1k"):
        spec = REGISTRY[name]
        assert spec.query and spec.mirror_dir == "babi" and len(spec.files) == 2
    pinned = {f.path: f.sha256 for f in REGISTRY["babi3"].files}
    assert pinned[readers.babi_path(3, "train")] is None  # not in the mirror, no established checksum
    assert all(f.sha256 for n in ("babi1", "babi2", "babi3_1k") for f in REGISTRY[n].files)


# --- SNLI ----------------------------------------------------------------------------------------------------


def snli_row(gold: str, premise: str | None = "A man plays a guitar.", hypothesis: str = "A person plays.") -> dict:
    row = {
        "annotator_labels": [gold],
        "captionID": "1.jpg#0",
        "gold_label": gold,
        "pairID": None,
        "sentence1_binary_parse": "( A man )",
        "sentence1_parse": "(ROOT (S (NP (DT A) (NN man))))",
        "sentence2": hypothesis,
        "sentence2_binary_parse": "( A person )",
        "sentence2_parse": "(ROOT (S (NP (DT A) (NN person))))",
    }
    if premise is not None:
        row["sentence1"] = premise
    return row


def write_snli(root: Path, rows: dict[str, list[dict]]) -> Path:
    path = root / "snli_1.0.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("snli_1.0/README.txt", "SNLI 1.0")
        for split, split_rows in rows.items():
            lines = []
            for i, row in enumerate(split_rows):
                row = dict(row, pairID=f"{split}{i}r")
                lines.append(json.dumps(row))
            archive.writestr(f"snli_1.0/snli_1.0_{split}.jsonl", "\n".join(lines) + "\n")
    return path


def test_snli_reader_drops_and_counts_missing_gold(tmp_path):
    rows = [snli_row("entailment"), snli_row("-"), snli_row("contradiction"), snli_row("neutral")]
    write_snli(tmp_path, {s: rows for s in ("train", "dev", "test")})
    frame, info = readers.read_snli(tmp_path)
    assert len(frame) == 9
    assert all(info["per_split"][s]["dropped_no_gold_label"] == 1 for s in ("train", "dev", "test"))
    test = frame[frame["split"] == "test"]
    assert [readers.SNLI_LABELS[i] for i in test["label"]] == ["entailment", "contradiction", "neutral"]
    assert set(test["query"]) == {"A person plays."} and set(test["text"]) == {"A man plays a guitar."}


def test_snli_row_without_premise_names_line(tmp_path):
    rows = [snli_row("entailment"), snli_row("neutral", premise=None)]
    write_snli(tmp_path, {s: rows for s in ("train", "dev", "test")})
    with pytest.raises(AttnauditError, match=r"snli_1\.0_train\.jsonl:2: no premise"):
        readers.read_snli(tmp_path)


def test_snli_and_cnn_unpinned_build_warns(tmp_path, caplog):
    rows = [snli_row("entailment"), snli_row("neutral")]
    (tmp_path / "mirror" / "snli").mkdir(parents=True)
    write_snli(tmp_path / "mirror" / "snli", {s: rows for s in ("train", "dev", "test")})
    frame, manifest = build_corpus("snli", mirror=tmp_path / "mirror", raw_dir=tmp_path / "raw")
    assert len(frame) == 6 and "query" in frame.columns
    assert manifest["files"][0]["verified"].startswith("UNPINNED")
    assert "UNPINNED" in caplog.text


# --- CNN -----------------------------------------------------------------------------------------------------

CNN_BLOCKS = [
    ("@placeholder scored for @entity3", "@entity1", "@entity1 beat @entity3 on sunday , said @entity7 ."),
    ("@entity1 lost to @placeholder", "@entity7", "@entity7 won ; @entity1 lost ."),
    ("who won @placeholder", "@entity2", "no entity in this passage at all ."),
]


def write_cnn(root: Path, blocks=CNN_BLOCKS) -> None:
    (root / "cnn").mkdir(parents=True, exist_ok=True)
    text = "\n\n".join("\n".join(block) for block in blocks) + "\n"
    for split in readers.SPLITS:
        (root / "cnn" / f"{split}.txt").write_text(text)


def test_cnn_reader_candidates_and_block_without_entity(tmp_path):
    write_cnn(tmp_path)
    frame, info = readers.read_cnn(tmp_path)
    assert info["blocks"]["train"] == {"blocks": 3, "no_entity_in_passage": 1, "answer_not_in_passage": 0}
    assert len(frame) == 6
    names = info["label_names"]
    assert names == sorted(names, key=lambda e: int(e[len("@entity") :]))
    assert [names[i] for i in frame[frame["split"] == "test"]["label"]] == ["@entity1", "@entity7"]


def test_cnn_short_block_names_line(tmp_path):
    write_cnn(tmp_path, [*CNN_BLOCKS[:1], ("only a question", "@entity1")])
    with pytest.raises(AttnauditError, match=r"train\.txt:5: a block needs 3 lines"):
        readers.read_cnn(tmp_path)


def cnn_documents(tmp_path) -> tuple[pd.DataFrame, list[str]]:
    write_cnn(tmp_path)
    frame, info = readers.read_cnn(tmp_path)
    return frame, info["label_names"]


def test_tokenise_drops_a_few_answers_not_in_their_passage_and_stops_on_most(tmp_path):
    """J&W §3 (CNN): a document whose answer is no token of its passage has no right candidate and is dropped,
    counted; most of them so means the passage is some other column, and the job stops saying so."""
    docs, _ = cnn_documents(tmp_path)
    docs = pd.concat([docs] * 4, ignore_index=True).assign(id=lambda d: [f"cnn-{i:02d}" for i in range(len(d))])
    lost = docs.index[0]
    docs.loc[lost, "text"] = docs.loc[lost, "text"].replace(docs.loc[lost, "answer"], "@entity99")
    examples, _, stats = tokenise_documents(docs, {}, seed=0)
    assert stats["dropped"]["answer not in passage"] == 1 and docs.loc[lost, "id"] not in set(examples["id"])
    swapped = docs.rename(columns={"text": "query", "query": "text"})
    with pytest.raises(AttnauditError, match=r"the answer of \d+ of \d+ documents is not a token of its passage"):
        tokenise_documents(swapped, {}, seed=0)


def test_tokenise_query_entities_and_answers_in_vocab(tmp_path):
    docs, _ = cnn_documents(tmp_path)
    with pytest.raises(AttnauditError, match=r"tokenise.min_count: 50 leaves no word in the vocabulary"):
        tokenise_documents(docs, {"min_count": 50}, seed=0)  # the answer words alone: every other token <unk>
    first = docs.iloc[0]
    chatty = {**first, "id": "cnn-train-00000009", "text": "the " * 60 + first["text"]}  # 'the' clears min_count
    docs = pd.concat([docs, pd.DataFrame([chatty])], ignore_index=True)
    examples, vocab, stats = tokenise_documents(docs, {"min_count": 50}, seed=0)
    assert set(vocab) - set(SPECIALS) == {"the", "@entity1", "@entity7"}
    assert "query_tokens" in examples.columns and stats["mean_query_tokens"] > 2
    assert examples["query_tokens"].iloc[0][0] == "<s>" and "@placeholder" in examples["query_tokens"].iloc[0]
    assert "@entity1" in examples["tokens"].iloc[0]  # not mapped to qqq
    assert {"@entity1", "@entity7"} <= set(vocab)  # answers added despite min_count
    encoded = encode_split(examples, vocab, "test")
    batch = encoded.batch(np.arange(len(encoded)))
    assert batch.query_tokens.shape[0] == len(encoded)
    assert batch.query_mask.sum(dim=1).tolist() == [len(q) for q in encoded.queries]


# --- MIMIC ---------------------------------------------------------------------------------------------------

NOTE_HEADER = "ROW_ID,SUBJECT_ID,HADM_ID,CHARTDATE,CHARTTIME,STORETIME,CATEGORY,DESCRIPTION,CGID,ISERROR,TEXT"
DIAG_HEADER = "ROW_ID,SUBJECT_ID,HADM_ID,SEQ_NUM,ICD9_CODE"


def write_mimic(root: Path, gz: bool = True, drop: str | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    notes = [
        NOTE_HEADER,
        '1,10,100,2101-01-01,,,Discharge summary,Report,,,"Admission for DKA.\nHistory of diabetes."',
        '2,10,100,2101-01-02,,,Discharge summary,Addendum,,,"Addendum text."',
        '3,11,101,2102-01-01,,,Discharge summary,Report,,,"GI bleed with acute blood loss."',
        '4,12,102,2103-01-01,,,Discharge summary,Report,,,"Chronic kidney disease, anemia."',
        '5,13,103,2104-01-01,,,Nursing,Note,,,"Not a discharge summary."',
        '6,14,104,2105-01-01,,,Discharge summary,Report,,,"Both anemia types."',
    ]
    diagnoses = [
        DIAG_HEADER,
        "1,10,100,1,25013",
        "2,11,101,1,2851",
        "3,12,102,1,28521",
        "4,12,102,2,25000",
        "5,13,103,1,2851",
        "6,14,104,1,2851",
        "7,14,104,2,28529",
    ]
    for name, lines in (("NOTEEVENTS", notes), ("DIAGNOSES_ICD", diagnoses)):
        if name == drop:
            continue
        data = ("\n".join(lines) + "\n").encode()
        if gz:
            (root / f"{name}.csv.gz").write_bytes(gzip.compress(data))
        else:
            (root / f"{name}.csv").write_bytes(data)
    return root


def test_mimic_diabetes_and_anemia_selection(tmp_path):
    root = write_mimic(tmp_path / "mimic")
    frame, info = readers.read_mimic("diabetes", {"path": str(root)})
    labels = dict(zip(frame["id"], frame["label"]))
    assert labels == {
        "mimic_diabetes-100": 1,
        "mimic_diabetes-101": 0,
        "mimic_diabetes-102": 1,
        "mimic_diabetes-104": 0,
    }
    assert "Addendum text." in frame.set_index("id").loc["mimic_diabetes-100", "text"]
    frame, info = readers.read_mimic("anemia", {"path": str(root)})
    assert dict(zip(frame["id"], frame["label"])) == {"mimic_anemia-101": 0, "mimic_anemia-102": 1}
    assert info["selection"]["both_anemia_types"] == 1 and info["selection"]["not_selected"] == 1
    frame, _ = readers.read_mimic("anemia", {"path": str(write_mimic(tmp_path / "plain", gz=False))})
    assert len(frame) == 2


def test_mimic_missing_table_or_path_names_the_files(tmp_path):
    root = write_mimic(tmp_path / "mimic", drop="DIAGNOSES_ICD")
    with pytest.raises(AttnauditError, match=r"DIAGNOSES_ICD is missing .*NOTEEVENTS\.csv\[\.gz\], DIAGNOSES_ICD"):
        readers.read_mimic("diabetes", {"path": str(root)})
    with pytest.raises(AttnauditError, match=r"corpora\.options\.mimic_anemia\.path"):
        build_corpus("mimic_anemia", raw_dir=tmp_path / "raw")
    frame, manifest = build_corpus(
        "mimic_anemia", raw_dir=tmp_path / "raw", options={"path": str(write_mimic(tmp_path / "ok"))}
    )
    assert manifest["source"]["kind"] == "user_data" and len(manifest["files"]) == 2


# --- the QA model --------------------------------------------------------------------------------------------


def qa_model(encoder="lstm", attention="additive", candidates=(), num_classes=5, seed=0) -> QAModel:
    torch.manual_seed(seed)
    cfg = QAConfig(
        vocab_size=30,
        num_classes=num_classes,
        encoder=encoder,
        attention=attention,
        embedding_dim=8,
        lstm_hidden=6,
        average_hidden=12,
        cnn_filters=3,
        marker_ids=(2, 3),
        candidate_ids=candidates,
    )
    return QAModel(cfg, torch.randn(30, 8)).eval()


@pytest.mark.parametrize("encoder", ["lstm", "average", "cnn"])
def test_qa_decoder_is_half_the_encoder_output_unless_set(encoder):
    """J&W's code (``AttnDecoderQA``): W₁p, W₁q map the encoder's output m to m // 2 (the BiLSTM's: lstm_hidden);
    ``decoder_hidden`` sets it; a non-LSTM QA model does not read lstm_hidden (the model sheet's fields)."""
    from attnaudit.modelsheet import fields_read

    model = qa_model(encoder)
    m = model.hidden_dim
    assert model.w_passage.weight.shape == model.w_query.weight.shape == (m // 2, m)
    assert model.output.weight.shape == (5, m // 2)
    if encoder == "lstm":
        assert m // 2 == model.cfg.lstm_hidden
    torch.manual_seed(0)
    wide = QAModel(QAConfig(**{**vars(model.cfg), "decoder_hidden": 7}), torch.randn(30, 8))
    assert wide.w_passage.weight.shape == (7, m)
    spec = {"encoder": encoder, "lstm_hidden": 9, "average_hidden": 12, "decoder_hidden": 7, "cnn_filters": 3}
    read = fields_read(spec, qa=True)
    assert read["decoder_hidden"] == 7 and ("lstm_hidden" in read) == (encoder == "lstm")


def qa_batch(seed=0, n=4):
    rng = np.random.default_rng(seed)
    passages = [np.array([2, *rng.integers(4, 30, size=int(rng.integers(3, 9))), 3]) for _ in range(n)]
    queries = [np.array([2, *rng.integers(4, 30, size=int(rng.integers(1, 4))), 3]) for _ in range(n)]
    return collate(passages, labels=rng.integers(0, 5, size=n), ids=[str(i) for i in range(n)], queries=queries)


@pytest.mark.parametrize("encoder", ["lstm", "average", "cnn"])
@pytest.mark.parametrize("attention", ["additive", "dot"])
def test_qa_interface_decode_with_sample_dimension(encoder, attention):
    model, batch = qa_model(encoder, attention), qa_batch()
    out = model(batch)
    assert out.attention.shape == batch.tokens.shape and out.hidden.shape[:2] == batch.tokens.shape
    torch.testing.assert_close(out.attention.sum(dim=1), torch.ones(4))
    assert (out.attention[~batch.mask] == 0).all()
    # S distributions per instance in one call == one decode per distribution
    alphas = torch.softmax(torch.randn(4, 3, batch.tokens.shape[1]).masked_fill(~batch.mask[:, None], -1e9), dim=-1)
    many = model.decode(out.hidden, alphas, out.query)
    assert many.shape == (4, 3, 5)
    for s in range(3):
        torch.testing.assert_close(many[:, s], model.decode(out.hidden, alphas[:, s], out.query))
    # a given attention replaces the model's own, encoder states unchanged
    given = model(batch, attention=alphas[:, 0])
    torch.testing.assert_close(given.logits, many[:, 0])
    torch.testing.assert_close(given.hidden, out.hidden)


def test_qa_attention_and_prediction_depend_on_the_query():
    model, batch = qa_model(), qa_batch()
    other = qa_batch(seed=1)
    swapped = collate(
        [t[m].numpy() for t, m in zip(batch.tokens, batch.mask)],
        queries=[t[m].numpy() for t, m in zip(other.query_tokens, other.query_mask)],
    )
    a, b = model(batch), model(swapped)
    torch.testing.assert_close(a.hidden, b.hidden)  # the passage encoder does not see the query
    assert not torch.allclose(a.attention, b.attention)
    assert not torch.allclose(a.logits, b.logits)


def test_qa_non_linear_decoder_refuses_token_logits_and_needs_a_query():
    model, batch = qa_model(), qa_batch()
    assert model.linear_decoder is False
    with pytest.raises(NotImplementedError, match="non-linear decoder"):
        model.token_logits(model(batch).hidden)
    no_query = collate([t[m].numpy() for t, m in zip(batch.tokens, batch.mask)])
    with pytest.raises(AttnauditError, match="needs the query"):
        model(no_query)


def test_qa_candidates_mask_logits_to_the_passage_entities():
    # class c's answer word has vocabulary id 10 + c; passages contain some of them
    model = qa_model(candidates=(10, 11, 12, 13, -1))
    batch = collate(
        [np.array([2, 10, 5, 12, 3]), np.array([2, 13, 6, 3]), np.array([2, 5, 6, 3])],
        queries=[np.array([2, 4, 3])] * 3,
    )
    probs = model(batch).probs
    assert (probs[0, [1, 3, 4]] == 0).all() and (probs[0, [0, 2]] > 0).all()
    assert (probs[1, [0, 1, 2, 4]] == 0).all()
    assert (probs[2] > 0).all()  # no candidate in the passage: no mask rather than no answer
    torch.testing.assert_close(probs.sum(dim=1), torch.ones(3, dtype=probs.dtype))


@pytest.mark.parametrize("encoder", ["lstm", "average", "cnn"])
def test_qa_deleting_a_candidates_only_mention_keeps_it_a_candidate(encoder):
    """J&W's leave-one-out (their code's ``remove_and_run``) keeps the whole passage's entity mask: deleting the
    one mention of an answer candidate leaves the answer space as it was, by every deletion route alike."""
    from attnaudit.importance.loo import deletion_outputs, deletions

    model = qa_model(encoder, candidates=(10, 11, 12, 13, -1), seed=2)
    passages = [np.array([2, 10, 5, 12, 7, 8, 9, 3]), np.array([2, 13, 6, 11, 3])]
    batch = collate(passages, queries=[np.array([2, 4, 3])] * 2)
    allowed = torch.isfinite(model(batch).logits)
    assert allowed[0, [0, 2]].all() and not allowed[0, [1, 3, 4]].any()
    deleted, b, t = deletions(batch)
    with torch.no_grad():
        reencoded = model(deleted).logits
        fast = deletion_outputs(model, batch, max_tokens=None, tolerance=1e-6)[1].flatten(0, 1)
    real = [row for row in range(len(b)) if 0 < t[row] < len(passages[int(b[row])]) - 1]
    for logits in (reencoded, fast):
        torch.testing.assert_close(torch.isfinite(logits[real]), allowed[b[real]])  # t = 1 deletes entity 10 or 13
    torch.testing.assert_close(fast[real], reencoded[real], atol=1e-5, rtol=1e-5)


def test_qa_candidate_ids_from_answers():
    examples = pd.DataFrame({"label": [0, 2, 0], "answer": ["@entity0", "@entity5", "@entity0"]})
    assert candidate_ids(examples, {"@entity0": 7, "@entity5": 9}, 3) == (7, -1, 9)
    assert candidate_ids(examples.drop(columns="answer"), {}, 3) == ()


def test_qa_gradient_and_loo_are_over_passage_tokens_and_keep_the_query():
    model, batch = qa_model(), qa_batch()
    grad = get_method("gradient").attribute(model, batch)
    loo = get_method("loo").attribute(model, batch)
    assert grad.shape == loo.shape == batch.tokens.shape
    assert (grad[~batch.mask] == 0).all() and (grad[batch.mask] > 0).any()
    assert input_gradients.supports(model)  # the hand-written BiLSTM backward equals autograd through the QA model
    torch.testing.assert_close(grad, autograd_gradient_times_embedding(model, batch).abs().masked_fill(~batch.mask, 0))
    # LOO by hand for instance 0, token 1: the query stays with the shortened passage
    keep = [i for i in range(int(batch.lengths[0])) if i != 1]
    shorter = collate([batch.tokens[0, keep].numpy()], queries=[batch.query_tokens[0][batch.query_mask[0]].numpy()])
    expected = 0.5 * (model(shorter).probs[0] - model(batch).probs[0]).abs().sum()
    torch.testing.assert_close(loo[0, 1], expected)


def varied_passages(model: QAModel, seed: int) -> tuple[QAModel, list[np.ndarray], Batch]:
    """``model`` moved away from its near-zero initialisation, and passages of 1–140 tokens with their queries."""
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    rng = np.random.default_rng(seed)
    passages = [np.array([2, *rng.integers(4, 30, size=n), 3]) for n in (7, 60, 2, 140, 1)]
    queries = [np.array([2, *rng.integers(4, 30, size=3), 3]) for _ in passages]
    return model, passages, collate(passages, ids=[str(i) for i in range(len(passages))], queries=queries)


@pytest.mark.parametrize(
    "encoder,attention",
    [("lstm", "additive"), ("average", "additive"), ("average", "dot"), ("cnn", "additive"), ("cnn", "dot")],
)
@pytest.mark.parametrize("candidates", [(), (10, 11, 12, 13, 14)])
def test_qa_deletions_without_reencoding_equal_reencoding(encoder, attention, candidates):
    """J&W's QA model: its decoder is linear in the context up to tanh(· + W₁q q), so the BiLSTM's deletions
    resume from unchanged states (and fade), the average encoder's drop one position and the CNN's recompute the
    states next to the gap — the logits of re-encoding every shortened passage with its query and candidates."""
    from attnaudit.importance.loo import deletion_outputs, deletions
    from attnaudit.models import deletions as deletions_module

    model, passages, batch = varied_passages(qa_model(encoder, attention, candidates=candidates, seed=3), seed=1)
    width = batch.tokens.shape[1]
    deleted, b, t = deletions(batch)
    with torch.no_grad():
        if encoder == "lstm":
            assert deletions_module.supports(model, batch)
            fast = deletions_module.deletion_outputs(model, batch, tolerance=1e-6)[1]
        else:
            assert deletions_module.local_radius(model, batch) == (0 if encoder == "average" else 3)
            fast = deletions_module.local_deletion_logits(model, batch, 0, width, max_elements=2000)
        encoded = model(deleted).logits
    real = [row for row in range(len(b)) if t[row] < len(passages[int(b[row])])]
    emptied = [row for row in real if len(passages[int(b[row])]) == 3 and t[row] == 1]  # markers only are left
    assert torch.isnan(fast.flatten(0, 1)[emptied]).all()
    fast = deletion_outputs(model, batch, max_tokens=None, tolerance=1e-6)[1].flatten(0, 1)[real]  # re-encodes them
    torch.testing.assert_close(fast, encoded[real], atol=1e-5, rtol=1e-5)
    if candidates:
        assert torch.isinf(fast).any()  # masked to each passage's candidates, like the model


@pytest.mark.parametrize("encoder", ["lstm", "average", "cnn"])
@pytest.mark.parametrize("candidates", [(), (10, 11, 12, 13, 14)])
def test_qa_occlusion_without_reencoding_equals_reencoding(encoder, candidates):
    """B&F's occlusion of J&W's QA model (the embedding of a passage token zeroed, the query and candidates kept):
    the BiLSTM from resumed states, the average encoder and the CNN from the states next to the token, as running
    every occluded passage through the model."""
    model, _, batch = varied_passages(qa_model(encoder, "additive", candidates=candidates, seed=4), seed=2)
    occlusion = get_method("occlusion")
    scores = occlusion.attribute(model, batch)
    torch.testing.assert_close(scores, occlusion.reencoded(model, batch), atol=1e-5, rtol=1e-5)
    assert scores.abs().amax() > 1e-3


@pytest.mark.parametrize("encoder", ["lstm", "average", "cnn"])
def test_every_bf_saliency_method_explains_a_qa_model_with_its_query(encoder):
    """B&F's methods on J&W's QA model (a QA dataset in ``saliency.datasets``) read each instance's query: Captum's
    gradient methods equal autograd through the whole model, query included, and every method's scores change with
    the query (LRP's conservation: tests/test_lrp.py)."""
    model, batch = qa_model(encoder, candidates=(10, 11, 12, 13, 14) if encoder == "cnn" else ()), qa_batch(n=5)
    target = model(batch).logits.argmax(dim=-1)
    embedded = model.embed(batch).detach().requires_grad_(True)
    chosen = torch.softmax(model(batch, embedded=embedded).logits, dim=-1).gather(1, target[:, None]).sum()
    (gradient,) = torch.autograd.grad(chosen, embedded)
    expected = {
        "saliency_l2": gradient.norm(dim=-1),
        "grad_x_input": (gradient * embedded).sum(dim=-1).detach(),
    }
    other = collate(
        [t[m].numpy() for t, m in zip(batch.tokens, batch.mask)],
        queries=[t[m].numpy() for t, m in zip(qa_batch(seed=3, n=5).query_tokens, qa_batch(seed=3, n=5).query_mask)],
    )
    for name in ("saliency_l2", "grad_x_input", "integrated_gradients", "occlusion", "omission", "lrp"):
        method = get_method(name, n_steps=16) if name == "integrated_gradients" else get_method(name)
        scores = method.attribute(model, batch)
        assert scores.shape == batch.tokens.shape and torch.isfinite(scores).all(), name
        if name in expected:
            torch.testing.assert_close(scores, expected[name].masked_fill(~batch.mask, 0.0), msg=name)
        assert not torch.allclose(scores, method.attribute(model, other)), name  # the query is read


def test_qa_save_load_roundtrip(tmp_path):
    model, batch = qa_model("average", candidates=(10, 11, 12, 13, 14)), qa_batch()
    save_model(tmp_path / "model.pt", model)
    loaded = load_model(tmp_path / "model.pt")
    assert isinstance(loaded, QAModel) and loaded.cfg.candidate_ids == (10, 11, 12, 13, 14)
    torch.testing.assert_close(loaded(batch).logits, model(batch).logits)


def test_qa_model_learns_a_generated_babi_task(tmp_path):
    """A tiny bAbI-like task (where is X? → X's last location) trains through the real stages' code."""
    from attnaudit.train.training import train_model

    rng = np.random.default_rng(0)
    people, places = ["mary", "john", "sandra"], ["kitchen", "garden", "office", "hallway"]
    lines = []
    for _ in range(200):
        moves = [(str(rng.choice(people)), str(rng.choice(places))) for _ in range(4)]
        asked = moves[int(rng.integers(4))][0]
        answer = [where for who, where in moves if who == asked][-1]
        lines += [f"{n} {who.title()} went to the {where}." for n, (who, where) in enumerate(moves, start=1)]
        lines.append(f"5 Where is {asked.title()}? \t{answer}\t1")
    text = "\n".join(lines) + "\n"
    write_babi(tmp_path / "m", 1, text, text)
    docs, _ = readers.read_babi(tmp_path / "m", 1)
    examples, vocab, _ = tokenise_documents(docs, {"min_count": 1}, seed=0)
    out = tmp_path / "d"
    out.mkdir()
    examples.to_parquet(out / "examples.parquet")
    (out / "vocab.json").write_text(json.dumps(vocab))
    np.save(tmp_path / "matrix.npy", np.random.default_rng(0).standard_normal((len(vocab), 16)).astype(np.float32))
    spec = {
        "encoder": "lstm",
        "lstm_hidden": 16,
        "epochs": 25,
        "batch_size": 20,
        "selection_metric": "accuracy",
        "lr": 0.01,
        "variant": "qa",
    }
    model, metrics, predictions = train_model(str(out), str(tmp_path / "matrix.npy"), spec, progress=False)
    assert isinstance(model, QAModel)
    chance = 1 / len(places)
    assert metrics["test"]["accuracy"] > chance + 0.2, metrics["test"]


def train_briefly(docs: pd.DataFrame, tmp_path: Path, **spec):
    """The corpus documents through the real tokenise and train code (two epochs, small sizes)."""
    from attnaudit.train.training import train_model

    examples, vocab, _ = tokenise_documents(docs, {"min_count": 1}, seed=0)
    out = tmp_path / "dataset"
    out.mkdir(parents=True)
    examples.to_parquet(out / "examples.parquet")
    (out / "vocab.json").write_text(json.dumps(vocab))
    matrix = np.random.default_rng(0).standard_normal((len(vocab), 8)).astype(np.float32)
    np.save(tmp_path / "matrix.npy", matrix)
    spec = {"lstm_hidden": 8, "epochs": 2, "batch_size": 8, "selection_metric": "accuracy", "variant": "t", **spec}
    return train_model(str(out), str(tmp_path / "matrix.npy"), spec, progress=False), examples


@pytest.mark.parametrize("encoder", ["lstm", "average"])
def test_qa_model_trains_on_snli_and_cnn_files_in_their_distribution_formats(encoder, tmp_path):
    """SNLI (premise attended, hypothesis the query, 3 classes) and CNN (candidates: the passage's @entity tokens)
    read from files in their official formats train J&W's QA model; CNN predictions stay among the candidates."""
    rng = np.random.default_rng(0)
    golds = ["entailment", "neutral", "contradiction"]
    rows = [snli_row(golds[i % 3], f"A man {i} plays.", f"Someone {i % 3} plays.") for i in range(30)]
    (tmp_path / "snli").mkdir()
    write_snli(tmp_path / "snli", {s: rows for s in ("train", "dev", "test")})
    docs, _ = readers.read_snli(tmp_path / "snli")
    (model, metrics, predictions), _ = train_briefly(docs, tmp_path / "s", encoder=encoder)
    assert isinstance(model, QAModel) and model.cfg.num_classes == 3 and len(predictions) == 90
    blocks = []
    for _ in range(24):
        a, b = rng.choice(np.arange(1, 9), size=2, replace=False)
        blocks.append((f"who beat @entity{b} @placeholder", f"@entity{a}", f"@entity{a} beat @entity{b} today ."))
    write_cnn(tmp_path / "cnn", blocks)
    docs, _ = readers.read_cnn(tmp_path / "cnn")
    (model, metrics, predictions), examples = train_briefly(docs, tmp_path / "c", encoder=encoder)
    assert isinstance(model, QAModel) and model.cfg.candidate_ids
    test = examples[examples["split"] == "test"].set_index("id")
    predicted = predictions.set_index("id").loc[test.index, "predicted"]
    names = {e: i for i, e in enumerate(readers.read_cnn(tmp_path / "cnn")[1]["label_names"])}
    for doc_id, klass in predicted.items():  # the logits are masked to the passage's entities
        entities = {names[t] for t in test.loc[doc_id, "tokens"] if t in names}
        assert int(klass) in entities, (doc_id, klass, entities)


def test_classifier_trains_on_a_generated_mimic_directory(tmp_path):
    """MIMIC-III tables in their real column layout (NOTEEVENTS, DIAGNOSES_ICD) → J&W's diabetes task → a model."""
    root = tmp_path / "mimic"
    root.mkdir()
    notes, diagnoses = [NOTE_HEADER], [DIAG_HEADER]
    for i in range(60):
        diabetic = i % 2 == 0
        text = "history of diabetes , insulin given ." if diabetic else "fracture of the left arm , cast ."
        notes.append(f'{i},{i},{1000 + i},2101-01-01,,,Discharge summary,Report,,,"{text}"')
        diagnoses.append(f"{i},{i},{1000 + i},1,{'25000' if diabetic else '8130'}")
    for name, lines in (("NOTEEVENTS", notes), ("DIAGNOSES_ICD", diagnoses)):
        (root / f"{name}.csv").write_text("\n".join(lines) + "\n")
    docs, info = readers.read_mimic("diabetes", {"path": str(root)})
    assert len(docs) == 60 and set(docs["label"]) == {0, 1}
    (model, metrics, predictions), examples = train_briefly(docs, tmp_path / "m", encoder="lstm", epochs=4, lr=0.01)
    assert not isinstance(model, QAModel) and metrics["test"]["n"] == (examples["split"] == "test").sum() > 0


# --- J&W tables: QA rows ---------------------------------------------------------------------------------------


def test_jw_tables_qa_overall_rows_and_per_dataset_epsilon(tmp_path):
    """bAbI rows are compared with J&W's overall τ (all predicted classes pooled), SNLI's per predicted class with
    J&W's per-class numbers; a user's QA/NLI corpus (a run marked ``qa``) is pooled from 4 classes on (J&W's code
    splits by class below 4), with no J&W number; ε is the run's own."""
    from attnaudit.jain_wallace.tables import ALL_CLASSES, JW_TABLE2, write_tables

    rng = np.random.default_rng(0)
    runs = []
    datasets = (("babi1", 0.05, 3), ("sst", 0.01, 2), ("snli", 0.05, 3), ("mine", 0.05, 5), ("nli", 0.05, 3))
    for dataset, epsilon, n_classes in datasets:
        corpus = dataset
        n = 40
        classes = rng.integers(0, n_classes, size=n)
        base = {"id": [str(i) for i in range(n)], "row": np.arange(n), "predicted_class": classes}
        correlation = pd.DataFrame(
            {
                **base,
                **{
                    f"{k}_{a}_{b}": rng.uniform(-1, 1, n) if k == "tau" else rng.uniform(0, 0.1, n)
                    for k in ("tau", "p")
                    for a, b in (("attention", "gradient"), ("attention", "loo"), ("gradient", "loo"))
                },
            }
        )
        permutation = pd.DataFrame(
            {**base, "delta_median": rng.uniform(0, 0.1, n), "max_attention": rng.uniform(size=n)}
        )
        adversarial = pd.DataFrame(
            {
                **base,
                "eps_max_jsd": rng.uniform(0, 0.69, n),
                "n_valid": np.full(n, 5),
                "max_attention": 0.5,
                "adversary_valid": [np.ones(5, bool)] * n,
            }
        )
        paths = {}
        for audit, frame in (("correlation", correlation), ("permutation", permutation), ("adversarial", adversarial)):
            paths[audit] = tmp_path / f"{dataset}_{audit}.parquet"
            frame.to_parquet(paths[audit])
        runs.append(
            {
                "dataset": dataset,
                "corpus": corpus,
                "model": "lstm-additive-base-s0",
                "encoder": "lstm",
                "attention": "additive",
                "regulariser": "base",
                "seed": 0,
                "epsilon": epsilon,
                **paths,
            }
            | ({"qa": True} if dataset in ("babi1", "snli", "mine", "nli") else {})
        )
    tables = write_tables(runs, tmp_path / "out")
    overall = tables["table2"][(tables["table2"]["dataset"] == "babi1")]
    assert set(overall["predicted_class"]) == {ALL_CLASSES}  # J&W report bAbI overall only
    tau_g = overall[overall["measure"] == "tau_g"].iloc[0]
    assert tau_g["jw_mean"] == 0.25 and tau_g["ours_n"] == 40
    expected = pd.read_parquet(runs[0]["correlation"])["tau_attention_gradient"].mean()
    assert tau_g["ours_mean"] == pytest.approx(expected)
    assert "| babi1 | tau_g | lstm | lstm-additive-base-s0 | all |" in (tmp_path / "out" / "table2.md").read_text()
    sst = tables["table2"][tables["table2"]["dataset"] == "sst"]
    assert ALL_CLASSES not in set(sst["predicted_class"])
    mine = tables["table2"][tables["table2"]["dataset"] == "mine"]
    assert (
        set(mine["predicted_class"]) == {ALL_CLASSES} and mine["jw_mean"].isna().all() and (mine["ours_n"] == 40).all()
    )
    assert set(tables["correlation"].query("dataset == 'mine'")["predicted_class"]) == {0, 1, 2, 3, 4, ALL_CLASSES}
    for per_class in ("snli", "nli"):
        rows = tables["table2"][tables["table2"]["dataset"] == per_class]
        assert set(rows["predicted_class"]) == {0, 1, 2} and (rows.groupby("predicted_class")["ours_n"].sum() > 0).all()
    snli_tau_g = tables["table2"].query("dataset == 'snli' and measure == 'tau_g'").set_index("predicted_class")
    assert [snli_tau_g.loc[c, "jw_mean"] for c in (0, 1, 2)] == [JW_TABLE2["snli"][c][0][0] for c in (0, 1, 2)]
    assert tables["table2"].query("dataset == 'nli'")["jw_mean"].isna().all()
    eps = tables["adversarial"].groupby("dataset")["epsilon"].first()
    assert eps["babi1"] == 0.05 and eps["sst"] == 0.01


def _mirror() -> Path | None:
    import os

    env = os.environ.get("ATTNAUDIT_MIRROR")
    here = Path(__file__).resolve().parents[2] / "shared" / "corpora"
    return here if here.is_dir() else (Path(env) if env and Path(env).is_dir() else None)


@pytest.mark.skipif(_mirror() is None, reason="no corpus mirror")
@pytest.mark.parametrize("name", ["babi1", "babi2"])
def test_babi_from_the_mirror_has_jws_counts(name, tmp_path):
    """J&W Table 1 / their code: 10,000 train questions → 8,500 train + 1,500 dev; 1,000 test; pinned sha256."""
    frame, manifest = build_corpus(name, mirror=_mirror(), raw_dir=tmp_path)
    assert frame["split"].value_counts().to_dict() == {"train": 8500, "dev": 1500, "test": 1000}
    assert all(f["verified"] == "pinned sha256" for f in manifest["files"])
    assert manifest["reader"]["questions"]["train"]["answer_not_in_story"] == 0


@pytest.mark.skipif(_mirror() is None, reason="no corpus mirror")
def test_a_user_qa_corpus_is_the_builtin_babi_it_was_written_from(tmp_path):
    """``query_column`` makes a user corpus QA/NLI (J&W §3): bAbI task 1 written out as a CSV (story, question,
    answer, split, id) reads and tokenises to the very documents and examples of the built-in corpus."""
    from attnaudit.corpora.registry import user_spec

    builtin, manifest = build_corpus("babi1", mirror=_mirror(), raw_dir=tmp_path / "raw")
    names = manifest["label_names"]
    path = tmp_path / "babi1.csv"
    written = builtin.assign(answer=[names[label] for label in builtin["label"]]).drop(columns="label")
    written.rename(columns={"text": "story", "query": "question"}).to_csv(path, index=False)
    entry = {"path": str(path), "text_column": "story", "query_column": "question", "label_column": "answer"}
    entry.update(split_column="split", id_column="id", label_names=names)
    assert user_spec("mine", entry).query and not user_spec("mine", {**entry, "query_column": None}).query
    documents, _ = readers.read_user("mine", entry)
    pd.testing.assert_frame_equal(documents, builtin)
    examples, vocab, _ = tokenise_documents(documents, {}, seed=0)
    expected, expected_vocab, _ = tokenise_documents(builtin, {}, seed=0)
    pd.testing.assert_frame_equal(examples, expected)
    assert vocab == expected_vocab and "query_tokens" in examples
    records = written.rename(columns={"text": "story", "query": "question"}).head(10).to_dict("records")
    records[5]["question"] = 7
    path.with_suffix(".jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    with pytest.raises(AttnauditError, match=r"babi1.jsonl:6: column 'question' must be text, found int"):
        readers.read_user("mine", {**entry, "path": str(path.with_suffix(".jsonl"))})
    with pytest.raises(
        AttnauditError, match="corpora.user.mine.query_column: 'story', the column text_column names too"
    ):
        user_spec("mine", {**entry, "query_column": "story"})
    with pytest.raises(AttnauditError, match=r"has no column 'hypothesis' \(corpora.user.mine.query_column"):
        readers.read_user("mine", {**entry, "query_column": "hypothesis"})


def write_user_qa(path: Path, rows: list[tuple[str, str, str]]) -> dict:
    """A user QA corpus (story, question, answer) with ``candidates: passage``; returns its config entry."""
    pd.DataFrame(rows, columns=["story", "question", "answer"]).to_csv(path, index=False)
    return {"path": str(path), "text_column": "story", "query_column": "question", "label_column": "answer"} | {
        "candidates": "passage"
    }


def test_user_qa_candidates_from_the_passage_mask_the_answers_as_cnns_entities(tmp_path):
    """``candidates: passage`` (J&W §3, their CNN model): the documents carry each row's answer word, tokenised as
    the passages are; a row whose answer is not in its passage is dropped and counted; the model may answer only
    the classes whose word is in the passage (logits −inf elsewhere). Without it every class is a candidate."""
    from attnaudit.corpora.registry import user_spec

    stories = [
        ("Mary went to the Kitchen . John went to the garden", "where is Mary", "kitchen"),
        ("John moved to the office . Mary went to the garden", "where is John", "office"),
        ("Sandra went to the garden . Mary went to the office", "where is Sandra", "garden"),
        ("Daniel went to the hallway", "where is Daniel", "kitchen"),  # not in its passage
    ] * 10
    entry = write_user_qa(tmp_path / "qa.csv", stories)
    documents, info = readers.read_user("mine", entry)
    assert info["label_names"] == ["garden", "kitchen", "office"]
    assert list(documents["answer"][:4]) == ["kitchen", "office", "garden", "kitchen"]
    examples, vocab, stats = tokenise_documents(documents, {}, seed=0, where="datasets.mine")
    assert stats["dropped"]["answer not in passage"] == 10 and len(examples) == 30
    ids = candidate_ids(examples, vocab, 3)
    assert [next(w for w, i in vocab.items() if i == c) for c in ids] == ["garden", "kitchen", "office"]
    torch.manual_seed(0)
    cfg = QAConfig(vocab_size=len(vocab), num_classes=3, encoder="lstm", embedding_dim=6, lstm_hidden=4)
    model = QAModel(replace(cfg, candidate_ids=ids), torch.randn(len(vocab), 6)).eval()
    split = examples["split"].iloc[0]
    encoded = encode_split(examples, vocab, split)
    batch = encoded.batch(np.arange(len(encoded)))
    logits = model(batch).logits
    passages = [set(tokens) for tokens in examples[examples["split"] == split]["tokens"]]
    allowed = torch.tensor([[name in words for name in info["label_names"]] for words in passages])
    assert torch.isfinite(logits).eq(allowed).all() and allowed.sum(dim=1).eq(2).all()
    every = readers.read_user("mine", {**entry, "candidates": "all"})[0]
    assert "answer" not in every and candidate_ids(tokenise_documents(every, {}, seed=0)[0], vocab, 3) == ()
    with pytest.raises(AttnauditError, match="candidates: passage masks a QA model's answers .* needs query_column"):
        user_spec("mine", {**entry, "query_column": None})


@pytest.mark.parametrize(
    ("answers", "said"),
    [
        (["new york", "paris"], r"answers must be one token each, .*\{'new york': \['new', 'york'\]\} are not"),
        (["room 2", "room"], r"one token each.*'room 2': \['room', 'qqq'\]"),
        (["2", "3"], r"tokenise alike \(lowercase, every token with a digit → qqq\).*\{'qqq': \['2', '3'\]\}"),
    ],
)
def test_user_qa_answers_that_no_passage_token_could_name_stop(tmp_path, answers, said):
    """With ``candidates: passage`` an answer is a class's word among the passage's tokens: an answer of several
    tokens, or two answers that tokenise alike, stop, naming them."""
    rows = [(f"we met in {answer} and then went home", "where", answer) for answer in answers] * 10
    documents, _ = readers.read_user("mine", write_user_qa(tmp_path / "qa.csv", rows))
    with pytest.raises(AttnauditError, match=f"datasets.mine: .*{said}"):
        tokenise_documents(documents, {}, seed=0, where="datasets.mine")


def test_cnn_examples_keep_their_entities_as_answers(tmp_path):
    """The answer tokens of CNN (``@entity`` words) are their words: the tokeniser keeps them, no block is dropped."""
    docs, _ = cnn_documents(tmp_path)
    examples, _, stats = tokenise_documents(docs, {}, seed=0)
    assert stats["dropped"]["answer not in passage"] == 0
    expected = docs.set_index("id").loc[examples["id"], "answer"]
    assert examples["answer"].tolist() == expected.tolist()


def test_jw_heatmaps_of_a_qa_dataset_show_each_instance_its_query(tmp_path):
    """J&W's adversarial heatmap of a QA/NLI instance shows the question or hypothesis (markers dropped, escaped)
    above the passage's original and adversarial attention; a classification dataset's shows no query row."""
    from attnaudit.jain_wallace.heatmaps import write_heatmaps

    passages = [["<s>", "mary", "went", "home", "</s>"], ["<s>", "john", "left", "</s>"]]
    queries = [["<s>", "where", "is", "mary", "</s>"], ["<s>", "is", "<b>john</b>", "here", "</s>"]]
    dataset = tmp_path / "dataset"
    dataset.mkdir()
    examples = pd.DataFrame({"id": ["a", "b"], "split": "test", "label": [0, 1], "tokens": passages})
    examples.assign(query_tokens=queries).to_parquet(dataset / "examples.parquet")
    adversarial = pd.DataFrame(
        {"id": ["a", "b"], "row": [0, 1], "label": [0, 1], "predicted_class": [0, 1], "n_valid": [1, 1]}
        | {"eps_max_jsd": [0.4, 0.2], "max_attention": [0.5, 0.6], "best_tvd": [0.01, 0.02]}
        | {
            "attention": [np.full(5, 0.2), np.full(4, 0.25)],
            "adversarial_attention": [np.full(5, 0.2), np.full(4, 0.25)],
        }
    )
    adversarial.to_parquet(tmp_path / "adversarial.parquet")
    write_heatmaps("mine", "m-s0", tmp_path / "adversarial.parquet", dataset, tmp_path / "qa.html")
    page = (tmp_path / "qa.html").read_text()
    assert page.count("<span class='label'>Query</span>") == 2
    assert "<bdi>where is mary</bdi>" in page and "<bdi>is &lt;b&gt;john&lt;/b&gt; here</bdi>" in page
    examples.to_parquet(dataset / "examples.parquet")
    write_heatmaps("mine", "m-s0", tmp_path / "adversarial.parquet", dataset, tmp_path / "plain.html")
    assert "Query" not in (tmp_path / "plain.html").read_text()
