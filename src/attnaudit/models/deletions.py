"""Every single-token deletion of a one-layer BiLSTM classifier at once, without re-encoding (J&W Algorithm 1).

Deleting token t leaves the forward states before t and the backward states after t as they were. So each
direction resumes from the original state next to the gap: the forward states from t on and the backward states
before t are recomputed, with the input projections W_ih x computed once per instance and shared by all its
deletions — about T steps of the hidden-to-hidden product per deletion instead of 2(T−1) full LSTM steps. At step
s every deletion that step changes advances at once, as one slice of the (deleted position × instance) grid.

Every position j of a deleted sequence is then *completed* exactly once: in the forward pass when j ≥ t (new
forward half, unchanged backward half of original position j + 1) or in the backward pass when j < t (unchanged
forward half of position j, new backward half). Attention scores (additive vᵀtanh(W h + b) or dot h·q/√m) and
the decoder are linear in h up to the score's non-linearity, so the unchanged half's contribution is computed
once per original position and only the new half is projected; the softmax over positions is accumulated online
(running maximum) together with the per-token logits W h_j + b, whose attention-weighted mean is the deleted
sequence's logits (T&Š Eq. 9). Nothing of size T² × hidden is ever stored: memory is O(T × B × (hidden + C)),
so long documents fit. Written by hand: no library computes deletion leave-one-out; a test compares it with
re-encoding every shorter sequence.
"""

from __future__ import annotations

import torch

from attnaudit.models.attention import AdditiveAttention, DotAttention
from attnaudit.models.batch import Batch


def supports(model, batch: Batch) -> bool:
    """A one-layer BiLSTM in eval mode with learned additive or dot attention and no query."""
    encoder = model.encoder
    return (
        getattr(encoder, "reuses_deletion_states", False)
        and isinstance(model.attention, AdditiveAttention | DotAttention)
        and getattr(model, "linear_decoder", False)
        and not model.training
        and model.encode_query(batch) is None
    )


class Readout:
    """Attention score and per-token logits of a hidden state h = [f; g] (+ the embedding, T&Š §3.1), split into
    the part of the half a deletion changes and the part known from the original states."""

    def __init__(self, model, embedded: torch.Tensor, mask: torch.Tensor, states: dict):
        size, attention = model.encoder.rnn.hidden_size, model.attention
        if isinstance(attention, AdditiveAttention):  # vᵀtanh(z) = 2vᵀσ(2z) − Σv: σ is ~5× cheaper than tanh on CPU
            weight, bias = 2 * attention.w_hidden.weight, 2 * attention.w_hidden.bias
            v = attention.v.weight[0]
            self.score = lambda pre: torch.sigmoid(pre) @ (2 * v) - v.sum()
        else:
            weight = (attention.learned_query * attention.scale)[None, :]
            bias = weight.new_zeros(1)
            self.score = lambda pre: pre[..., 0]
        self.width = weight.shape[0]
        matrix = torch.cat([weight, model.decoder.weight])  # [k + C, m]: attention pre-activation, then logits
        offset = torch.cat([bias, model.decoder.bias])
        self.new = {"forward": matrix[:, :size].t(), "backward": matrix[:, size : 2 * size].t()}
        real = mask.t()[:, :, None].to(embedded.dtype)
        words = embedded.transpose(0, 1) * real  # [T, B, d]
        mode = model.cfg.hidden_mode
        if mode == "concat":
            from_words = words @ matrix[:, 2 * size :].t()
        elif mode == "residual":
            from_words = words[..., :size] @ self.new["forward"] + words[..., size:] @ self.new["backward"]
        else:
            from_words = 0.0
        # the part of W h that does not change, per original position p [T, B, k + C]
        self.known = {
            "forward": states["backward"] @ self.new["backward"] + from_words + offset,  # read at p = j + 1
            "backward": states["forward"] @ self.new["forward"] + from_words + offset,  # read at p = j
        }


def doubled_cell_input(gates: torch.Tensor) -> torch.Tensor:
    """Gate pre-activations (last dimension i, f, g, o: PyTorch's order) with the cell input g doubled, so that one
    sigmoid over all four gates gives σ(2g) and tanh(g) = 2σ(2g) − 1 (:func:`lstm_step`)."""
    size = gates.shape[-1] // 4
    scale = torch.ones(4 * size, dtype=gates.dtype, device=gates.device)
    scale[2 * size : 3 * size] = 2.0
    return gates * scale


def lstm_step(pre: torch.Tensor, cell: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One LSTM step from pre-activations whose cell input is doubled (:func:`doubled_cell_input`), with
    tanh(x) = 2σ(2x) − 1 throughout: the same state as ``torch.lstm`` to float rounding, without tanh calls."""
    size = pre.shape[-1] // 4
    gate = torch.sigmoid(pre)
    candidate = gate[..., 2 * size : 3 * size].mul(2.0).sub_(1.0)
    cell = torch.addcmul(gate[..., size : 2 * size] * cell, gate[..., :size], candidate)
    return gate[..., 3 * size :] * torch.sigmoid(2.0 * cell).mul_(2.0).sub_(1.0), cell


def original_states(encoder, embedded: torch.Tensor, mask: torch.Tensor, backward: bool):
    """``(input gates, h, c)`` of one direction of the first layer on the whole instances, time-major ``[T, B, ·]``
    (``torch.lstm`` returns no cell states); the gates' cell input is doubled (:func:`doubled_cell_input`)."""
    w_ih, w_hh, b_ih, b_hh = encoder.weights(0, backward)
    n_batch, width, _ = embedded.shape
    gates = torch.addmm(b_ih + b_hh, embedded.flatten(0, 1), w_ih.t()).view(n_batch, width, -1)
    gates, w_hh = doubled_cell_input(gates), doubled_cell_input(w_hh.t())
    reverse = encoder.reversal(mask).expand_as(gates) if backward else None
    inputs = gates.gather(1, reverse) if backward else gates  # each sequence reversed within its length
    h = gates.new_zeros(n_batch, encoder.rnn.hidden_size)
    c, hs, cs = torch.zeros_like(h), [], []
    for step in range(width):
        h, c = lstm_step(torch.addmm(inputs[:, step], h, w_hh), c)
        hs.append(h)
        cs.append(c)
    h, c = torch.stack(hs, dim=1), torch.stack(cs, dim=1)
    if backward:
        h, c = (x.gather(1, reverse[..., : x.shape[-1]]) for x in (h, c))
    return gates.transpose(0, 1), h.transpose(0, 1), c.transpose(0, 1)


def deletion_logits(model, batch: Batch, first: int, last: int) -> torch.Tensor:
    """Logits ``[last − first, B, C]`` of every instance of ``batch`` with its token t deleted, for t in
    ``first..last−1`` (:func:`supports` must hold; entries with t beyond an instance's length are unspecified;
    an instance left empty gets NaN)."""
    encoder, mask = model.encoder, batch.mask
    size, width, n_batch = encoder.rnn.hidden_size, mask.shape[1], mask.shape[0]
    n_rows = last - first
    with torch.no_grad():
        embedded = model.embed(batch)
        real = mask.t()[:, :, None].to(embedded.dtype)
        gates, hidden, cells = {}, {}, {}
        for direction in ("forward", "backward"):
            gates[direction], h, c = original_states(encoder, embedded, mask, direction == "backward")
            hidden[direction], cells[direction] = h * real, c * real  # 0 on padding: "nothing after t" reads 0
        readout = Readout(model, embedded, mask, hidden)
        n_classes = model.decoder.out_features
        best = embedded.new_full((n_rows, n_batch), float("-inf"))
        total = embedded.new_zeros(n_rows, n_batch)
        summed = embedded.new_zeros(n_rows, n_batch, n_classes)
        # position j exists in a deleted sequence of instance b iff j < length_b − 1
        exists = torch.arange(max(width - 1, 1), device=mask.device)[:, None] < mask.sum(dim=1)[None, :] - 1

        def complete(rows: slice, position: int, state: torch.Tensor, direction: str) -> None:
            """Fold position ``position`` of the deleted sequences ``rows`` into their online softmax."""
            original = position + 1 if direction == "forward" else position
            values = state @ readout.new[direction] + readout.known[direction][original]  # [n, B, k + C]
            score = readout.score(values[..., : readout.width]).masked_fill(~exists[position], float("-inf"))
            top = torch.maximum(best[rows], score)
            shift = torch.where(torch.isinf(top), torch.zeros_like(top), top)
            kept, weight = torch.exp(best[rows] - shift), torch.exp(score - shift)
            total[rows] = total[rows] * kept + weight
            summed[rows] = summed[rows] * kept[..., None] + weight[..., None] * values[..., readout.width :]
            best[rows] = top

        zeros = embedded.new_zeros(1, n_batch, size)
        # forward, step s: deletions t ≤ s resume from the state after position t − 1, reading x_{s+1}
        w_hh = doubled_cell_input(encoder.weights(0, False)[1].t())
        h = torch.cat([zeros, hidden["forward"]])[first:last].clone()  # [t, B, H]
        c = torch.cat([zeros, cells["forward"]])[first:last].clone()
        for step in range(first, width - 1):
            n = min(step + 1, last) - first
            pre = (h[:n].reshape(-1, size) @ w_hh).view(n, n_batch, -1).add_(gates["forward"][step + 1])
            h[:n], c[:n] = lstm_step(pre, c[:n])
            complete(slice(0, n), step, h[:n], "forward")
        # backward, step s from T − 2 down: deletions t > s resume from the state of position t + 1, reading x_s
        w_hh = doubled_cell_input(encoder.weights(0, True)[1].t())
        h = torch.cat([hidden["backward"], zeros])[first + 1 : last + 1].clone()
        c = torch.cat([cells["backward"], zeros])[first + 1 : last + 1].clone()
        for step in range(min(last - 1, width - 1) - 1, -1, -1):
            start = max(step + 1, first) - first
            pre = (h[start:].reshape(-1, size) @ w_hh).view(-1, n_batch, 4 * size).add_(gates["backward"][step])
            h[start:], c[start:] = lstm_step(pre, c[start:])
            complete(slice(start, None), step, h[start:], "backward")
        return summed / total[..., None]  # 0/0 = NaN for an instance left empty
