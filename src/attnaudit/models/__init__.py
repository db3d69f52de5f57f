"""Attention classifiers of Jain & Wallace (2019), Appendix A, with the interface every audit uses (GUIDE §3).

``model(batch)`` returns logits, probabilities, the attention α̂ [B,T], the hidden states h [B,T,m] and the
embedded tokens e [B,T,d]; ``model(batch, attention=α)`` feeds a given distribution to the decoder with the
encoder states unchanged; ``model.decode(hidden, alpha, query)`` runs the decoder alone, so permutation and
adversarial audits never re-run the encoder. ``model(batch, embedded=e)`` starts from given embeddings (gradient
and Captum methods), and ``detach_attention=True`` cuts the graph at the attention module (J&W Appendix B).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import torch
from torch import nn

ENCODERS = ("lstm", "cnn", "average")
ATTENTIONS = ("additive", "dot")


@dataclass
class Batch:
    """A padded batch. ``mask`` is True on real tokens; padding never receives attention."""

    tokens: torch.Tensor  # [B, T] int64
    mask: torch.Tensor  # [B, T] bool
    labels: torch.Tensor | None = None  # [B] int64
    ids: list[str] = field(default_factory=list)
    query_tokens: torch.Tensor | None = None  # [B, Tq] for QA/NLI (query-conditioned attention)
    query_mask: torch.Tensor | None = None

    @property
    def lengths(self) -> torch.Tensor:
        return self.mask.sum(dim=1)

    def to(self, device: torch.device | str) -> Batch:
        move = lambda t: None if t is None else t.to(device)  # noqa: E731
        return Batch(
            move(self.tokens),
            move(self.mask),
            move(self.labels),
            self.ids,
            move(self.query_tokens),
            move(self.query_mask),
        )


@dataclass
class ModelOutput:
    logits: torch.Tensor  # [B, C]
    probs: torch.Tensor  # [B, C]
    attention: torch.Tensor  # [B, T], 0 on padding, rows sum to 1
    hidden: torch.Tensor  # [B, T, m]
    embedded: torch.Tensor  # [B, T, d]
    query: torch.Tensor | None = None  # [B, m] or None


@dataclass
class ModelConfig:
    """Hyper-parameters saved with the weights so a ``model.pt`` is self-describing."""

    vocab_size: int
    num_classes: int
    encoder: str = "lstm"
    attention: str = "additive"
    embedding_dim: int = 300
    lstm_hidden: int = 128  # per direction (J&W A.1)
    cnn_kernels: tuple[int, ...] = (1, 3, 5, 7)  # J&W A.2
    cnn_filters: int = 64
    average_hidden: int = 256  # J&W A.3
    pad_index: int = 0
    dropout: float = 0.0

    def __post_init__(self) -> None:
        if self.encoder not in ENCODERS:
            raise ValueError(f"encoder must be one of {ENCODERS}, got {self.encoder!r}")
        if self.attention not in ATTENTIONS:
            raise ValueError(f"attention must be one of {ATTENTIONS}, got {self.attention!r}")
        self.cnn_kernels = tuple(self.cnn_kernels)


class LSTMEncoder(nn.Module):
    """Bidirectional LSTM, 300 → 128 per direction (J&W A.1); padding never leaks into states.

    Same numbers as ``pack_padded_sequence`` through ``nn.LSTM`` (a test checks it), about twice as fast on CPU:
    the forward direction runs on the padded batch (padding comes after every real token, so it cannot reach
    them), the backward direction on each sequence reversed within its own length, both through the fused
    one-direction kernel, which packed input cannot use.
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.rnn = nn.LSTM(cfg.embedding_dim, cfg.lstm_hidden, batch_first=True, bidirectional=True)
        self.output_dim = 2 * cfg.lstm_hidden

    def _direction(self, inputs: torch.Tensor, weights: list[torch.Tensor]) -> torch.Tensor:
        zeros = inputs.new_zeros(1, inputs.shape[0], self.rnn.hidden_size)
        # torch.lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)
        return torch.lstm(inputs, (zeros, zeros), weights, True, 1, 0.0, self.training, False, True)[0]

    def forward(self, embedded: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        width = embedded.shape[1]
        lengths = mask.sum(dim=1, keepdim=True)
        positions = torch.arange(width, device=embedded.device)[None, :]
        reverse = torch.where(positions < lengths, lengths - 1 - positions, positions)[:, :, None]  # an involution
        rnn = self.rnn
        forward = self._direction(embedded, [rnn.weight_ih_l0, rnn.weight_hh_l0, rnn.bias_ih_l0, rnn.bias_hh_l0])
        backward = self._direction(
            embedded.gather(1, reverse.expand_as(embedded)),
            [rnn.weight_ih_l0_reverse, rnn.weight_hh_l0_reverse, rnn.bias_ih_l0_reverse, rnn.bias_hh_l0_reverse],
        )
        backward = backward.gather(1, reverse.expand_as(backward))
        return torch.cat([forward, backward], dim=-1) * mask[:, :, None].to(embedded.dtype)


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


class AverageEncoder(nn.Module):
    """Per-token linear projection 300 → 256 with ReLU: an order-free 'average' encoder (J&W A.3, fn. 4)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.proj = nn.Linear(cfg.embedding_dim, cfg.average_hidden)
        self.output_dim = cfg.average_hidden

    def forward(self, embedded: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.proj(embedded))


class AdditiveAttention(nn.Module):
    """φ(h, Q) = vᵀ tanh(W₁h + W₂Q) (Bahdanau; J&W §2); W₁ maps m → m/2 as in J&W's code."""

    def __init__(self, dim: int):
        super().__init__()
        self.w_hidden = nn.Linear(dim, dim // 2)
        self.w_query = nn.Linear(dim, dim // 2, bias=False)
        self.v = nn.Linear(dim // 2, 1, bias=False)

    def forward(self, hidden: torch.Tensor, query: torch.Tensor | None) -> torch.Tensor:
        z = self.w_hidden(hidden)
        if query is not None:
            z = z + self.w_query(query).unsqueeze(1)
        return self.v(torch.tanh(z)).squeeze(-1)


class DotAttention(nn.Module):
    """Scaled dot product φ(h, Q) = hQ/√m (J&W §2); single-sequence models use a learned query ~ N(0, 1)
    (T&Š App. C)."""

    def __init__(self, dim: int):
        super().__init__()
        self.learned_query = nn.Parameter(torch.randn(dim))
        self.scale = 1.0 / math.sqrt(dim)

    def forward(self, hidden: torch.Tensor, query: torch.Tensor | None) -> torch.Tensor:
        q = self.learned_query.expand(hidden.shape[0], -1) if query is None else query
        return torch.einsum("btm,bm->bt", hidden, q) * self.scale


_ENCODER_CLASSES = {"lstm": LSTMEncoder, "cnn": CNNEncoder, "average": AverageEncoder}
_ATTENTION_CLASSES = {"additive": AdditiveAttention, "dot": DotAttention}


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Softmax over real positions only; padded positions get exactly 0."""
    scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1).masked_fill(~mask, 0.0)


class AttentionClassifier(nn.Module):
    """Embedding → encoder → attention → linear decoder on h_α = Σ_t α̂_t h_t (J&W §2, Appendix A)."""

    def __init__(self, cfg: ModelConfig, embeddings: torch.Tensor | None = None):
        super().__init__()
        self.cfg = cfg
        self.embedding = nn.Embedding(cfg.vocab_size, cfg.embedding_dim, padding_idx=cfg.pad_index)
        if embeddings is not None:
            if tuple(embeddings.shape) != (cfg.vocab_size, cfg.embedding_dim):
                raise ValueError(
                    f"embedding matrix shape {tuple(embeddings.shape)} does not match "
                    f"vocab {cfg.vocab_size} × dim {cfg.embedding_dim}"
                )
            with torch.no_grad():
                self.embedding.weight.copy_(embeddings)
                self.embedding.weight[cfg.pad_index].zero_()
        self.encoder = _ENCODER_CLASSES[cfg.encoder](cfg)
        self.hidden_dim = self.encoder.output_dim
        self.attention = _ATTENTION_CLASSES[cfg.attention](self.hidden_dim)
        self.dropout = nn.Dropout(cfg.dropout)
        self.decoder = nn.Linear(self.hidden_dim, cfg.num_classes)

    # -- pieces the audits call separately -------------------------------------------------------------
    def embed(self, batch: Batch) -> torch.Tensor:
        return self.embedding(batch.tokens)

    def encode(self, embedded: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.encoder(embedded, mask)

    def encode_query(self, batch: Batch) -> torch.Tensor | None:
        """Query vector for QA/NLI models; single-sequence classifiers have none (learned query inside φ)."""
        return None

    def attend(self, hidden: torch.Tensor, mask: torch.Tensor, query: torch.Tensor | None = None) -> torch.Tensor:
        return masked_softmax(self.attention(hidden, query), mask)

    def decode(self, hidden: torch.Tensor, alpha: torch.Tensor, query: torch.Tensor | None = None) -> torch.Tensor:
        """Logits from hidden states and an attention distribution: Dec(Σ_t α_t h_t).

        ``alpha`` may carry extra sample dimensions, ``[B, S, T]`` → logits ``[B, S, C]`` (S permutations or
        adversaries per instance): one decoder call for all B·S distributions without copying ``hidden``."""
        context = torch.einsum("b...t,btm->b...m", alpha, hidden)
        return self.decoder(self.dropout(context))

    def token_logits(self, hidden: torch.Tensor, query: torch.Tensor | None = None) -> torch.Tensor:
        """Per-token logits ``[B, T, C]``: the decoder applied to each hidden state alone, as if all attention
        were on that token. The decoder is linear, so Dec(Σ_t α_t h_t) = Σ_t α_t (W h_t + b) (T&Š Eq. 9) and
        ``decode(h, α) == einsum(α, token_logits(h))`` for any distribution α (no dropout in eval mode)."""
        return self.decoder(hidden)

    # -- the full model ----------------------------------------------------------------------------------
    def forward(
        self,
        batch: Batch,
        attention: torch.Tensor | None = None,
        embedded: torch.Tensor | None = None,
        detach_attention: bool = False,
    ) -> ModelOutput:
        if embedded is None:
            embedded = self.embed(batch)
        hidden = self.encode(self.dropout(embedded), batch.mask)
        query = self.encode_query(batch)
        alpha = self.attend(hidden, batch.mask, query) if attention is None else attention
        if detach_attention:
            alpha = alpha.detach()
        logits = self.decode(hidden, alpha, query)
        return ModelOutput(logits, torch.softmax(logits, dim=-1), alpha, hidden, embedded, query)


def save_model(path, model: AttentionClassifier, extra: dict | None = None) -> None:
    """Save weights + hyper-parameters atomically: ``model.pt`` is self-describing."""
    from attnaudit.io import atomic_path

    with atomic_path(path) as tmp:
        torch.save({"config": asdict(model.cfg), "state_dict": model.state_dict(), **(extra or {})}, tmp)


def load_model(path, device: torch.device | str = "cpu") -> AttentionClassifier:
    payload = torch.load(path, map_location=device, weights_only=False)
    model = AttentionClassifier(ModelConfig(**payload["config"]))
    model.load_state_dict(payload["state_dict"])
    return model.to(device).eval()


def pick_device() -> torch.device:
    """CUDA when visible (CUDA_VISIBLE_DEVICES / a Slurm --gpus allocation), else CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")
