import json

import numpy as np
import pandas as pd
import pytest
import torch

from attnaudit import AttnauditError
from attnaudit.train import classification_metrics, run, train_model


def test_planted_model_learns_the_markers(planted_model_dir):
    metrics = json.loads((planted_model_dir / "metrics.json").read_text())
    assert metrics["test"]["accuracy"] > 0.9
    for key in ("accuracy", "macro_f1", "per_class_f1", "roc_auc"):
        assert key in metrics["dev"] and key in metrics["test"]
    prov = metrics["provenance"]
    assert (
        prov["device"] == ("cuda" if torch.cuda.is_available() else "cpu")
        and prov["seed"] == 0
        and prov["torch"] == torch.__version__
    )
    predictions = pd.read_parquet(planted_model_dir / "predictions.parquet")
    assert set(predictions["split"]) == {"train", "dev", "test"}
    row = predictions.iloc[0]
    assert np.isclose(np.sum(row["probs"]), 1.0) and np.isclose(np.sum(row["attention"]), 1.0, atol=1e-5)


def test_training_is_deterministic(planted_dataset):
    spec = {"encoder": "lstm", "attention": "dot", "epochs": 2, "lstm_hidden": 8, "seed": 3}
    args = (str(planted_dataset / "dataset"), str(planted_dataset / "embeddings" / "matrix.npy"), spec)
    model_a, metrics_a, pred_a = train_model(*args, progress=False)
    model_b, metrics_b, pred_b = train_model(*args, progress=False)
    assert metrics_a["history"] == metrics_b["history"]
    for (name, a), b in zip(model_a.state_dict().items(), model_b.state_dict().values()):
        assert torch.equal(a, b), name
    other = train_model(*args[:2], {**spec, "seed": 4}, progress=False)[1]
    assert other["history"] != metrics_a["history"]


def test_nan_loss_names_epoch_and_batch(planted_dataset, tmp_path):
    matrix = np.load(planted_dataset / "embeddings" / "matrix.npy")
    matrix[4:] = np.nan
    np.save(tmp_path / "nan.npy", matrix)
    with pytest.raises(AttnauditError, match=r"epoch 0, batch 0"):
        run(
            str(planted_dataset / "dataset"),
            str(tmp_path / "nan.npy"),
            str(tmp_path / "out"),
            {"encoder": "average", "epochs": 1},
            threads=1,
        )
    assert not (tmp_path / "out" / "model.pt").exists()


def test_metrics_match_sklearn_definitions():
    labels = np.array([0, 0, 1, 1, 1])
    probs = np.array([[0.9, 0.1], [0.4, 0.6], [0.2, 0.8], [0.3, 0.7], [0.6, 0.4]])
    m = classification_metrics(labels, probs)
    assert m["accuracy"] == pytest.approx(0.6)
    assert m["per_class_f1"] == pytest.approx([0.5, 2 / 3])
    assert m["roc_auc"] == pytest.approx(5 / 6)
