"""Gradients with respect to the word embeddings of a one-layer BiLSTM, dotted with a direction in embedding
space, with the backward pass through time written by hand: J&W's gradient importance ∇_{e_t} ŷ · e_t
(Algorithm 1, attention detached as in Appendix B) and the path gradients of B&F's integrated gradients
(§3.1 Eq. 4: ∇_x f_c(b + α(e − b)) · (e_t − b) at the quadrature nodes α).

The embedding enters each direction of the BiLSTM only through the input projection W_ih x_t, so
∇_{x_t} f · v_t = Σ_directions δ_t · W_ih v_t (+ ∇f · v_t through the hidden states' own copy of x_t, T&Š §3.1),
where δ_t is the gradient of f with respect to the gate pre-activations at t. W_ih e depends on the token alone,
so each distinct token of a batch is projected once (:func:`attnaudit.models.encoders.token_projections`) and the
points of an integration path are α-mixtures of two projections; the backward pass is the hidden-to-hidden
recursion alone: no gradient with respect to the 300-dimensional embeddings (a 4H × d product per token and
direction) and none with respect to the weights, both of which PyTorch's fused LSTM backward always computes. The
attention and decoder are differentiated by autograd from the hidden states. Written by hand because no library
skips those products; tests compare the results with autograd through ``torch.lstm`` and with Captum.
"""

from __future__ import annotations

import torch

from attnaudit.models.activations import tanh
from attnaudit.models.batch import Batch
from attnaudit.models.encoders import reverse_within_lengths, token_projections

#: what one pass may tape: the first layer's gates, cells and projected directions of both directions, ~38 floats
#: per row, step and hidden unit (measured: a 2.7 GB peak for 41 rows of 3,002 steps at hidden 128, 0.35 GB of it
#: before the pass). 2 GiB keeps 256 rows of IMDB's longest documents (400 tokens) in one pass and bounds a pass
#: over longer ones.
TAPE_BYTES = 2 << 30
TAPE_FLOATS_PER_HIDDEN = 38


def rows_per_pass(steps: int, hidden: int, max_rows: int) -> int:
    """Instance × α rows of ``steps`` steps that one pass tapes within :data:`TAPE_BYTES` (at least one)."""
    return max(1, min(max_rows, TAPE_BYTES // (4 * TAPE_FLOATS_PER_HIDDEN * hidden * max(1, steps))))


def supports(model) -> bool:
    """A one-layer BiLSTM in eval mode (the encoder whose states :mod:`attnaudit.models.deletions` also reuses)."""
    return bool(getattr(model.encoder, "reuses_deletion_states", False)) and not model.training


class TapedDirection:
    """One direction of the first layer run step by step on given input pre-activations ``[T, N, 4H]``
    (W_ih x_t + b_ih + b_hh in this direction's step order), keeping what its backward pass needs: the gates
    (i, f, g, o after their non-linearities, PyTorch's order), the cell states and tanh of them. ``reverse``
    ``[N, T, 1]`` (the backward direction) reverses each sequence within its length."""

    def __init__(self, encoder, pre_inputs: torch.Tensor, reverse: torch.Tensor | None, backward: bool):
        w_hh = encoder.weights(0, backward)[1]
        self.size, self.w_hh, self.reverse = encoder.rnn.hidden_size, w_hh, reverse
        h = pre_inputs.new_zeros(pre_inputs.shape[1], self.size)
        c = torch.zeros_like(h)
        w_hh_t = w_hh.t()
        self.gates, self.cells, self.tanh_cells, hidden = [], [c], [], []
        for step in range(pre_inputs.shape[0]):
            pre = torch.addmm(pre_inputs[step], h, w_hh_t)
            sig = torch.sigmoid(pre)
            i, f, o = sig[:, : self.size], sig[:, self.size : 2 * self.size], sig[:, 3 * self.size :]
            g = tanh(pre[:, 2 * self.size : 3 * self.size])
            c = torch.addcmul(f * c, i, g)
            tanh_c = tanh(c)
            h = o * tanh_c
            self.gates.append(torch.cat([i, f, g, o], dim=1))
            self.cells.append(c)
            self.tanh_cells.append(tanh_c)
            hidden.append(h)
        self.hidden = self.in_input_order(torch.stack(hidden, dim=1))  # [N, T, H]

    def in_input_order(self, values: torch.Tensor) -> torch.Tensor:
        """``[N, T, ·]`` in this direction's step order → the input's order (the reversal is an involution)."""
        return values if self.reverse is None else reverse_within_lengths(values, self.reverse)

    def input_contributions(self, grad_hidden: torch.Tensor, direction: torch.Tensor) -> torch.Tensor:
        """Backward through time from ∂f/∂h ``[N, T, H]`` (input order): δ_t · (W_ih v_t) per position ``[N, T]``
        for the projected direction ``direction`` = W_ih v ``[T, N, 4H]`` (step order)."""
        grad_hidden = self.in_input_order(grad_hidden).transpose(0, 1)  # step order, time-major
        size = self.size
        grad_h, grad_c = torch.zeros_like(grad_hidden[0]), torch.zeros_like(grad_hidden[0])
        contributions = []  # δ_t · (W_ih v_t) per step as it comes: no [T, N, 4H] of deltas is kept
        for step in range(grad_hidden.shape[0] - 1, -1, -1):
            gates, tanh_c = self.gates[step], self.tanh_cells[step]
            i, f, g, o = (gates[:, k * size : (k + 1) * size] for k in range(4))
            grad_h = grad_h + grad_hidden[step]
            grad_c = grad_c + grad_h * o * (1 - tanh_c * tanh_c)
            delta = torch.cat(
                [
                    grad_c * g * i * (1 - i),
                    grad_c * self.cells[step] * f * (1 - f),
                    grad_c * i * (1 - g * g),
                    grad_h * tanh_c * o * (1 - o),
                ],
                dim=1,
            )
            grad_c = grad_c * f
            grad_h = delta @ self.w_hh
            contributions.append((delta * direction[step]).sum(dim=-1))
        contributions = torch.stack(contributions[::-1], dim=1)[:, :, None]  # [N, T, 1]
        return self.in_input_order(contributions)[..., 0]


def path_gradients(
    model,
    batch: Batch,
    explained,
    alphas: list[float],
    baseline: torch.Tensor | None = None,
    detach_attention: bool = False,
    max_rows: int = 256,
) -> torch.Tensor:
    """``[S, B, T]``: ∇_{x_t} Σ_b f(x(α)) · (e_t − b) at every α of ``alphas``, with x(α) = b + α (e − b) the
    embeddings on the straight path from the ``baseline`` vector b (``[d]``; None: zeros) to the tokens'
    embeddings e, and ``explained(logits, instances) -> [N]`` the explained output of each row, ``instances`` its
    instance's index in ``batch`` (e.g. the probability of the instance's predicted class). ``detach_attention``
    holds the attention at its value (J&W App. B). At most ``max_rows`` instance × α rows go through the BiLSTM
    at once: the step-wise element-wise work is memory-bound, and a few hundred rows keep it in the cache; fewer
    for long documents, whose tape would outgrow :data:`TAPE_BYTES` (:func:`supports` must hold)."""
    max_rows = rows_per_pass(batch.tokens.shape[1], model.encoder.rnn.hidden_size, max_rows)
    if batch.tokens.shape[0] > max_rows:
        return torch.cat(
            [
                path_gradients(
                    model,
                    batch.select(slice(first, first + max_rows)),
                    lambda logits, instances, first=first: explained(logits, instances + first),
                    alphas,
                    baseline,
                    detach_attention,
                    max_rows,
                )
                for first in range(0, batch.tokens.shape[0], max_rows)
            ],
            dim=1,
        )
    encoder, mask, n_batch = model.encoder, batch.mask, batch.tokens.shape[0]
    with torch.no_grad():
        embedded = model.embed(batch)
        base = torch.zeros_like(embedded[0, 0]) if baseline is None else baseline.to(embedded)
        paths = []  # per direction: (reverse, W_ih b + biases [4H], W_ih (e − b) [T, B, 4H] in step order)
        for backward in (False, True):
            w_ih, _, b_ih, b_hh = encoder.weights(0, backward)
            reverse = encoder.reversal(mask) if backward else None
            per_token, index = token_projections(model.embedding, batch.tokens, w_ih)
            index = index.gather(1, reverse[..., 0]) if backward else index  # step order
            start = base @ w_ih.t()
            paths.append((reverse, start + (b_ih + b_hh), per_token[index.t()] - start))
    per_pass = max(1, max_rows // max(1, n_batch))
    results = []
    for first in range(0, len(alphas), per_pass):
        scale = torch.tensor(alphas[first : first + per_pass], dtype=embedded.dtype, device=embedded.device)
        n_scales = len(scale)
        rows = torch.arange(n_batch, device=mask.device).repeat(n_scales)  # row s·B + b: instance b at α_s
        along = scale.repeat_interleave(n_batch)  # α of each row
        with torch.no_grad():
            tapes, directions = [], []
            for backward, (reverse, start, span) in zip((False, True), paths, strict=True):
                direction = span if n_scales == 1 else span.repeat(1, n_scales, 1)  # [T, N, 4H]
                pre_inputs = torch.addcmul(start, along[None, :, None], direction)
                if reverse is not None and n_scales > 1:
                    reverse = reverse[rows]
                tapes.append(TapedDirection(encoder, pre_inputs, reverse, backward))
                directions.append(direction)
                del pre_inputs  # the tape holds what the backward pass needs
            offsets = (embedded if n_scales == 1 else embedded[rows]) - base  # e − b per row
        expanded = batch if n_scales == 1 else batch.select(rows)
        with torch.enable_grad():
            states = torch.cat([tape.hidden for tape in tapes], dim=-1).requires_grad_(True)
            words = (base + along[:, None, None] * offsets).requires_grad_(model.cfg.hidden_mode != "plain")
            hidden = model._with_embeddings(states * expanded.mask[:, :, None].to(states.dtype), words, expanded.mask)
            query = model.encode_query(expanded)
            attention = model.attend(hidden, expanded, query)
            logits = model.decode(hidden, attention.detach() if detach_attention else attention, query)
            inputs = [states, words] if words.requires_grad else [states]
            grads = torch.autograd.grad(explained(logits, rows).sum(), inputs)
        with torch.no_grad():
            size = encoder.rnn.hidden_size
            scores = sum(
                tape.input_contributions(grads[0][..., k * size : (k + 1) * size], direction)
                for k, (tape, direction) in enumerate(zip(tapes, directions, strict=True))
            )
            if len(grads) > 1:
                scores = scores + (grads[1] * offsets).sum(dim=-1)
        results.append(scores.view(n_scales, n_batch, -1))
    return torch.cat(results)


def gradient_times_embedding(model, batch: Batch) -> torch.Tensor:
    """Signed ∇_{e_t} ŷ_c · e_t ``[B, T]`` for the predicted class c (ŷ the probability), attention held at its
    value (J&W Algorithm 1, App. B; :func:`supports` must hold): the same as autograd through the model to float
    rounding."""

    def predicted_probability(logits: torch.Tensor, instances: torch.Tensor) -> torch.Tensor:
        return torch.softmax(logits, dim=-1).gather(1, logits.argmax(dim=-1, keepdim=True))[:, 0]

    return path_gradients(model, batch, predicted_probability, [1.0], detach_attention=True)[0]
