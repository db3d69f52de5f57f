"""LRP-ε (B&F §3.2): the hand-written forward matches the model, relevance is conserved per encoder, and for the
piecewise-linear encoders LRP-0 without biases equals gradient × input (with α held constant)."""

import pytest
import torch
from conftest import ENCODERS, tiny_batch, tiny_model

from attnaudit.importance import get_method
from attnaudit.importance._forward import class_scores
from attnaudit.importance.lrp import _RULES, lrp_relevance


@pytest.mark.parametrize("encoder", ENCODERS)
def test_lrp_forward_reproduces_the_encoder(encoder):
    """The traced forward (LSTM per direction, backward direction from each instance's last real token) gives
    the packed encoder's states on every real position."""
    model = tiny_model(encoder, seed=3)
    batch = tiny_batch(lengths=(4, 9, 2, 6, 9), seed=4)
    with torch.no_grad():
        embedded = model.embed(batch)
        expected = model.encode(embedded, batch.mask)
        traced = _RULES[encoder](model, embedded, batch.mask).hidden()
    mask = batch.mask.unsqueeze(-1)
    torch.testing.assert_close(traced * mask, expected * mask, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("attention", ["additive", "dot"])
@pytest.mark.parametrize("encoder", ENCODERS)
@pytest.mark.parametrize("output", ["margin", "logit"])
def test_relevance_is_conserved(encoder, attention, output):
    """Σ input relevance + relevance absorbed by biases/ε = f_c (per instance), and f_c is the model's output."""
    model = tiny_model(encoder, attention, seed=5, num_classes=3)
    batch = tiny_batch(lengths=(5, 8, 3), seed=6)
    relevance = lrp_relevance(model, batch, epsilon=1e-2, output=output)
    with torch.no_grad():
        logits = model(batch).logits
    expected = class_scores(logits, "margin" if output == "margin" else "logit")
    torch.testing.assert_close(
        relevance.score, expected.gather(1, logits.argmax(-1, keepdim=True)).squeeze(1), rtol=1e-5, atol=1e-5
    )
    total = relevance.embedded.sum(dim=(1, 2)) + relevance.absorbed
    torch.testing.assert_close(total, relevance.score, rtol=1e-4, atol=1e-5)
    assert torch.all(relevance.embedded[~batch.mask] == 0)


@pytest.mark.parametrize("encoder", ENCODERS)
def test_relevance_is_fully_conserved_without_biases(encoder):
    """No biases, ε → 0: nothing is absorbed, the input relevance sums to f_c itself."""
    model = tiny_model(encoder, seed=7, zero_bias=True)
    batch = tiny_batch(lengths=(6, 4, 9), seed=8)
    relevance = lrp_relevance(model, batch, epsilon=1e-9)
    torch.testing.assert_close(relevance.embedded.sum(dim=(1, 2)), relevance.score, rtol=1e-4, atol=1e-5)
    assert relevance.absorbed.abs().max() < 1e-5


@pytest.mark.parametrize("encoder", ["cnn", "average"])
def test_lrp0_equals_gradient_times_input_for_relu_encoders(encoder):
    """For a bias-free ReLU network LRP-0 is gradient × input (Montavon et al.), here with α detached."""
    model = tiny_model(encoder, seed=9, zero_bias=True)
    batch = tiny_batch(lengths=(6, 8), seed=10)
    relevance = lrp_relevance(model, batch, epsilon=1e-9)
    embedded = model.embed(batch).detach().requires_grad_(True)
    logits = model(batch, embedded=embedded, detach_attention=True).logits
    margin = class_scores(logits, "margin").gather(1, logits.argmax(-1, keepdim=True)).sum()
    (grad,) = torch.autograd.grad(margin, embedded)
    torch.testing.assert_close(relevance.embedded, grad * embedded.detach(), rtol=1e-4, atol=1e-5)


def test_lstm_gates_receive_no_relevance():
    """Signal-take-all: x_t reaches relevance only through the candidate g_t (the gates get none), so with the
    candidate's input weights zeroed the inputs get no relevance although the gates still read them."""
    model = tiny_model("lstm", seed=11)
    hidden = model.cfg.lstm_hidden
    with torch.no_grad():
        for suffix in ("", "_reverse"):
            getattr(model.encoder.rnn, f"weight_ih_l0{suffix}")[2 * hidden : 3 * hidden].zero_()
    batch = tiny_batch(lengths=(5, 7), seed=12)
    relevance = lrp_relevance(model, batch)
    assert relevance.embedded.abs().max() < 1e-6  # x only reaches relevance through the candidate g


def test_registry_lrp_sums_over_the_embedding():
    model = tiny_model("lstm", seed=13)
    batch = tiny_batch(seed=14)
    scores = get_method("lrp", epsilon=1e-3).attribute(model, batch)
    torch.testing.assert_close(scores, lrp_relevance(model, batch, 1e-3).embedded.sum(-1))


@pytest.mark.parametrize("encoder", ["lstm", "cnn", "average"])
@pytest.mark.parametrize("output", ["margin", "logit"])
@pytest.mark.parametrize("candidates", [(), (10, 11, 12, 13, 14)])
def test_relevance_of_a_qa_model_is_conserved_with_the_query_held_fixed(encoder, output, candidates):
    """J&W's QA decoder W₂ tanh(W₁p h_α + b₁ + W₁q q): f_c is the model's own (its predicted class, a candidate),
    and Σ input relevance + what biases, ε and the query's share W₁q q absorb = f_c."""
    from test_qa import qa_batch, qa_model

    model, batch = qa_model(encoder, candidates=candidates, seed=2), qa_batch(seed=4, n=5)
    with torch.no_grad():
        for parameter in model.parameters():  # away from the near-zero initialisation
            parameter.add_(0.3 * torch.randn_like(parameter))
        out = model(batch)
    relevance = lrp_relevance(model, batch, epsilon=1e-2, output=output)
    assert torch.equal(relevance.target, out.logits.argmax(dim=-1))
    q, _ = model.split_query(out.query)
    with torch.no_grad():
        unmasked = model.output(
            torch.tanh(model.w_passage(torch.einsum("bt,btm->bm", out.attention, out.hidden)) + model.w_query(q))
        )
    expected = class_scores(unmasked, output).gather(1, relevance.target[:, None]).squeeze(1)
    torch.testing.assert_close(relevance.score, expected, rtol=1e-5, atol=1e-5)
    total = relevance.embedded.sum(dim=(1, 2)) + relevance.absorbed
    torch.testing.assert_close(total, relevance.score, rtol=1e-4, atol=1e-5)
    assert torch.all(relevance.embedded[~batch.mask] == 0) and relevance.embedded.abs().sum() > 0
