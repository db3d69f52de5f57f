"""J&W's gradient importance g_t = ∇_{e_t} ŷ · e_t (Algorithm 1, attention detached as in Appendix B) for a
one-layer BiLSTM, with the backward pass through time written by hand.

The embedding e_t enters each direction of the BiLSTM only through the input projection u_t = W_ih e_t, so
∇_{e_t} ŷ · e_t = Σ_directions δ_t · u_t (+ ∇ ŷ · e_t through the hidden states' own copy of e_t, T&Š §3.1), where
δ_t is the gradient of ŷ with respect to the gate pre-activations at t. The projections are computed once in the
forward pass anyway, so the backward pass is the hidden-to-hidden recursion alone: no gradient with respect to
the 300-dimensional embeddings (a 4H × d product per token and direction) and none with respect to the weights,
both of which PyTorch's fused LSTM backward always computes. The attention and decoder are differentiated by
autograd from the hidden states. Written by hand because no library skips those products; a test compares the
result with autograd through ``torch.lstm``.
"""

from __future__ import annotations

import torch

from attnaudit.models.batch import Batch
from attnaudit.models.encoders import token_projections


def supports(model) -> bool:
    """A one-layer BiLSTM in eval mode (the encoder whose states :mod:`attnaudit.models.deletions` also reuses)."""
    return bool(getattr(model.encoder, "reuses_deletion_states", False)) and not model.training


class TapedDirection:
    """One direction of the first layer run step by step on time-major input, keeping what its backward pass
    needs: the input projections u_t = W_ih e_t ``[T, B, 4H]``, the gates (i, f, g, o after their non-linearities,
    PyTorch's order), the cell states and tanh of them. ``backward`` reverses each sequence within its length."""

    def __init__(self, encoder, embedding, tokens: torch.Tensor, mask: torch.Tensor, backward: bool):
        w_ih, w_hh, b_ih, b_hh = encoder.weights(0, backward)
        n_batch, width = tokens.shape
        self.size, self.w_hh = encoder.rnn.hidden_size, w_hh
        self.reverse = encoder.reversal(mask) if backward else None
        tokens = tokens.gather(1, self.reverse[..., 0]) if backward else tokens
        per_token, index = token_projections(embedding, tokens, w_ih)
        self.projected = per_token[index.t()]  # u_t, [T, B, 4H]
        pre_inputs = self.projected + (b_ih + b_hh)
        h = per_token.new_zeros(n_batch, self.size)
        c = torch.zeros_like(h)
        w_hh_t = w_hh.t()
        self.gates, self.cells, self.tanh_cells, hidden = [], [c], [], []
        for step in range(width):
            pre = torch.addmm(pre_inputs[step], h, w_hh_t)
            sig = torch.sigmoid(pre)
            i, f, o = sig[:, : self.size], sig[:, self.size : 2 * self.size], sig[:, 3 * self.size :]
            g = torch.tanh(pre[:, 2 * self.size : 3 * self.size])
            c = torch.addcmul(f * c, i, g)
            tanh_c = torch.tanh(c)
            h = o * tanh_c
            self.gates.append(torch.cat([i, f, g, o], dim=1))
            self.cells.append(c)
            self.tanh_cells.append(tanh_c)
            hidden.append(h)
        self.hidden = self.in_input_order(torch.stack(hidden, dim=1))  # [B, T, H]

    def in_input_order(self, values: torch.Tensor) -> torch.Tensor:
        """``[B, T, ·]`` in this direction's step order → the input's order (the reversal is an involution)."""
        return values if self.reverse is None else values.gather(1, self.reverse.expand_as(values))

    def input_contributions(self, grad_hidden: torch.Tensor) -> torch.Tensor:
        """Backward through time from ∂ŷ/∂h ``[B, T, H]`` (input order): δ_t · u_t per position ``[B, T]``."""
        grad_hidden = self.in_input_order(grad_hidden).transpose(0, 1)  # step order, time-major
        size = self.size
        grad_h, grad_c = torch.zeros_like(grad_hidden[0]), torch.zeros_like(grad_hidden[0])
        deltas = []
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
            deltas.append(delta)
        deltas = torch.stack(deltas[::-1])  # [T, B, 4H] in step order
        contributions = (deltas * self.projected).sum(dim=-1).t()[:, :, None]  # [B, T, 1]
        return self.in_input_order(contributions)[..., 0]


def gradient_times_embedding(model, batch: Batch) -> torch.Tensor:
    """Signed ∇_{e_t} ŷ_c · e_t ``[B, T]`` for the predicted class c (ŷ the probability), attention held at its
    value (:func:`supports` must hold); the same as autograd through the model to float rounding."""
    mask = batch.mask
    with torch.no_grad():
        embedded = model.embed(batch)
        directions = [
            TapedDirection(model.encoder, model.embedding, batch.tokens, mask, backward) for backward in (False, True)
        ]
    with torch.enable_grad():
        states = torch.cat([d.hidden for d in directions], dim=-1).requires_grad_(True)
        words = embedded.clone().requires_grad_(model.cfg.hidden_mode != "plain")
        hidden = model._with_embeddings(states * mask[:, :, None].to(states.dtype), words, mask)
        query = model.encode_query(batch)
        alpha = model.attend(hidden, batch, query).detach()
        logits = model.decode(hidden, alpha, query)
        predicted = logits.argmax(dim=-1, keepdim=True)
        target = torch.softmax(logits, dim=-1).gather(1, predicted).sum()
        inputs = [states, words] if words.requires_grad else [states]
        grads = torch.autograd.grad(target, inputs)
    with torch.no_grad():
        size = model.encoder.rnn.hidden_size
        scores = sum(d.input_contributions(grads[0][..., k * size : (k + 1) * size]) for k, d in enumerate(directions))
        if len(grads) > 1:
            scores = scores + (grads[1] * embedded).sum(dim=-1)
    return scores
