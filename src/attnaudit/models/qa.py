"""Question answering and NLI with query-conditioned attention, Jain & Wallace (2019) §2–§3 and their code's
``Question_Answering`` model: separate encoders for the passage P (premise) and the query Q (question,
hypothesis), a query vector q from Q's encoder, attention over P conditioned on q (additive vᵀ tanh(W_p h_t + W_q q)
or dot h_t·q/√m) and the decoder ŷ = softmax(W₂ tanh(W₁p c + W₁q q)), c = Σ_t α_t h_t, with the logits masked to
the candidate answers where the task has candidates (CNN: the passage's @entity tokens; bAbI/SNLI: all classes).

The interface is the classifier's (:mod:`.classifier`), so every audit runs unchanged: ``model(batch)``,
``model(batch, attention=α)``, ``model.decode(hidden, α, query)`` with α ``[B, T]`` or ``[B, S, T]``,
``model(batch, embedded=e, detach_attention=True)`` (e = the *passage* embeddings; importance is over passage
tokens) and ``model.encode_query(batch)``. ``out.query`` is ``[q; m]``: the query vector followed by the
candidate indicator m ∈ {0, 1}^C, so ``decode`` masks the logits from what the audits already pass through.
The decoder is not linear in c (tanh), so :meth:`QAModel.token_logits` raises and ``linear_decoder`` is False.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch import nn

from attnaudit import AttnauditError
from attnaudit.models.batch import Batch
from attnaudit.models.classifier import AttentionClassifier
from attnaudit.models.config import ModelConfig, config_fields
from attnaudit.models.encoders import build_encoder


@dataclass
class QAConfig(ModelConfig):
    """A :class:`ModelConfig` plus the QA fields. ``candidate_ids``: the vocabulary id of each class's answer word
    (a class is a candidate of an instance when its word occurs in the passage; CNN), or empty (every class is a
    candidate: bAbI's all-ones mask, SNLI). ``decoder_hidden``: the width of W₁; None: half the encoder's output
    size, as J&W's code's ``AttnDecoderQA`` (the BiLSTM's: lstm_hidden)."""

    kind: str = "qa"
    candidate_ids: tuple[int, ...] = ()
    decoder_hidden: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        self.candidate_ids = tuple(self.candidate_ids)
        if self.hidden_mode != "plain":
            raise AttnauditError(f"QA/NLI models take plain hidden states, not {self.hidden_mode!r} (T&Š §3.1)")
        if self.attention not in ("additive", "dot", "uniform"):
            raise AttnauditError(f"QA/NLI models take additive, dot or uniform attention, not {self.attention!r}")
        if self.candidate_ids and len(self.candidate_ids) != self.num_classes:
            raise AttnauditError(f"candidate_ids has {len(self.candidate_ids)} entries for {self.num_classes} classes")


class QAModel(AttentionClassifier):
    """J&W's QA/NLI model (§2, their ``AttnDecoderQA``) behind the classifier's interface."""

    linear_decoder = False  # tanh(W₁p c + W₁q q): Dec(Σ α h) ≠ Σ α Dec(h); the audits' linear fast paths do not apply

    def __init__(self, cfg: QAConfig, embeddings: torch.Tensor | None = None):
        super().__init__(cfg, embeddings)
        dim = self.hidden_dim
        width = cfg.decoder_hidden or max(1, dim // 2)
        self.query_embedding = nn.Embedding(cfg.vocab_size, cfg.embedding_dim, padding_idx=cfg.pad_index)
        if embeddings is not None:  # J&W: two encoders, each with its own embedding layer, same initialisation
            with torch.no_grad():
                self.query_embedding.weight.copy_(embeddings)
                self.query_embedding.weight[cfg.pad_index].zero_()
        self.query_encoder = build_encoder(cfg)
        self.decoder = None  # the classifier's linear decoder is replaced by W₁p, W₁q, W₂
        self.w_passage = nn.Linear(dim, width)
        self.w_query = nn.Linear(dim, width, bias=False)
        self.output = nn.Linear(width, cfg.num_classes)
        self.register_buffer("candidate_ids", torch.tensor(cfg.candidate_ids, dtype=torch.long), persistent=False)

    # -- the query ----------------------------------------------------------------------------------------
    def query_vector(self, batch: Batch) -> torch.Tensor:
        """q ``[B, m]`` from Q's own encoder: BiLSTM [h_fwd at the last token; h_bwd at the first] (J&W's code),
        masked max over time for the CNN, masked mean for the token-wise (average) encoder."""
        if batch.query_tokens is None or batch.query_mask is None:
            raise AttnauditError("a QA/NLI model needs the query (question/hypothesis) with every batch; none given")
        mask = batch.query_mask
        states = self.query_encoder(self.dropout(self.query_embedding(batch.query_tokens)), mask)
        if self.cfg.encoder == "lstm":
            half = states.shape[-1] // 2
            last = (mask.sum(dim=1) - 1).clamp_min(0)
            forward = states[torch.arange(states.shape[0], device=states.device), last, :half]
            return torch.cat([forward, states[:, 0, half:]], dim=-1)
        if self.cfg.encoder == "cnn":
            return states.masked_fill(~mask[:, :, None], float("-inf")).amax(dim=1).clamp_min(0.0)
        weights = mask.to(states.dtype)[:, :, None]
        return (states * weights).sum(dim=1) / weights.sum(dim=1).clamp_min(1.0)

    def candidates(self, batch: Batch) -> torch.Tensor:
        """``[B, C]`` indicator of the classes each instance may answer (all ones without candidate ids): those
        whose word occurs in the whole passage, also when a deletion or erasure has removed it (``answer_tokens``),
        as J&W's code keeps the full passage's entity mask in its leave-one-out (``remove_and_run``)."""
        if not len(self.candidate_ids):
            return batch.tokens.new_ones((batch.tokens.shape[0], self.cfg.num_classes), dtype=torch.float32)
        tokens, mask = batch.tokens, batch.mask
        if batch.answer_tokens is not None:
            tokens, mask = batch.answer_tokens, batch.answer_tokens >= 0
        present = (tokens[:, :, None] == self.candidate_ids[None, None, :]) & mask[:, :, None]
        present = present.any(dim=1) & (self.candidate_ids >= 0)[None, :]
        present = present | ~present.any(dim=1, keepdim=True)  # no candidate left: no mask rather than no answer
        return present.float()

    def encode_query(self, batch: Batch) -> torch.Tensor:
        """``[q; m]`` (see the module docstring): what ``decode`` and the attention need of the query."""
        q = self.query_vector(batch)
        return torch.cat([q, self.candidates(batch).to(q.dtype)], dim=-1)

    def split_query(self, query: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return query[..., : self.hidden_dim], query[..., self.hidden_dim :]

    # -- the interface every audit uses -----------------------------------------------------------------
    def attention_query(self, query: torch.Tensor | None) -> torch.Tensor | None:
        return None if query is None else self.split_query(query)[0]

    def linear_readout(self, query: torch.Tensor | None = None):
        """W₁p and its bias (linear in c); ``finish`` adds W₁q q, applies tanh, W₂ and the candidate mask."""
        if query is None:
            raise AttnauditError("QAModel.linear_readout needs the query (out.query of the model's output)")
        q, allowed = self.split_query(query)

        def finish(projected: torch.Tensor) -> torch.Tensor:
            # the candidates stay the whole passage's under deletions and erasures (:meth:`candidates`)
            logits = self.output(torch.tanh(projected + self.w_query(q)))  # [..., B, width] → [..., B, C]
            return logits.masked_fill(allowed.expand_as(logits) == 0, float("-inf"))

        return self.w_passage.weight, self.w_passage.bias, finish

    def decode(self, hidden: torch.Tensor, alpha: torch.Tensor, query: torch.Tensor | None = None) -> torch.Tensor:
        """logits = W₂ tanh(W₁p c + W₁q q), masked to the candidates; ``alpha`` ``[B, T]`` or ``[B, S, T]``
        (→ logits ``[B, S, C]``)."""
        if query is None:
            raise AttnauditError("QAModel.decode needs the query (out.query of the model's output)")
        q, allowed = self.split_query(query)
        context = torch.einsum("b...t,btm->b...m", alpha, hidden)
        extra = context.dim() - 2  # sample dimensions between the batch and the features
        shape = (q.shape[0], *([1] * extra), -1)
        z = torch.tanh(self.w_passage(self.dropout(context)) + self.w_query(q).view(shape))
        logits = self.output(z)
        return logits.masked_fill(allowed.view(shape).expand_as(logits) == 0, float("-inf"))

    def token_logits(self, hidden: torch.Tensor, query: torch.Tensor | None = None) -> torch.Tensor:
        raise NotImplementedError(
            "QAModel has a non-linear decoder tanh(W₁p c + W₁q q) (J&W's code, AttnDecoderQA): "
            "Dec(Σ_t α_t h_t) ≠ Σ_t α_t Dec(h_t), so per-token logits (T&Š Eq. 9) and the linear fast paths do not "
            "apply; use decode(hidden, alpha, query)"
        )


def candidate_ids(examples: pd.DataFrame, vocab: dict[str, int], num_classes: int) -> tuple[int, ...]:
    """Vocabulary id of each class's answer word from the ``answer`` column (CNN); classes never seen as an
    answer get −1 (never a candidate). No ``answer`` column: () (every class is a candidate)."""
    if "answer" not in examples.columns:
        return ()
    ids = np.full(num_classes, -1, dtype=np.int64)
    for label, answer in examples[["label", "answer"]].drop_duplicates().itertuples(index=False):
        if answer not in vocab:
            raise AttnauditError(f"answer {answer!r} (class {label}) is not in the vocabulary")
        ids[int(label)] = vocab[answer]
    return tuple(int(i) for i in ids)


def build_qa_model(
    spec: dict, vocab: dict[str, int], num_classes: int, matrix: torch.Tensor, examples: pd.DataFrame
) -> QAModel:
    """The QA/NLI model of one model-sheet branch (the classifier's fields; ``decoder_hidden`` optional)."""
    if spec.get("regulariser", "base") != "base" or spec.get("objective", "classify") != "classify":
        raise AttnauditError(
            f"variant {spec.get('variant')!r}: QA/NLI models support regulariser base and objective classify only"
        )
    cfg = QAConfig(
        **config_fields(spec, vocab, num_classes, matrix.shape[1]),
        candidate_ids=candidate_ids(examples, vocab, num_classes),
        decoder_hidden=spec.get("decoder_hidden"),
    )
    return QAModel(cfg, matrix)
