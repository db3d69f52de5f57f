"""The model interface (docs/architecture.md), for every encoder × attention."""

import numpy as np
import pytest
import torch
from conftest import tiny_model

from attnaudit.data import collate
from attnaudit.models import load_model, save_model

VARIANTS = [(e, a) for e in ("lstm", "cnn", "average") for a in ("additive", "dot")]


def make(encoder, attention, seed=0, **fields):
    sizes = {"embedding_dim": 12, "lstm_hidden": 8, "cnn_filters": 4, "average_hidden": 16}
    return tiny_model(
        encoder,
        attention,
        seed,
        randomise=False,
        vocab_size=30,
        cnn_kernels=(1, 3, 5, 7),
        **{**sizes, "marker_ids": (), **fields},
    )


def sequences(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(1, 30, size=n) for n in (7, 3, 5, 1)]


@pytest.mark.parametrize("encoder,attention", VARIANTS)
def test_attention_is_masked_and_normalised(encoder, attention):
    model, batch = make(encoder, attention), collate(sequences())
    out = model(batch)
    assert torch.all(out.attention[~batch.mask] == 0)
    torch.testing.assert_close(out.attention.sum(-1), torch.ones(4))
    assert out.hidden.shape[:2] == batch.tokens.shape and out.embedded.shape[:2] == batch.tokens.shape


@pytest.mark.parametrize("attend_to_markers", [False, True])
@pytest.mark.parametrize("attention", ["additive", "dot"])
def test_learned_attention_leaves_out_the_sentence_markers(attention, attend_to_markers):
    """J&W's code masks <s>, </s> out of the attention softmax: α is 0 on them and sums to 1 over the other real
    tokens, unless the model attends to markers; an instance of markers only keeps them (something to attend to)."""
    model = make("lstm", attention, marker_ids=(1, 2), attend_to_markers=attend_to_markers)
    rng = np.random.default_rng(3)
    seqs = [np.array([1, *rng.integers(3, 30, size=n), 2]) for n in (6, 1, 3)] + [np.array([1, 2])]
    batch = collate(seqs)
    alpha = model(batch).attention
    on_markers = alpha[:3].gather(1, torch.tensor([[0, len(s) - 1] for s in seqs[:3]]))
    assert (on_markers > 0).all() if attend_to_markers else (on_markers == 0).all()
    torch.testing.assert_close(alpha.sum(-1), torch.ones(4))
    assert (alpha[3, :2] > 0).all()
    without = make("lstm", attention, marker_ids=(1, 2), attend_to_markers=not attend_to_markers)
    without.load_state_dict(model.state_dict())  # the same weights: only the support differs
    assert not torch.allclose(without(batch).attention[:3], alpha[:3])


@pytest.mark.parametrize("encoder,attention", VARIANTS)
def test_padding_does_not_change_predictions(encoder, attention):
    model, seqs = make(encoder, attention), sequences()
    together = model(collate(seqs)).probs
    alone = torch.cat([model(collate([s])).probs for s in seqs])
    torch.testing.assert_close(together, alone, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("encoder,attention", VARIANTS)
def test_given_attention_and_decode_reproduce_the_forward_pass(encoder, attention):
    model, batch = make(encoder, attention), collate(sequences())
    out = model(batch)
    torch.testing.assert_close(model(batch, attention=out.attention).logits, out.logits)
    torch.testing.assert_close(model.decode(out.hidden, out.attention, out.query), out.logits)
    uniform = batch.mask.float() / batch.mask.sum(-1, keepdim=True)
    assert not torch.allclose(model(batch, attention=uniform).logits, out.logits)


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("layers", [1, 3])
def test_lstm_encoder_equals_packed_nn_lstm(training, layers):
    """The two-direction encoder gives nn.LSTM's packed-sequence states and gradients (padding masked to 0), with
    one layer (J&W) and stacked layers (T&Š App. B)."""
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    model, batch = make("lstm", "additive", lstm_layers=layers), collate(sequences(3))
    model.train(training)
    encoder = model.encoder
    embedded = model.embed(batch).detach().requires_grad_(True)
    ours = encoder(embedded, batch.mask)
    packed = pack_padded_sequence(embedded, batch.mask.sum(1), batch_first=True, enforce_sorted=False)
    theirs = pad_packed_sequence(encoder.rnn(packed)[0], batch_first=True, total_length=batch.tokens.shape[1])[0]
    torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=1e-5)
    weights = torch.randn_like(ours)
    grad_ours = torch.autograd.grad((ours * weights).sum(), [embedded, *encoder.rnn.parameters()])
    grad_theirs = torch.autograd.grad((theirs * weights).sum(), [embedded, *encoder.rnn.parameters()])
    for a, b in zip(grad_ours, grad_theirs):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("rows", [0, 4])
def test_reverse_within_lengths_is_gather_exactly(rows):
    """Reversing each sequence within its length by rows gives gather's values and gradients bit for bit (a
    permutation), for a non-contiguous input and for an empty batch."""
    from attnaudit.models.encoders import LSTMEncoder, reverse_within_lengths

    generator = torch.Generator().manual_seed(0)
    lengths = torch.tensor([7, 1, 4, 6])[:rows]
    mask = torch.arange(7)[None, :] < lengths[:, None]
    reverse = LSTMEncoder.reversal(mask)
    values = torch.randn(rows, 7, 10, generator=generator)[..., ::2].requires_grad_(True)  # [rows, 7, 5] strided
    ours, theirs = reverse_within_lengths(values, reverse), values.gather(1, reverse.expand_as(values))
    assert torch.equal(ours, theirs)
    if rows:
        assert torch.equal(ours[0], values[0].flip(0)) and torch.equal(ours[2, 4:], values[2, 4:])
        weights = torch.randn(ours.shape, generator=generator)
        (grad_ours,) = torch.autograd.grad((ours * weights).sum(), values)
        (grad_theirs,) = torch.autograd.grad((theirs * weights).sum(), values)
        assert torch.equal(grad_ours, grad_theirs)


def test_forward_from_given_embeddings_and_detached_attention_gradients():
    model, batch = make("lstm", "additive"), collate(sequences())
    embedded = model.embed(batch).detach().requires_grad_(True)
    out = model(batch, embedded=embedded, detach_attention=True)
    out.logits[:, 1].sum().backward()
    assert embedded.grad is not None and torch.all(embedded.grad[~batch.mask] == 0)


def test_save_and_load_round_trip(tmp_path):
    model, batch = make("cnn", "dot"), collate(sequences())
    save_model(tmp_path / "model.pt", model)
    torch.testing.assert_close(load_model(tmp_path / "model.pt")(batch).logits, model(batch).logits)


def test_a_model_saved_before_attend_to_markers_existed_still_attends_to_them(tmp_path):
    """Models trained before the field existed attended to <s>, </s>: loading one keeps that support."""
    model = make("lstm", "additive", marker_ids=(1, 2), attend_to_markers=True)
    save_model(tmp_path / "model.pt", model)
    payload = torch.load(tmp_path / "model.pt", weights_only=False)
    del payload["config"]["attend_to_markers"]
    torch.save(payload, tmp_path / "old.pt")
    batch = collate([np.array([1, 5, 6, 7, 2])])
    loaded = load_model(tmp_path / "old.pt")
    assert loaded.cfg.attend_to_markers
    torch.testing.assert_close(loaded(batch).attention, model(batch).attention)
