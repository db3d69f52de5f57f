"""Train stage: one attention classifier per variant (J&W Appendix A).

Adam (PyTorch defaults, lr 1e-3) with weight decay 1e-5 as the ℓ2 penalty on all parameters, batch 32,
cross-entropy on the softmax output (equivalent to J&W's sigmoid for two classes), model selection on dev
(by dev macro-F1, the metric we report, by default; J&W's code saved on dev ROC-AUC — ``selection_metric:
roc_auc`` — and ``selection: last`` keeps the final epoch). Training stops with
the epoch and batch named if the loss becomes NaN.
"""

from __future__ import annotations

import copy
import json
import logging
import platform
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from sklearn.metrics import accuracy_score, f1_score, roc_auc_score
from tqdm import tqdm

from attnaudit import AttnauditError
from attnaudit.data import Encoded, encode_split, iterate_batches, load_examples
from attnaudit.io import write_json, write_parquet
from attnaudit.models import AttentionClassifier, ModelConfig, pick_device, save_model

log = logging.getLogger(__name__)

DEFAULTS = {
    "encoder": "lstm",
    "attention": "additive",
    "regulariser": "base",
    "seed": 0,
    "epochs": 8,
    "batch_size": 32,
    "lr": 1e-3,
    "weight_decay": 1e-5,
    "selection": "best",  # best dev epoch (by selection_metric) or "last"
    "selection_metric": "macro_f1",
    "class_weighting": False,
    "dropout": 0.0,
    "lstm_hidden": 128,
    "cnn_kernels": [1, 3, 5, 7],
    "cnn_filters": 64,
    "average_hidden": 256,
    "eval_batch_size": 256,
}


def seed_everything(seed: int) -> None:
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)


def classification_metrics(labels: np.ndarray, probs: np.ndarray) -> dict:
    """Accuracy, macro-F1, per-class F1 and ROC-AUC (one-vs-rest macro for more than two classes)."""
    predicted = probs.argmax(axis=1)
    num_classes = probs.shape[1]
    per_class = f1_score(labels, predicted, average=None, labels=list(range(num_classes)), zero_division=0)
    try:
        auc = (
            roc_auc_score(labels, probs[:, 1])
            if num_classes == 2
            else roc_auc_score(labels, probs, multi_class="ovr", average="macro")
        )
    except ValueError:  # a split with one class present
        auc = float("nan")
    return {
        "accuracy": float(accuracy_score(labels, predicted)),
        "macro_f1": float(f1_score(labels, predicted, average="macro", zero_division=0)),
        "per_class_f1": [float(x) for x in per_class],
        "roc_auc": float(auc),
        "n": int(len(labels)),
    }


@torch.no_grad()
def predict(model: AttentionClassifier, data: Encoded, batch_size: int, device) -> tuple[np.ndarray, list]:
    """Probabilities [N, C] and attention (a list of length-T arrays), in the order of ``data``."""
    model.eval()
    probs = np.zeros((len(data), model.cfg.num_classes), dtype=np.float64)
    attention: list = [None] * len(data)
    for rows, batch in iterate_batches(data, batch_size):
        out = model(batch.to(device))
        probs[rows] = out.probs.double().cpu().numpy()
        alpha = out.attention.cpu().numpy()
        for row, a, n in zip(rows, alpha, batch.lengths.tolist()):
            attention[row] = a[:n].astype(np.float32)
    return probs, attention


def train_model(
    dataset_dir: str, embeddings: str, spec: dict, threads: int = 1, progress: bool = True
) -> tuple[AttentionClassifier, dict, pd.DataFrame]:
    spec = {**DEFAULTS, **spec}
    started = time.time()
    torch.set_num_threads(max(1, threads))
    seed_everything(spec["seed"])
    device = pick_device()
    examples, vocab = load_examples(dataset_dir)
    splits = {s: encode_split(examples, vocab, s) for s in ("train", "dev", "test")}
    for name, data in splits.items():
        if len(data) == 0:
            raise AttnauditError(f"{dataset_dir}/examples.parquet has no '{name}' examples")
    num_classes = int(examples["label"].max()) + 1
    matrix = torch.from_numpy(np.load(embeddings))
    cfg = ModelConfig(
        vocab_size=len(vocab),
        num_classes=num_classes,
        encoder=spec["encoder"],
        attention=spec["attention"],
        embedding_dim=matrix.shape[1],
        lstm_hidden=spec["lstm_hidden"],
        cnn_kernels=tuple(spec["cnn_kernels"]),
        cnn_filters=spec["cnn_filters"],
        average_hidden=spec["average_hidden"],
        dropout=spec["dropout"],
    )
    model = AttentionClassifier(cfg, matrix).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=spec["lr"], weight_decay=spec["weight_decay"])
    weight = None
    if spec["class_weighting"]:
        counts = np.bincount(splits["train"].labels, minlength=num_classes).astype(np.float64)
        weight = torch.tensor(counts.sum() / (num_classes * np.maximum(counts, 1)), dtype=torch.float32, device=device)
    loss_fn = torch.nn.CrossEntropyLoss(weight=weight)

    history, best_score, best_state, best_epoch = [], -np.inf, None, None
    for epoch in range(spec["epochs"]):
        model.train()
        total, batches = 0.0, 0
        stream = iterate_batches(splits["train"], spec["batch_size"], shuffle=True, seed=spec["seed"] * 1000 + epoch)
        n_batches = -(-len(splits["train"]) // spec["batch_size"])
        for index, (_, batch) in enumerate(
            tqdm(stream, total=n_batches, desc=f"epoch {epoch}", disable=not progress, mininterval=5)
        ):
            batch = batch.to(device)
            loss = loss_fn(model(batch).logits, batch.labels)
            if not torch.isfinite(loss):
                raise AttnauditError(
                    f"training diverged: loss is {loss.item()} at epoch {epoch}, batch {index} "
                    f"(lr {spec['lr']}); lower the learning rate or check the embeddings"
                )
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
            batches += 1
        dev_probs, _ = predict(model, splits["dev"], spec["eval_batch_size"], device)
        dev = classification_metrics(splits["dev"].labels, dev_probs)
        history.append(
            {
                "epoch": epoch,
                "train_loss": total / max(batches, 1),
                **{f"dev_{k}": v for k, v in dev.items() if k != "per_class_f1"},
            }
        )
        log.info(
            "epoch %d: train loss %.4f, dev acc %.4f, dev F1 %.4f, dev AUC %.4f",
            epoch,
            history[-1]["train_loss"],
            dev["accuracy"],
            dev["macro_f1"],
            dev["roc_auc"],
        )
        score = dev[spec["selection_metric"]]
        if spec["selection"] == "last" or score > best_score:
            best_score, best_epoch = score, epoch
            best_state = copy.deepcopy(model.state_dict())
    model.load_state_dict(best_state)
    model.eval()

    metrics: dict = {"model": spec, "selected_epoch": best_epoch, "history": history}
    frames = []
    for name, data in splits.items():
        probs, attention = predict(model, data, spec["eval_batch_size"], device)
        if name != "train":
            metrics[name] = classification_metrics(data.labels, probs)
        frames.append(
            pd.DataFrame(
                {
                    "id": data.ids,
                    "split": name,
                    "label": data.labels,
                    "predicted": probs.argmax(1),
                    "probs": list(probs),
                    "attention": attention,
                }
            )
        )
    metrics["provenance"] = provenance(device, threads, spec["seed"], time.time() - started)
    return model, metrics, pd.concat(frames, ignore_index=True)


def provenance(device, threads: int, seed: int, seconds: float) -> dict:
    """What a comparison across machines needs: device, library versions, threads, seed, wall time."""
    return {
        "device": str(device),
        "device_name": torch.cuda.get_device_name(0) if device.type == "cuda" else platform.processor() or "cpu",
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "threads": torch.get_num_threads(),
        "requested_threads": threads,
        "seed": seed,
        "wall_seconds": round(seconds, 2),
        "host": platform.node(),
        "python": platform.python_version(),
    }


def run(dataset_dir: str, embeddings: str, out_dir: str, spec: dict, threads: int) -> dict:
    model, metrics, predictions = train_model(dataset_dir, embeddings, spec, threads)
    out = Path(out_dir)
    save_model(out / "model.pt", model, {"spec": {**DEFAULTS, **spec}})
    write_parquet(out / "predictions.parquet", predictions)
    write_json(out / "metrics.json", metrics)
    log.info("test: %s", {k: v for k, v in metrics["test"].items() if k != "per_class_f1"})
    return metrics


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("train", help="train one attention classifier variant")
    p.add_argument("--dataset-dir", required=True)
    p.add_argument("--embeddings", required=True, help="matrix.npy aligned to vocab.json")
    p.add_argument("--out-dir", required=True)
    p.add_argument("--spec", default="{}", help="JSON: encoder, attention, seed, epochs, lr, ...")
    p.add_argument("--threads", type=int, default=1)
    p.set_defaults(func=lambda a: run(a.dataset_dir, a.embeddings, a.out_dir, json.loads(a.spec), a.threads))
