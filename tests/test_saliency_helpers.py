"""Tiny random models and batches shared by the importance, saliency and LRP tests (helpers only, no tests)."""

from __future__ import annotations

import numpy as np
import torch

from attnaudit.data import collate
from attnaudit.models import AttentionClassifier, ModelConfig

ENCODERS = ("lstm", "cnn", "average")
VOCAB = 40  # ids 0..3 are <pad>, <unk>, <s>, </s> as in data.SPECIALS
MARKERS = [2, 3]


def tiny_model(
    encoder: str,
    attention: str = "additive",
    seed: int = 0,
    num_classes: int = 2,
    zero_bias: bool = False,
    **fields,
) -> AttentionClassifier:
    """A small model of any variant: ``fields`` are further ModelConfig fields (lstm_layers, hidden_mode, ...)."""
    torch.manual_seed(seed)
    cfg = ModelConfig(
        vocab_size=VOCAB,
        num_classes=num_classes,
        encoder=encoder,
        attention=attention,
        **{
            "embedding_dim": 8,
            "lstm_hidden": 5,
            "cnn_filters": 3,
            "cnn_kernels": (1, 3),
            "average_hidden": 7,
            "mlp_hidden": 6,
            "marker_ids": tuple(MARKERS),
            **fields,
        },
    )
    model = AttentionClassifier(cfg)
    with torch.no_grad():
        model.embedding.weight.normal_(0, 1.0)
        model.embedding.weight[cfg.pad_index].zero_()
        for name, param in model.named_parameters():
            if "bias" in name:
                if zero_bias:
                    param.zero_()
                else:
                    param.normal_(0, 0.3)
    return model.eval()


def tiny_batch(lengths=(5, 9, 3, 7), seed: int = 0, markers: bool = True, guide: bool = False):
    """Sequences of the given lengths (markers included), right-padded, with ids (and a random guide
    distribution per instance, for guided-attention models)."""
    rng = np.random.default_rng(seed)
    sequences = []
    for length in lengths:
        body = rng.integers(4, VOCAB, size=length - 2 if markers else length)
        sequences.append(np.concatenate([[2], body, [3]]) if markers else body)
    labels = rng.integers(0, 2, size=len(lengths))
    guides = [rng.dirichlet(np.ones(len(s))).astype(np.float32) for s in sequences] if guide else None
    return collate(sequences, labels, [f"doc-{seed}-{i}" for i in range(len(lengths))], guides=guides)
