"""Masked language modelling (T&Š §3.1, Eq. 5): L = CE + η·L_MLM. Tokens are selected with probability p = 0.15
among the real non-marker tokens and replaced BERT-style (T&Š footnote 4): 80 % by a mask input, 10 % by a random
word, 10 % kept; the masked sequence x̂ goes through the shared embedding and encoder, ĥ = rnn(emb(x̂)), and a
linear decoder whose weights are the embedding matrix predicts the original token at every selected position.
T&Š tie the decoder to the input embeddings "and keep them frozen during training": the model sheet gives an mlm
variant ``freeze_embeddings: true`` (:data:`attnaudit.modelsheet.REGULARISER_DEFAULTS`). With
``freeze_embeddings: false`` the classification loss trains the embeddings, and the decoder follows them without
passing the MLM loss's gradient to them.

L_MLM is the mean cross-entropy over the batch's selected tokens. T&Š do not state the reduction; their footnote 5
(η is set per dataset because "the longer the sequence is, the more masked predictions we are expected to make")
reads as a loss that grows with the number of masked tokens, such as a sum per sequence, against which our η is
the weight of one masked token's loss (on SST, ~2.5 masked tokens a sentence, their η would weigh ~2.5× ours).

Our vocabularies have no ``[MASK]`` token (J&W's preprocessing); the mask input is the all-zero padding embedding,
which a real position never otherwise receives. Draws come from a generator seeded with the model seed, so
training stays deterministic.
"""

from __future__ import annotations

import torch

from attnaudit import AttnauditError
from attnaudit.masks import candidate_mask
from attnaudit.objectives import ObjectiveTerm, register


def mlm_corrupt(
    tokens: torch.Tensor,
    candidates: torch.Tensor,
    probability: float,
    mask_index: int,
    first_word: int,
    vocab_size: int,
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(corrupted tokens, selected positions)``: each candidate selected with ``probability``; of the selected,
    80 % become ``mask_index``, 10 % a uniformly drawn word id in [first_word, vocab_size), 10 % stay."""
    shape = tokens.shape
    select_draw = torch.rand(shape, generator=generator).to(tokens.device)
    kind_draw = torch.rand(shape, generator=generator).to(tokens.device)
    random_words = torch.randint(first_word, max(first_word + 1, vocab_size), shape, generator=generator)
    selected = candidates & (select_draw < probability)
    corrupted = torch.where(selected & (kind_draw < 0.8), torch.full_like(tokens, mask_index), tokens)
    corrupted = torch.where(
        selected & (kind_draw >= 0.8) & (kind_draw < 0.9), random_words.to(tokens.device), corrupted
    )
    return corrupted, selected


@register
class MaskedLanguageModel(ObjectiveTerm):
    name = "mlm"
    citation = "Tutek & Šnajder 2020, §3.1 Eq. 5 (BERT's 80/10/10 masking, footnote 4)"

    def __init__(self, spec, context):
        super().__init__(spec, context)
        self.eta = float(spec.get("eta", 1.0))
        self.probability = float(spec.get("mlm_probability", 0.15))
        self.generator = torch.Generator().manual_seed(int(context.seed) * 7919 + 17)

    def loss(self, model, batch, out):
        embedding = model.embedding.weight
        if model.hidden_dim != embedding.shape[1]:
            raise AttnauditError(
                f"mlm decodes hidden states with the embedding matrix, so they need its size {embedding.shape[1]}, "
                f"got {model.hidden_dim} (set lstm_hidden to half the embedding size)"
            )
        candidates = candidate_mask(batch.tokens, batch.mask, self.context.marker_ids)
        corrupted, selected = mlm_corrupt(
            batch.tokens,
            candidates,
            self.probability,
            self.context.pad_index,
            self.context.first_word_index,
            self.context.vocab_size,
            self.generator,
        )
        if not selected.any():
            return out.logits.new_zeros(())
        hidden = model.encode(model.embedding(corrupted), batch.mask)
        logits = hidden[selected] @ embedding.detach().T  # the tied decoder; the MLM loss never moves it
        return self.eta * torch.nn.functional.cross_entropy(logits, batch.tokens[selected])
