"""J&W importance methods (gradient, deletion LOO): the batched registry objects equal the naive per-instance
reference, and on the planted corpus they (and attention) rank the planted marker words first."""

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import tiny_model

from attnaudit.auditing import iterate_chunk, load_audit_inputs
from attnaudit.data import collate
from attnaudit.importance import METHODS, get_method
from attnaudit.importance.gradient import autograd_gradient_times_embedding
from attnaudit.importance.loo import deletion_outputs as loo_deletion_outputs
from attnaudit.importance.loo import deletions
from attnaudit.jain_wallace import reference
from attnaudit.models import deletions as deletions_module
from attnaudit.models import input_gradients

VARIANTS = [(e, a) for e in ("lstm", "cnn", "average") for a in ("additive", "dot")]
BOS, EOS = 2, 3


def small_model(encoder, attention, num_classes=3, seed=0):
    sizes = {"embedding_dim": 12, "lstm_hidden": 8, "cnn_filters": 4, "average_hidden": 16}
    return tiny_model(
        encoder, attention, seed, num_classes, randomise=False, cnn_kernels=(1, 3, 5, 7), marker_ids=(), **sizes
    )


def small_batch(seed=0, lengths=(9, 4, 12, 6, 2, 7)):
    rng = np.random.default_rng(seed)
    seqs = [
        np.concatenate([[BOS], rng.integers(4, 40, size=n - 2), [EOS]]) if n > 2 else np.array([BOS, EOS])
        for n in lengths
    ]
    return seqs, collate(seqs, ids=[f"x{i}" for i in range(len(seqs))])


def test_methods_are_registered():
    assert {"attention", "gradient", "loo"} <= set(METHODS)
    assert not get_method("gradient").signed and not get_method("loo").signed
    assert "Jain" in get_method("gradient").citation


@pytest.mark.parametrize("encoder,attention", VARIANTS)
def test_batched_gradient_equals_per_instance(encoder, attention):
    model = small_model(encoder, attention)
    seqs, batch = small_batch()
    scores = get_method("gradient").attribute(model, batch)
    assert all(p.grad is None for p in model.parameters())  # the audit never touches parameter gradients
    assert torch.all(scores[~batch.mask] == 0)
    for i, seq in enumerate(seqs):
        np.testing.assert_allclose(scores[i, : len(seq)].numpy(), reference.gradient(model, seq), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("attention", ["additive", "dot", "uniform"])
@pytest.mark.parametrize("hidden_mode", ["plain", "concat", "residual"])
def test_hand_written_bilstm_backward_equals_autograd(attention, hidden_mode, tanh_route):
    """The BiLSTM backward through time by hand (input projections only) gives autograd's ∇e·e, padding included."""
    model = tiny_model("lstm", attention, 3, num_classes=3, hidden_mode=hidden_mode, embedding_dim=10)
    assert input_gradients.supports(model)
    _, batch = small_batch(2, lengths=(9, 4, 12, 6, 2, 7, 1))
    fast = input_gradients.gradient_times_embedding(model, batch).masked_fill(~batch.mask, 0.0)
    slow = autograd_gradient_times_embedding(model, batch).masked_fill(~batch.mask, 0.0)
    assert fast.abs().amax() > 1e-3
    torch.testing.assert_close(fast, slow, atol=1e-6, rtol=1e-5)
    assert not input_gradients.supports(tiny_model("lstm", attention, lstm_layers=2))  # autograd for stacked layers


def test_gradient_detaches_attention():
    """App. B: the attention module is cut from the graph, so the score differs from the full gradient."""
    model = small_model("lstm", "additive")
    _, batch = small_batch()
    embedded = model.embed(batch).detach().requires_grad_(True)
    out = model(batch, embedded=embedded)
    out.probs.gather(1, out.logits.argmax(-1, keepdim=True)).sum().backward()
    full = (embedded.grad * embedded).sum(-1).abs()
    detached = get_method("gradient").attribute(model, batch)
    assert not torch.allclose(full, detached)


@pytest.mark.parametrize("encoder,attention", VARIANTS)
def test_batched_loo_equals_per_instance(encoder, attention):
    model = small_model(encoder, attention)
    seqs, batch = small_batch(1)
    scores = get_method("loo").attribute(model, batch)
    assert torch.all(scores[~batch.mask] == 0)
    for i, seq in enumerate(seqs):
        np.testing.assert_allclose(scores[i, : len(seq)].numpy(), reference.loo(model, seq), atol=1e-5)
    # the same numbers when the deletions are split into several forward passes
    np.testing.assert_allclose(
        get_method("loo", max_tokens=30).attribute(model, batch).numpy(), scores.numpy(), atol=1e-6
    )


def test_reencoded_loo_takes_its_budget_per_device():
    """Stacked BiLSTMs re-encode every deletion, in passes of ``max_tokens`` positions given as one number or per
    device type (the default): the same scores whatever the passes' size, and the per-instance reference's."""
    model = tiny_model("lstm", "additive", lstm_layers=2)
    seqs, batch = small_batch(1)
    default = get_method("loo").attribute(model, batch)
    for budget in (30, {"cpu": 30, "cuda": 1 << 18}):
        np.testing.assert_allclose(
            get_method("loo", max_tokens=budget).attribute(model, batch).numpy(), default.numpy(), atol=1e-6
        )
    for i, seq in enumerate(seqs):
        np.testing.assert_allclose(default[i, : len(seq)].numpy(), reference.loo(model, seq), atol=1e-5)


def test_loo_builds_every_deletion_once():
    """A (deleted position × instance) grid: every real deletion once; rows beyond an instance's length unused."""
    seqs, batch = small_batch(2, lengths=(5, 3))
    deleted, b, t = deletions(batch)
    assert deleted.tokens.shape == (10, 4)
    real = [row for row in range(10) if t[row] < len(seqs[int(b[row])])]
    assert sorted((int(b[r]), int(t[r])) for r in real) == [(i, j) for i, s in enumerate(seqs) for j in range(len(s))]
    for row in real:
        expected = np.delete(seqs[int(b[row])], int(t[row]))
        got = deleted.tokens[row][deleted.mask[row]].numpy()
        np.testing.assert_array_equal(got, expected)


def real_deletions(seqs, b, t) -> list[int]:
    """Rows of a :func:`deletions` grid that delete a real token of an instance with something left after it."""
    return [row for row in range(len(b)) if t[row] < len(seqs[int(b[row])]) and len(seqs[int(b[row])]) > 1]


@pytest.mark.parametrize("attend_to_markers", [False, True])
@pytest.mark.parametrize("attention", ["additive", "dot"])
@pytest.mark.parametrize("hidden_mode", ["plain", "concat", "residual"])
def test_bilstm_deletions_without_reencoding_equal_reencoding(hidden_mode, attention, attend_to_markers, tanh_route):
    """Resuming from the states a deletion leaves unchanged, with the attention softmax accumulated online, gives
    the logits of re-encoding each shorter sequence (every real deletion; instances in no particular order of
    length, one of markers only, one left with markers only after a deletion) and the undeleted logits of the
    model, whether or not the attention weighs the markers."""
    model = tiny_model(
        "lstm",
        attention,
        0,
        3,
        randomise=True,
        embedding_dim=16,
        lstm_hidden=8,
        hidden_mode=hidden_mode,
        attend_to_markers=attend_to_markers,
    )
    seqs, batch = small_batch(3, lengths=(9, 4, 12, 2, 3, 7, 12))
    assert deletions_module.supports(model, batch)
    deleted, b, t = deletions(batch)
    with torch.no_grad():
        as_is, streamed = loo_deletion_outputs(model, batch, max_tokens=None)
        encoded = model(deleted).logits
        torch.testing.assert_close(as_is, model(batch).logits, atol=1e-5, rtol=1e-5)
    real = real_deletions(seqs, b, t)
    torch.testing.assert_close(streamed.flatten(0, 1)[real], encoded[real], atol=1e-5, rtol=1e-5)


def test_loo_floor_counts_the_rows_the_deletions_compute():
    """The exact deletions recompute Σ L(L − 1) (deletion × step) states over real tokens and no padded one, the
    count the bench's arithmetic floor of leave-one-out is made of."""
    from attnaudit.jain_wallace.throughput import loo_floor

    model = tiny_model("lstm", "additive", 1, 3, randomise=True, embedding_dim=16, lstm_hidden=8)
    batches = [small_batch(seed, lengths=lengths)[1] for seed, lengths in ((1, (7, 3, 5)), (2, (12, 12)), (3, (2, 4)))]
    stats = {}
    with torch.no_grad():
        for batch in batches:
            deletions_module.deletion_outputs(model, batch, 0.0, stats)
    floor = loo_floor(model, batches)
    lengths = (7, 3, 5, 12, 12, 2, 4)
    assert stats["row_steps"] == floor["rows"] == sum(n * (n - 1) for n in lengths)
    assert floor["gmacs"] > 0 and floor["sigmoid_ns"] > 0 and floor["tanh_ns"] > 0 and floor["seconds"] > 0
    assert loo_floor(tiny_model("cnn", "additive", 1, 3), batches) is None


@pytest.mark.parametrize("hidden_mode", ["plain", "residual"])
def test_faded_deletions_stop_early_with_the_same_logits(hidden_mode):
    """Long sequences: a deletion's states fade into the original ones, so with ``tolerance`` its recursion stops
    and the rest of its softmax comes from the original sequence — far fewer recomputed steps, the same logits
    (also against re-encoding)."""
    model = tiny_model(
        "lstm", "additive", 1, 3, randomise=True, embedding_dim=16, lstm_hidden=8, hidden_mode=hidden_mode
    )
    seqs, batch = small_batch(5, lengths=(150, 97, 120))
    exact_steps, faded_steps = {}, {}
    with torch.no_grad():
        exact = deletions_module.deletion_outputs(model, batch, 0.0, exact_steps)[1]
        faded = deletions_module.deletion_outputs(model, batch, 1e-6, faded_steps)[1]
    assert faded_steps["row_steps"] < 0.5 * exact_steps["row_steps"], (faded_steps, exact_steps)
    real = torch.arange(batch.tokens.shape[1])[:, None] < torch.tensor([len(x) for x in seqs])[None, :]
    torch.testing.assert_close(faded[real], exact[real], atol=1e-5, rtol=1e-5)
    for first in (0, 60, 93, 146):  # deletions near either end fade in one direction only
        deleted, b, t = deletions(batch, first, first + 4)
        with torch.no_grad():
            encoded = model(deleted).logits.view(4, len(seqs), -1)
        real = t.view(4, len(seqs)) < torch.tensor([len(x) for x in seqs])[None, :]
        torch.testing.assert_close(faded[first : first + 4][real], encoded[real], atol=1e-5, rtol=1e-5)
    loo = get_method("loo").attribute(model, batch)  # the default tolerance is this one
    np.testing.assert_allclose(loo[0, :150].numpy(), reference.loo(model, seqs[0]), atol=1e-5)


def test_stacked_bilstm_reencodes_deletions():
    """A second layer reads backward states that change before t: no reuse, every deletion is re-encoded."""
    model = tiny_model("lstm", "additive", 0, 3, randomise=False, embedding_dim=16, lstm_hidden=8, lstm_layers=2)
    seqs, batch = small_batch(4)
    assert not deletions_module.supports(model, batch)
    scores = get_method("loo").attribute(model, batch)
    for i, seq in enumerate(seqs):
        np.testing.assert_allclose(scores[i, : len(seq)].numpy(), reference.loo(model, seq), atol=1e-5)


def test_loo_of_a_single_token_is_nan():
    model = small_model("average", "additive")
    scores = get_method("loo").attribute(model, collate([np.array([5]), np.array([5, 6, 7])]))
    assert torch.isnan(scores[0, 0]) and not torch.isnan(scores[1]).any()


# -- planted corpus: a check that can fail ------------------------------------------------------------------


def _planted_positions(tokens):
    """Marker words (negalpha, posbravo, ...) are the only tokens that decide the label."""
    return np.array([t[:3] in ("pos", "neg") and len(t) >= 7 for t in tokens])


@pytest.fixture(scope="session")
def planted_average_dir(planted_dataset):
    """An Average-encoder model trained to convergence on the planted corpus (10 epochs, last epoch kept: with
    dev ROC-AUC saturating at 1.0 "best" selection would keep an early, barely trained epoch)."""
    from attnaudit import train

    out = planted_dataset / "models" / "average-additive-base-s0-jw"
    if not (out / "model.pt").exists():
        train.run(
            str(planted_dataset / "dataset"),
            str(planted_dataset / "embeddings" / "matrix.npy"),
            str(out),
            {"encoder": "average", "attention": "additive", "epochs": 10, "selection": "last"},
            threads=1,
        )
    return out


@pytest.fixture(scope="module")
def planted_scores(planted_dataset, planted_average_dir):
    inputs = load_audit_inputs(planted_dataset / "dataset", planted_average_dir, "test")
    examples = inputs.examples.set_index("id")
    rows = []
    for _, batch in iterate_chunk(inputs, 32):
        scores = {m: get_method(m).attribute(inputs.model, batch) for m in ("attention", "gradient", "loo")}
        for i, instance in enumerate(batch.ids):
            n = int(batch.lengths[i])
            rows.append(
                {
                    "id": instance,
                    "planted": _planted_positions(examples.loc[instance, "tokens"]),
                    **{m: s[i, :n].numpy() for m, s in scores.items()},
                }
            )
    return pd.DataFrame(rows)


@pytest.mark.parametrize("method", ["attention", "gradient", "loo"])
def test_planted_positions_rank_first(planted_scores, method):
    """Top-k hit: the k = #planted highest-scoring positions are exactly the planted ones (markers <s>, </s>
    excluded), for nearly every test instance of an Average model trained on the planted corpus."""
    hits = []
    for _, r in planted_scores.iterrows():
        planted, scores = r["planted"], r[method][1:-1]  # drop <s>, </s>
        planted = planted[1:-1]
        k = int(planted.sum())
        top = np.argsort(-scores, kind="stable")[:k]
        hits.append(bool(planted[top].all()))
    assert np.mean(hits) >= 0.9, f"{method}: planted words ranked first in only {np.mean(hits):.0%} of instances"


@pytest.mark.parametrize("attention", ["additive", "dot"])
@pytest.mark.parametrize(
    "encoder,hidden_mode,radius",
    [("average", "plain", 0), ("mlp", "plain", 0), ("average", "concat", 0), ("cnn", "plain", 3), ("cnn", "concat", 3)],
)
def test_local_deletions_equal_reencoding(encoder, hidden_mode, radius, attention):
    """Average/MLP encoders: deleting a token removes it from the attention softmax and nothing else; a CNN with
    kernels up to 7 changes the 6 states around the gap — the closed forms equal re-encoding every shorter
    sequence (any slice of deleted positions, windows recomputed a few rows at a time)."""
    kernels = {"cnn_kernels": (1, 3, 5, 7)} if encoder == "cnn" else {}
    model = tiny_model(encoder, attention, 2, 3, randomise=True, embedding_dim=16, hidden_mode=hidden_mode, **kernels)
    seqs, batch = small_batch(6, lengths=(9, 4, 12, 2, 30, 3))
    assert deletions_module.local_radius(model, batch) == radius and not deletions_module.supports(model, batch)
    width = batch.tokens.shape[1]
    for first, last in ((0, width), (2, 5)):
        deleted, b, t = deletions(batch, first, last)
        with torch.no_grad():
            closed = deletions_module.local_deletion_logits(model, batch, first, last, max_elements=3000)
            encoded = model(deleted).logits
        closed = closed.flatten(0, 1)
        real = [row for row in real_deletions(seqs, b, t) if len(seqs[int(b[row])]) != 3 or t[row] != 1]
        torch.testing.assert_close(closed[real], encoded[real], atol=1e-5, rtol=1e-5)
    deleted, b, t = deletions(batch)
    with torch.no_grad():  # the deletion that leaves markers only: re-encoded, the attention on the markers
        closed = loo_deletion_outputs(model, batch, max_tokens=None)[1].flatten(0, 1)
        encoded = model(deleted).logits
    real = real_deletions(seqs, b, t)
    torch.testing.assert_close(closed[real], encoded[real], atol=1e-5, rtol=1e-5)
