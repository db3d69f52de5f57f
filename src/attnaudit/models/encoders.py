"""Encoders: embedded tokens ``[B, T, d]`` → states ``[B, T, m]``, padding never leaking into real positions."""

from __future__ import annotations

import torch
from torch import nn

from attnaudit.models.config import ModelConfig


class LSTMEncoder(nn.Module):
    """Bidirectional LSTM, 300 → 128 per direction (J&W A.1), ``lstm_layers`` stacked (T&Š App. B).

    Same numbers as ``pack_padded_sequence`` through ``nn.LSTM`` (a test checks it), about twice as fast on CPU:
    the forward direction runs on the padded batch (padding comes after every real token, so it cannot reach
    them), the backward direction on each sequence reversed within its own length, both through the fused
    one-direction kernel, which packed input cannot use. Each layer reads both directions of the one below.
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.rnn = nn.LSTM(
            cfg.embedding_dim, cfg.lstm_hidden, num_layers=cfg.lstm_layers, batch_first=True, bidirectional=True
        )
        self.output_dim = 2 * cfg.lstm_hidden

    def weights(self, layer: int, reverse: bool) -> list[torch.Tensor]:
        suffix = f"_l{layer}" + ("_reverse" if reverse else "")
        return [getattr(self.rnn, f"{name}{suffix}") for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]

    def _direction(self, inputs: torch.Tensor, weights: list[torch.Tensor]) -> torch.Tensor:
        zeros = inputs.new_zeros(1, inputs.shape[0], self.rnn.hidden_size)
        # torch.lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)
        return torch.lstm(inputs, (zeros, zeros), weights, True, 1, 0.0, self.training, False, True)[0]

    @staticmethod
    def reversal(mask: torch.Tensor) -> torch.Tensor:
        """``[B, T, 1]`` index that reverses each sequence within its own length (an involution)."""
        lengths = mask.sum(dim=1, keepdim=True)
        positions = torch.arange(mask.shape[1], device=mask.device)[None, :]
        return torch.where(positions < lengths, lengths - 1 - positions, positions)[:, :, None]

    def forward(self, embedded: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        reverse = self.reversal(mask)
        states = embedded
        for layer in range(self.rnn.num_layers):
            forward = self._direction(states, self.weights(layer, False))
            backward = self._direction(reverse_within_lengths(states, reverse), self.weights(layer, True))
            backward = reverse_within_lengths(backward, reverse)
            states = torch.cat([forward, backward], dim=-1) * mask[:, :, None].to(embedded.dtype)
        return states

    @property
    def reuses_deletion_states(self) -> bool:
        """Deletions can resume from the original states (:mod:`attnaudit.models.deletions`) for one layer only: a
        second layer reads backward states that change before the deleted token."""
        return self.rnn.num_layers == 1 and not self.training


def reverse_within_lengths(values: torch.Tensor, reverse: torch.Tensor) -> torch.Tensor:
    """``values`` ``[N, T, ·]`` with each sequence reversed within its own length by ``reverse`` ``[N, T, 1]``
    (:meth:`LSTMEncoder.reversal`): whole rows copied by one ``index_select`` of the flattened positions, whose
    backward (the sum of a permutation) is as exact as ``gather``'s ``scatter_add_``; forward and backward together
    4–6× faster than ``gather`` on a CPU, ~2 % of a training epoch of the SST BiLSTM (``docs/performance.md``)."""
    n_rows, width = reverse.shape[:2]
    starts = torch.arange(0, n_rows * width, width, device=reverse.device)[:, None]
    flat = values.reshape(n_rows * width, values.shape[-1]).index_select(0, (reverse[..., 0] + starts).reshape(-1))
    return flat.view(values.shape)


def token_projections(embedding: nn.Embedding, tokens: torch.Tensor, weight: torch.Tensor):
    """``(W e_v for each distinct token v [V', k], index [B, T])`` with ``W e(tokens)`` = the first indexed by the
    second: a projection of the embedding (an LSTM's W_ih e_t) depends on the token alone, and a batch of sentences
    has a fraction as many distinct tokens as positions (no dropout: evaluation only)."""
    distinct, index = torch.unique(tokens, return_inverse=True)
    return embedding(distinct) @ weight.t(), index


class CNNEncoder(nn.Module):
    """Convolutions with kernels 1,3,5,7 × 64 filters, ReLU, 'same' padding, concatenated → 256 (J&W A.2)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.convs = nn.ModuleList(
            nn.Conv1d(cfg.embedding_dim, cfg.cnn_filters, k, padding=k // 2) for k in cfg.cnn_kernels
        )
        self.output_dim = cfg.cnn_filters * len(cfg.cnn_kernels)

    def forward(self, embedded: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = (embedded * mask.unsqueeze(-1)).transpose(1, 2)  # padding contributes zeros
        return torch.cat([torch.relu(conv(x)) for conv in self.convs], dim=1).transpose(1, 2)


class TokenwiseEncoder(nn.Module):
    """One affine layer per token, no context: J&W's 'average' encoder (A.3, 300 → 256, ReLU) and W&P's
    diagnostic MLP (§3.4, 300 → 128, tanh)."""

    def __init__(self, in_dim: int, out_dim: int, activation):
        super().__init__()
        self.proj = nn.Linear(in_dim, out_dim)
        self.activation = activation
        self.output_dim = out_dim

    def forward(self, embedded: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.activation(self.proj(embedded))


def build_encoder(cfg: ModelConfig) -> nn.Module:
    if cfg.encoder == "lstm":
        return LSTMEncoder(cfg)
    if cfg.encoder == "cnn":
        return CNNEncoder(cfg)
    if cfg.encoder == "average":
        return TokenwiseEncoder(cfg.embedding_dim, cfg.average_hidden, torch.relu)
    return TokenwiseEncoder(cfg.embedding_dim, cfg.mlp_hidden, torch.tanh)
