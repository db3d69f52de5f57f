"""Models: the attention classifiers every paper trains (:mod:`.classifier`), their parts (:mod:`.encoders`,
:mod:`.attention`), hyper-parameters (:mod:`.config`), batches (:mod:`.batch`), and saving/loading."""

from __future__ import annotations

from dataclasses import asdict

import torch

from attnaudit import AttnauditError
from attnaudit.models.attention import masked_softmax, uniform_over
from attnaudit.models.batch import Batch, ModelOutput
from attnaudit.models.classifier import AttentionClassifier
from attnaudit.models.config import ATTENTIONS, ENCODERS, HIDDEN_MODES, ModelConfig
from attnaudit.models.encoders import LSTMEncoder

__all__ = [
    "ATTENTIONS",
    "ENCODERS",
    "HIDDEN_MODES",
    "AttentionClassifier",
    "Batch",
    "LSTMEncoder",
    "ModelConfig",
    "ModelOutput",
    "attach_saved_guides",
    "load_model",
    "masked_softmax",
    "pick_device",
    "save_model",
    "uniform_over",
]


def save_model(path, model: AttentionClassifier, extra: dict | None = None) -> None:
    """Save weights + hyper-parameters atomically: ``model.pt`` is self-describing (a guided model's guides
    included, :func:`attach_saved_guides`)."""
    from attnaudit.io import atomic_path

    payload = {"config": asdict(model.cfg), "state_dict": model.state_dict(), **(extra or {})}
    if getattr(model, "guides", None) is not None:
        payload["guides"] = model.guides
    with atomic_path(path) as tmp:
        torch.save(payload, tmp)


def load_model(path, device: torch.device | str = "cpu") -> AttentionClassifier:
    """Rebuild any saved variant from its ``model.pt`` alone (guided models also carry their guides)."""
    from attnaudit.io import load_torch

    payload = load_torch(path, map_location=device)
    payload["config"].setdefault("attend_to_markers", True)  # saved before the field existed: trained so
    if payload["config"].get("kind") == "qa":  # QA/NLI (J&W §3): attnaudit.models.qa
        from attnaudit.models.qa import QAConfig, QAModel

        model = QAModel(QAConfig(**payload["config"]))
    else:
        model = AttentionClassifier(ModelConfig(**payload["config"]))
    model.load_state_dict(payload["state_dict"])
    model.guides = payload.get("guides")
    return model.to(device).eval()


def attach_saved_guides(model: AttentionClassifier, encoded, where) -> None:
    """Give ``encoded``'s instances the guide attention a guided model (W&P §3.4) was saved with; nothing for
    other models. Every instance must be among those it was trained on (``where`` names the model file)."""
    if model.guides is None:
        return
    missing = [i for i in encoded.ids if i not in model.guides]
    if missing:
        raise AttnauditError(
            f"{where} has no guide attention for instances {missing[:3]}: it was trained on another version of "
            "this dataset; retrain it"
        )
    encoded.guides = [model.guides[i] for i in encoded.ids]


def pick_device() -> torch.device:
    """CUDA when visible (CUDA_VISIBLE_DEVICES / a Slurm --gpus allocation), else CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")
