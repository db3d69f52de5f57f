"""Hyper-parameters saved with the weights, so a ``model.pt`` rebuilds its model alone."""

from __future__ import annotations

from dataclasses import dataclass

from attnaudit import AttnauditError

ENCODERS = ("lstm", "cnn", "average", "mlp")
ATTENTIONS = ("additive", "dot", "uniform", "guided")
HIDDEN_MODES = ("plain", "concat", "residual")


@dataclass
class ModelConfig:
    """One architecture. Defaults are J&W's (Appendix A); the other papers' variants set the fields they change."""

    vocab_size: int
    num_classes: int
    encoder: str = "lstm"
    attention: str = "additive"
    embedding_dim: int = 300
    lstm_hidden: int = 128  # per direction (J&W A.1; T&Š use 150 so that 2×150 = the 300-d embedding)
    lstm_layers: int = 1  # stacked BiLSTM layers (T&Š App. B)
    cnn_kernels: tuple[int, ...] = (1, 3, 5, 7)  # J&W A.2
    cnn_filters: int = 64
    average_hidden: int = 256  # J&W A.3
    mlp_hidden: int = 128  # W&P §3.4 diagnostic MLP: one token-level affine layer with tanh
    hidden_mode: str = "plain"  # T&Š §3.1: concat h = [rnn(e); e], residual h = e + rnn(e)
    marker_ids: tuple[int, ...] = ()  # <s>, </s>: vocabulary ids of the sentence markers
    attend_to_markers: bool = False  # False: α is 0 on <s>, </s> (J&W's and W&P's code mask them out of the softmax)
    pad_index: int = 0
    dropout: float = 0.0

    def __post_init__(self) -> None:
        for name, allowed in (("encoder", ENCODERS), ("attention", ATTENTIONS), ("hidden_mode", HIDDEN_MODES)):
            if getattr(self, name) not in allowed:
                raise AttnauditError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        self.cnn_kernels = tuple(self.cnn_kernels)
        self.marker_ids = tuple(self.marker_ids)
        if self.hidden_mode == "residual" and self.encoder_dim != self.embedding_dim:
            raise AttnauditError(
                f"residual hidden states h = e + rnn(e) need an encoder output of the embedding size "
                f"{self.embedding_dim}; the {self.encoder} encoder gives {self.encoder_dim} "
                f"(for an lstm set lstm_hidden: {self.embedding_dim // 2})"
            )

    @property
    def encoder_dim(self) -> int:
        """Width of the encoder's own output, before concat/residual."""
        return {
            "lstm": 2 * self.lstm_hidden,
            "cnn": self.cnn_filters * len(self.cnn_kernels),
            "average": self.average_hidden,
            "mlp": self.mlp_hidden,
        }[self.encoder]

    @property
    def hidden_dim(self) -> int:
        """Width of the hidden states h_t that attention weighs."""
        return self.encoder_dim + (self.embedding_dim if self.hidden_mode == "concat" else 0)


def config_fields(spec: dict, vocab: dict[str, int], num_classes: int, embedding_dim: int) -> dict:
    """The :class:`ModelConfig` fields of one model-sheet branch (training hyper-parameters ``spec``) that every
    model kind shares."""
    from attnaudit.masks import marker_ids

    return {
        "vocab_size": len(vocab),
        "num_classes": num_classes,
        "encoder": spec["encoder"],
        "attention": spec["attention"],
        "embedding_dim": embedding_dim,
        "lstm_hidden": spec["lstm_hidden"],
        "lstm_layers": spec["lstm_layers"],
        "cnn_kernels": tuple(spec["cnn_kernels"]),
        "cnn_filters": spec["cnn_filters"],
        "average_hidden": spec["average_hidden"],
        "mlp_hidden": spec["mlp_hidden"],
        "marker_ids": marker_ids(vocab),
        "attend_to_markers": spec["attend_to_markers"],
        "dropout": spec["dropout"],
    }
