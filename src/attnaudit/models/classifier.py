"""The attention classifier of Jain & Wallace (2019), Appendix A, and the variants the other papers train, behind
one interface every audit uses.

``model(batch)`` returns logits, probabilities, the attention α̂ [B,T], the hidden states h [B,T,m] and the
embedded tokens e [B,T,d]; ``model(batch, attention=α)`` feeds a given distribution to the decoder with the
encoder states unchanged; ``model.decode(hidden, alpha, query)`` runs the decoder alone, so permutation and
adversarial audits never re-run the encoder; ``model.token_logits(hidden)`` is the decoder on every state alone
(T&Š Eq. 9). ``model(batch, embedded=e)`` starts from given embeddings (gradient and Captum methods), and
``detach_attention=True`` cuts the graph at the attention module (J&W Appendix B).

What the papers vary, all from :class:`ModelConfig`: the encoder (J&W's lstm/cnn/average; W&P's token-level
``mlp``), stacked BiLSTM layers (T&Š App. B), the hidden states (T&Š §3.1: ``concat`` h = [rnn(e); e],
``residual`` h = e + rnn(e)) and the attention (learned ``additive``/``dot``; W&P's frozen ``uniform`` §3.2 and
``guided`` §3.4). Loss terms (tying, MLM, imitation) live in :mod:`attnaudit.objectives`, not here.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from attnaudit.models.attention import build_attention
from attnaudit.models.batch import Batch, ModelOutput
from attnaudit.models.config import ModelConfig
from attnaudit.models.encoders import build_encoder


class AttentionClassifier(nn.Module):
    """Embedding → encoder → attention → linear decoder on h_α = Σ_t α̂_t h_t (J&W §2, Appendix A)."""

    linear_decoder = True  # Dec(Σ_t α_t h_t) = Σ_t α_t token_logits(h)_t: the audits' fast paths rely on it

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
        self.encoder = build_encoder(cfg)
        self.hidden_dim = cfg.hidden_dim
        self.attention = build_attention(cfg.attention, self.hidden_dim, cfg.marker_ids, cfg.attend_to_markers)
        self.dropout = nn.Dropout(cfg.dropout)
        self.decoder = nn.Linear(self.hidden_dim, cfg.num_classes)

    # -- pieces the audits call separately -------------------------------------------------------------
    def embed(self, batch: Batch) -> torch.Tensor:
        return self.embedding(batch.tokens)

    def encode(self, embedded: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Hidden states h_t: the encoder's states, with the embedding concatenated or added (T&Š §3.1)."""
        return self._with_embeddings(self.encoder(embedded, mask), embedded, mask)

    def _with_embeddings(self, states: torch.Tensor, embedded: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """T&Š §3.1: h = [rnn(e); e] (``concat``) or e + rnn(e) (``residual``); the encoder states otherwise."""
        if self.cfg.hidden_mode == "plain":
            return states
        kept = embedded * mask[:, :, None].to(embedded.dtype)
        return torch.cat([states, kept], dim=-1) if self.cfg.hidden_mode == "concat" else states + kept

    def encode_query(self, batch: Batch) -> torch.Tensor | None:
        """Query vector for QA/NLI models; single-sequence classifiers have none (learned query inside φ)."""
        return None

    def attention_query(self, query: torch.Tensor | None) -> torch.Tensor | None:
        """The vector the attention is conditioned on (none: a learned query inside φ)."""
        return query

    def attend(self, hidden: torch.Tensor, batch: Batch, query: torch.Tensor | None = None) -> torch.Tensor:
        return self.attention(hidden, self.attention_query(query), batch)

    def linear_readout(self, query: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, Callable]:
        """``(W, b, finish)`` with Dec(c) = finish(W c + b): the part of the decoder that is linear in the context
        c = Σ_t α_t h_t, so W h_t + b can be averaged per token under any attention and ``finish`` applied after
        (the deletions of :mod:`attnaudit.models.deletions`). The classifier's decoder is all linear (T&Š Eq. 9)."""
        return self.decoder.weight, self.decoder.bias, lambda projected: projected

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
        alpha = self.attend(hidden, batch, query) if attention is None else attention
        if detach_attention:
            alpha = alpha.detach()
        logits = self.decode(hidden, alpha, query)
        return ModelOutput(logits, torch.softmax(logits, dim=-1), alpha, hidden, embedded, query)
