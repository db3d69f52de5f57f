"""The model sheet and what it can express (W&P, T&Š): objective terms against hand computations, architectures,
frozen/guided attention, imitation, and the checks that stop a bad sheet before anything trains."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import MARKERS, VOCAB, tiny_batch, tiny_model

from attnaudit import AttnauditError
from attnaudit.modelsheet import DIVERGENCES, final_epoch_sources, parse_model_id, sheet
from attnaudit.objectives import TrainingContext, imitate, term_names, terms_for
from attnaudit.objectives.imitate import Imitate, attention_jsd, attention_kl
from attnaudit.objectives.mlm import mlm_corrupt
from attnaudit.train import train_model


def context(**fields):
    return TrainingContext(num_classes=2, vocab_size=VOCAB, marker_ids=tuple(MARKERS), **fields)


# -- objective terms -------------------------------------------------------------------------------------------------
def test_terms_follow_the_variant_fields():
    assert term_names({}) == ["classify"]
    assert term_names({"regulariser": "tying"}) == ["classify", "tying"]
    assert term_names({"regulariser": "mlm"}) == ["classify", "mlm"]
    assert term_names({"regulariser": "residual"}) == ["classify"]  # changes h, adds no loss
    assert term_names({"objective": "imitate"}) == ["imitate"]


def test_tying_loss_is_delta_times_mean_squared_distance():
    """T&Š Eq. 3 by hand: δ/N Σ over real tokens of ‖h_t − e_t‖² (N real tokens in the batch)."""
    model = tiny_model("lstm", lstm_hidden=4)  # 2 × 4 = the embedding size 8
    batch = tiny_batch(seed=4)
    out = model(batch)
    (term,) = [t for t in terms_for({"regulariser": "tying", "delta": 20.0}, context()) if t.name == "tying"]
    expected = 0.0
    for b in range(len(batch.ids)):
        for t in range(int(batch.lengths[b])):
            expected += float(((out.hidden[b, t] - out.embedded[b, t]) ** 2).sum().detach())
    expected = 20.0 * expected / int(batch.mask.sum())
    assert term.loss(model, batch, out).item() == pytest.approx(expected, rel=1e-5)


def test_tying_and_mlm_refuse_hidden_states_of_another_size():
    model, batch = tiny_model("lstm"), tiny_batch()  # 2 × 5 ≠ 8
    out = model(batch)
    for regulariser in ("tying", "mlm"):
        term = terms_for({"regulariser": regulariser}, context())[1]
        with pytest.raises(AttnauditError, match="lstm_hidden"):
            term.loss(model, batch, out)


def test_mlm_masking_is_bert_80_10_10_of_p():
    """Footnote 4 of T&Š (BERT): p = 0.15 of the candidates selected; of those 80 % masked, 10 % random, 10 % kept."""
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(4, 1000, (400, 250), generator=generator)
    candidates = torch.ones_like(tokens, dtype=torch.bool)
    candidates[:, 0] = candidates[:, -1] = False  # the markers
    corrupted, selected = mlm_corrupt(tokens, candidates, 0.15, 0, 4, 1000, torch.Generator().manual_seed(1))
    assert not selected[:, [0, -1]].any()
    assert selected.float().sum() / candidates.sum() == pytest.approx(0.15, abs=0.003)
    masked = (corrupted == 0) & selected
    changed = (corrupted != tokens) & (corrupted != 0) & selected
    kept = (corrupted == tokens) & selected
    n = selected.sum().item()
    assert masked.sum().item() / n == pytest.approx(0.8, abs=0.01)
    # a random word may draw the original (1 in 996): "random" ≈ 10 %, "kept" ≈ 10 % plus those
    assert changed.sum().item() / n == pytest.approx(0.1, abs=0.01)
    assert kept.sum().item() / n == pytest.approx(0.1, abs=0.01)
    assert torch.equal(corrupted[~selected], tokens[~selected])
    again, _ = mlm_corrupt(tokens, candidates, 0.15, 0, 4, 1000, torch.Generator().manual_seed(1))
    assert torch.equal(again, corrupted)  # seeded


def test_mlm_loss_is_cross_entropy_through_the_frozen_tied_decoder():
    model = tiny_model("lstm", lstm_hidden=4)
    batch = tiny_batch(lengths=(9, 9, 9, 9), seed=5)
    spec = {"regulariser": "mlm", "eta": 0.5, "mlm_probability": 0.5}
    term = terms_for(spec, context(seed=3))[1]
    loss = term.loss(model, batch, model(batch))
    corrupted, selected = mlm_corrupt(
        batch.tokens, batch.mask & (batch.tokens > 3), 0.5, 0, 4, VOCAB, torch.Generator().manual_seed(3 * 7919 + 17)
    )
    hidden = model.encode(model.embedding(corrupted), batch.mask)
    logits = hidden[selected] @ model.embedding.weight.T
    expected = 0.5 * torch.nn.functional.cross_entropy(logits, batch.tokens[selected])
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    model.zero_grad()
    hidden_only = term.loss(model, batch, model(batch))
    hidden_only.backward()
    assert model.encoder.rnn.weight_ih_l0.grad.abs().sum() > 0  # the encoder learns from it


def test_imitation_kl_skips_markers_and_stays_finite():
    alpha = torch.tensor([[0.1, 0.6, 0.3, 0.0]])
    teacher = torch.tensor([[0.0, 0.5, 0.5, 0.0]])  # W&P's teachers put 0 on <s>, </s>
    support = torch.tensor([[False, True, True, False]])
    p, q = torch.tensor([0.6, 0.3]) / 0.9, torch.tensor([0.5, 0.5])
    expected = float((p * (p / q).log()).sum())
    assert float(attention_kl(alpha, teacher, support)) == pytest.approx(expected, rel=1e-6)


def test_imitation_jsd_is_tutek_snajder_eq_8_over_the_non_marker_tokens():
    alpha = torch.tensor([[0.1, 0.6, 0.3, 0.0], [0.0, 0.2, 0.8, 0.0]])
    teacher = torch.tensor([[0.0, 0.5, 0.5, 0.0], [0.0, 0.2, 0.8, 0.0]])
    support = torch.tensor([[False, True, True, False]] * 2)
    p, q = torch.tensor([0.6, 0.3]) / 0.9, torch.tensor([0.5, 0.5])
    m = (p + q) / 2
    expected = 0.5 * float((p * (p / m).log()).sum()) + 0.5 * float((q * (q / m).log()).sum())
    divergence = attention_jsd(alpha, teacher, support)
    assert float(divergence[0]) == pytest.approx(expected, rel=1e-6)
    assert float(divergence[1]) == pytest.approx(0.0, abs=1e-7)  # the same attention
    # one-hot attention on disjoint tokens: JSD reaches ln 2, where KL grows without bound (clamped at 1e-10)
    apart = attention_jsd(torch.tensor([[0.0, 1.0, 0.0, 0.0]]), torch.tensor([[0.0, 0.0, 1.0, 0.0]]), support[:1])
    assert float(apart) == pytest.approx(np.log(2), rel=1e-6)
    assert (
        float(attention_kl(torch.tensor([[0.0, 1.0, 0.0, 0.0]]), torch.tensor([[0.0, 0.0, 1.0, 0.0]]), support[:1]))
        > 20
    )


def test_the_imitate_term_trains_the_divergence_the_variant_names():
    """T&Š Eq. 6 (``divergence: jsd``) and W&P's code (KL, the default) give the same TVD and differ in the
    attention term only; the gradient of either pushes α away from the teacher's."""
    context = TrainingContext(num_classes=2, vocab_size=10, marker_ids=(2, 3))
    batch = SimpleNamespace(
        tokens=torch.tensor([[2, 5, 6, 7, 3]]),
        mask=torch.ones(1, 5, dtype=torch.bool),
        teacher_attention=torch.tensor([[0.0, 0.6, 0.3, 0.1, 0.0]]),
        teacher_probs=torch.tensor([[0.3, 0.7]]),
    )
    support = torch.tensor([[False, True, True, True, False]])  # the markers <s>, </s> aside
    scores = torch.tensor([[-1e9, 0.2, 0.1, 0.3, -1e9]], requires_grad=True)
    probs = torch.tensor([[0.4, 0.6]])
    tvd = 0.5 * float((probs - batch.teacher_probs).abs().sum())
    assert set(imitate.DIVERGENCES) == set(DIVERGENCES)  # the sheet's check names what the term trains
    for name, divergence in imitate.DIVERGENCES.items():
        term = Imitate({"lambda": 2.0, "divergence": name}, context)
        loss = term.loss(None, batch, SimpleNamespace(attention=scores.softmax(-1), probs=probs))
        alpha = scores.detach().softmax(-1)
        expected = tvd - 2.0 * float(divergence(alpha, batch.teacher_attention, support))
        assert float(loss.detach()) == pytest.approx(expected), name
        (grad,) = torch.autograd.grad(loss, scores)
        stepped = (scores.detach() - 0.1 * grad).softmax(-1)
        before = divergence(alpha, batch.teacher_attention, support)
        assert float(divergence(stepped, batch.teacher_attention, support)) > float(before), name
    with pytest.raises(AttnauditError, match="divergence 'js' is not one of kl, jsd"):
        Imitate({"divergence": "js"}, context)


# -- architectures ---------------------------------------------------------------------------------------------------
def test_concat_and_residual_hidden_states():
    batch = tiny_batch()
    concat = tiny_model("lstm", hidden_mode="concat")
    out = concat(batch)
    assert out.hidden.shape[-1] == 2 * 5 + 8
    torch.testing.assert_close(out.hidden[..., 10:], out.embedded * batch.mask[..., None])
    residual = tiny_model("lstm", hidden_mode="residual", lstm_hidden=4)
    out = residual(batch)
    states = residual.encoder(out.embedded, batch.mask)
    torch.testing.assert_close(out.hidden, states + out.embedded * batch.mask[..., None])
    with pytest.raises(AttnauditError, match="lstm_hidden: 4"):
        tiny_model("lstm", hidden_mode="residual")  # 2 × 5 ≠ 8


def test_uniform_attention_is_exactly_uniform_and_learns_nothing():
    model, batch = tiny_model("lstm", "uniform"), tiny_batch(lengths=(5, 9, 2))
    out = model(batch)
    content = batch.mask & (batch.tokens > 3)
    for b in range(3):
        support = content[b] if content[b].any() else batch.mask[b]
        expected = support.float() / support.sum()
        assert torch.equal(out.attention[b], expected)
    assert not any(p.requires_grad for p in model.attention.parameters())
    assert not out.attention.requires_grad  # no gradient flows into (or through) the attention


def test_guided_attention_is_the_guide():
    model, batch = tiny_model("mlp", "guided"), tiny_batch(guide=True)
    torch.testing.assert_close(model(batch).attention, batch.guide)
    with pytest.raises(AttnauditError, match="guide"):
        model(tiny_batch())


# -- training from a teacher --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def teacher(planted_dataset, planted_model_dir):
    return planted_dataset, planted_model_dir / "predictions.parquet"


def test_guided_model_uses_the_teachers_attention_in_training_and_testing(teacher, tmp_path):
    from attnaudit.train import run

    dataset, predictions = teacher
    spec = {"encoder": "mlp", "attention": "guided", "epochs": 2, "variant": "mlp-guided", "seed": 0}
    run(
        str(dataset / "dataset"),
        str(dataset / "embeddings" / "matrix.npy"),
        str(tmp_path),
        spec,
        1,
        guide_predictions=str(predictions),
    )
    ours = pd.read_parquet(tmp_path / "predictions.parquet").set_index("id")
    theirs = pd.read_parquet(predictions).set_index("id")
    for split in ("train", "test"):
        ids = ours.index[ours["split"] == split]
        np.testing.assert_allclose(
            np.concatenate(ours.loc[ids, "attention"].to_list()),
            np.concatenate(theirs.loc[ids, "attention"].to_list()),
            atol=1e-6,
        )
    # the saved model carries its guides, so the audits can rebuild it from model.pt alone
    from attnaudit.auditing import load_audit_inputs

    inputs = load_audit_inputs(dataset / "dataset", tmp_path, "test")
    batch = inputs.encoded.batch(np.arange(4))
    expected = [np.asarray(theirs.loc[i, "attention"]) for i in batch.ids]
    for row, attention in enumerate(expected):
        np.testing.assert_allclose(
            inputs.model(batch).attention[row, : len(attention)].detach().numpy(), attention, atol=1e-6
        )


def test_imitation_at_lambda_zero_reproduces_the_teacher(teacher):
    dataset, predictions = teacher
    spec = {"encoder": "average", "objective": "imitate", "lambda": 0.0, "epochs": 6, "seed": 1}
    _, metrics, frame = train_model(
        str(dataset / "dataset"),
        str(dataset / "embeddings" / "matrix.npy"),
        spec,
        progress=False,
        teacher_predictions=str(predictions),
    )
    theirs = pd.read_parquet(predictions).set_index("id")
    train = frame[frame["split"] == "train"].set_index("id")
    tvd = 0.5 * np.abs(np.stack(train["probs"]) - np.stack(theirs.loc[train.index, "probs"])).sum(axis=1)
    assert tvd.mean() < 0.05, tvd.mean()
    assert (train["predicted"] == theirs.loc[train.index, "predicted"]).mean() > 0.95
    assert {"train_loss_imitate", "dev_loss"} <= set(metrics["history"][0])


def test_regularised_training_logs_every_term(planted_dataset):
    spec = {"encoder": "lstm", "regulariser": "tying", "delta": 10.0, "lstm_hidden": 8, "epochs": 1, "clip": 5}
    _, metrics, _ = train_model(
        str(planted_dataset / "dataset"), str(planted_dataset / "embeddings" / "matrix.npy"), spec, progress=False
    )
    record = metrics["history"][0]
    assert record["train_loss"] == pytest.approx(record["train_loss_classify"] + record["train_loss_tying"])


def test_an_mlm_variant_trains_with_the_embeddings_it_was_given(planted_dataset):
    """T&Š §3.1 keep the matrix their MLM decoder is tied to frozen during training: an mlm variant of the sheet,
    or a hand-written ``train --spec`` with the same fields, leaves the embeddings as given, unless it says
    ``freeze_embeddings: false``."""
    fields = {"regulariser": "mlm", "eta": 1.0, "lstm_hidden": 8, "epochs": 1}
    variants = {"mlm": fields, "mlm-trained": {**fields, "freeze_embeddings": False}}
    models = sheet("planted", {"corpus": "planted", "embeddings": {"dim": 16}, "models": variants})
    given = torch.from_numpy(np.load(planted_dataset / "embeddings" / "matrix.npy")).float()
    args = (str(planted_dataset / "dataset"), str(planted_dataset / "embeddings" / "matrix.npy"))
    kept = {}
    for name, spec in {
        "by hand": fields,
        "mlm-s0": models["mlm-s0"],
        "mlm-trained-s0": models["mlm-trained-s0"],
    }.items():
        model = train_model(*args, spec, progress=False)[0]
        real = torch.arange(len(given)) != model.cfg.pad_index
        kept[name] = torch.equal(model.embedding.weight.detach()[real], given[real])
    assert kept == {"by hand": True, "mlm-s0": True, "mlm-trained-s0": False}


def test_nan_in_a_term_names_the_term(planted_dataset):
    spec = {"encoder": "lstm", "regulariser": "tying", "delta": float("inf"), "lstm_hidden": 8, "epochs": 1}
    with pytest.raises(AttnauditError, match=r"the tying loss is .* at epoch 0, batch 0"):
        train_model(
            str(planted_dataset / "dataset"), str(planted_dataset / "embeddings" / "matrix.npy"), spec, progress=False
        )


# -- the sheet and its checks ---------------------------------------------------------------------------------------
def test_grid_and_sheet_expand_to_readable_ids():
    entry = {
        "corpus": "sst",
        "grid": [
            {"encoders": ["lstm"], "attentions": ["additive"], "seeds": [0]},
            {"encoders": ["lstm"], "attentions": ["additive"], "seeds": [1]},
        ],
        "models": {
            "lstm-additive-tying20": {"lstm_hidden": 150, "regulariser": "tying", "delta": 20, "seeds": [0, 1]},
            "mlp-guided-base": {"encoder": "mlp", "attention": "guided", "guide": "lstm-additive-base"},
            "lstm-adv1": {"objective": "imitate", "teacher": "lstm-additive-base-s1", "lambda": 1},
        },
    }
    models = sheet("sst", entry)
    assert list(models) == [
        "lstm-additive-base-s0",
        "lstm-additive-base-s1",
        "lstm-additive-tying20-s0",
        "lstm-additive-tying20-s1",
        "mlp-guided-base-s0",
        "lstm-adv1-s0",
    ]
    assert models["mlp-guided-base-s0"]["guide"] == "lstm-additive-base-s0"  # a variant: the student's seed
    assert models["lstm-adv1-s0"]["teacher"] == "lstm-additive-base-s1"  # a model id: that model
    assert models["lstm-additive-tying20-s1"] | {} == {**models["lstm-additive-tying20-s1"], "seed": 1}
    assert parse_model_id("lstm-additive-mlm0.1-s12") == {"variant": "lstm-additive-mlm0.1", "seed": 12}


def test_last_epoch_models_are_read_off_the_run_with_the_same_training_fields():
    """A ``selection: last`` model is another model's run when only the selection fields (and the name) differ and
    that run goes through every epoch; any other field, a missing seed or a twin that stops early means a run of
    its own."""
    entry = {
        "corpus": "sst",
        "grid": {"encoders": ["lstm"], "attentions": ["additive"], "seeds": [0, 1]},
        "models": {
            "lstm-additive-last": {"selection": "last", "seeds": [0, 1, 2]},  # s2: no best-epoch run
            "lstm-auc-last": {"selection": "last", "selection_metric": "roc_auc"},
            "lstm-fast": {"lr": 0.01, "patience": 2},  # stops early: its final epoch is not the eighth
            "lstm-fast-last": {"selection": "last", "lr": 0.01},
            "lstm-slow-last": {"selection": "last", "lr": 0.0001},  # no twin
            "lstm-patient-last": {"patience": 2, "selection": "last"},  # patience does not apply to "last"
        },
    }
    assert final_epoch_sources(sheet("sst", entry)) == {
        "lstm-additive-last-s0": "lstm-additive-base-s0",
        "lstm-additive-last-s1": "lstm-additive-base-s1",
        "lstm-auc-last-s0": "lstm-additive-base-s0",
        "lstm-patient-last-s0": "lstm-additive-base-s0",
    }


@pytest.mark.parametrize(
    "models,message",
    [
        (
            {"x": {"regulariser": "tying", "delta": -1, "lstm_hidden": 150}},
            r"models\.x\.delta: expected a non-negative",
        ),
        ({"x": {"regulariser": "tying", "delta": "big", "lstm_hidden": 150}}, r"models\.x\.delta"),
        ({"x": {"regulariser": "residual"}}, r"models\.x\.lstm_hidden: .*needs lstm_hidden: 150"),
        (
            {"x": {"regulariser": "mlm", "lstm_hidden": 150, "lambda": 1}},
            r"models\.x\.lambda: set, but it does not apply",
        ),
        ({"x": {"attention": "guided"}}, r"models\.x\.guide: guided attention"),
        ({"x": {"objective": "imitate"}}, r"models\.x\.teacher: the imitate objective"),
        ({"x": {"divergence": "jsd"}}, r"models\.x\.divergence: set, but it does not apply"),
        (
            {"x": {"objective": "imitate", "teacher": "lstm-additive-base-s0", "divergence": "js"}},
            r"models\.x\.divergence: 'js' is not one of kl, jsd",
        ),
        ({"x": {"objective": "imitate", "teacher": "nope-s0"}}, r"models\.x\.teacher: 'nope-s0' names no model"),
        (
            {"x": {"attention": "uniform", "objective": "imitate", "teacher": "lstm-additive-base-s0"}},
            r"models\.x\.attention: uniform attention learns nothing, so the imitate objective",
        ),
        (
            {
                "x": {
                    "encoder": "mlp",
                    "attention": "guided",
                    "guide": "lstm-additive-base-s0",
                    "objective": "imitate",
                    "teacher": "lstm-additive-base-s0",
                }
            },
            r"models\.x\.attention: guided attention learns nothing",
        ),
        ({"x": {"regulariser": "sparse"}}, r"models\.x\.regulariser: 'sparse' is not one of"),
        ({"x-s1": {}}, r"models\.x-s1: a variant name"),
        ({"Bad_Name": {}}, r"a variant name"),
        ({"lstm-additive-base": {}}, r"the grid already generates this variant"),
        (
            {"a": {"objective": "imitate", "teacher": "b"}, "b": {"objective": "imitate", "teacher": "a"}},
            r"teachers form a cycle: a-s0 → b-s0 → a-s0",
        ),
    ],
)
def test_bad_sheets_stop_naming_the_key(models, message):
    entry = {"corpus": "sst", "grid": {"encoders": ["lstm"], "attentions": ["additive"]}, "models": models}
    with pytest.raises(AttnauditError, match=message):
        sheet("sst", entry)


def test_a_regulariser_that_compares_h_with_e_needs_their_sizes_equal_with_pretrained_vectors_too():
    """The vectors file's dimension is embeddings.dim (checked at the dry run), so T&Š's residual, tying and MLM
    need 2 × lstm_hidden = that dimension whether the vectors are trained or a user's file."""
    entry = {"corpus": "sst", "grid": {"encoders": ["lstm"], "attentions": ["additive"]}}
    entry |= {"embeddings": {"pretrained": "glove.6B.100d.txt", "dim": 100}}
    with pytest.raises(AttnauditError, match=r"models\.x\.lstm_hidden: .*100-d embedding .*needs lstm_hidden: 50"):
        sheet("sst", entry | {"models": {"x": {"regulariser": "tying", "delta": 20, "lstm_hidden": 150}}})
    assert "x-s0" in sheet("sst", entry | {"models": {"x": {"regulariser": "tying", "delta": 20, "lstm_hidden": 50}}})


def test_metrics_record_the_variant(planted_model_dir):
    metrics = json.loads((planted_model_dir / "metrics.json").read_text())
    assert metrics["model"]["objective"] == "classify" and metrics["model"]["regulariser"] == "base"
