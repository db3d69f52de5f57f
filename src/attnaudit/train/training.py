"""Training one variant of the model sheet: the classification loss plus the variant's objective terms
(:mod:`attnaudit.objectives`), J&W Appendix A otherwise.

Adam (lr 1e-3) with weight decay 1e-5 as the ℓ2 penalty on all parameters (fused: one kernel), batch 32,
length-bucketed batches, optional gradient clipping (T&Š Table 4: 5), optional early stopping (``patience``),
frozen embeddings (``freeze_embeddings``; T&Š's MLM models), model selection on dev (by dev macro-F1, the metric
we report, by default; J&W's code saved on dev ROC-AUC — ``selection_metric: roc_auc`` — and ``selection: last``
keeps the final epoch; an ``imitate`` model is selected on its dev objective, as W&P keep the best loss). Each
term's mean is logged per epoch; a NaN stops training naming the term, epoch and batch.

One run, two selection rules: a job can also save the run's final epoch (``final_epoch``), and a ``selection:
last`` model whose fields are otherwise those of a ``selection: best`` model is read off that file
(:func:`read_off_final_epoch`) instead of being trained again. Training is deterministic and choosing the epoch
draws no random numbers, so the result is the model a separate run would give (J&W Table 2's τ under both rules).
"""

from __future__ import annotations

import copy
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
from attnaudit.adam import Adam
from attnaudit.data import Encoded, encode_split, iterate_batches, load_examples
from attnaudit.io import load_npy, load_torch, write_json, write_parquet
from attnaudit.masks import marker_ids
from attnaudit.models import (
    AttentionClassifier,
    ModelConfig,
    attach_saved_guides,
    load_model,
    pick_device,
    save_model,
)
from attnaudit.models.config import config_fields
from attnaudit.models.qa import build_qa_model
from attnaudit.modelsheet import REGULARISER_DEFAULTS, SELECTION_FIELDS, TRAINING_DEFAULTS
from attnaudit.objectives import TrainingContext, terms_for
from attnaudit.specials import SPECIALS
from attnaudit.train.teachers import attach_guides, attach_teacher

log = logging.getLogger(__name__)

#: every training field's default (J&W's Appendix A); kept with the model sheet, which the workflow reads without torch
DEFAULTS = TRAINING_DEFAULTS
#: fields a model-sheet entry may add to :data:`DEFAULTS`: its name, teachers, its objective's weights, QA's decoder
SHEET_FIELDS = (
    "variant",
    "guide",
    "teacher",
    "lambda",
    "divergence",
    "delta",
    "eta",
    "mlm_probability",
    "decoder_hidden",
)


def full_spec(spec: dict) -> dict:
    """``spec`` with :data:`DEFAULTS` and its regulariser's defaults (T&Š's MLM: frozen embeddings) filled in, as the
    model sheet fills them, so a hand-written ``train --spec`` trains the model a sheet entry would."""
    return {**DEFAULTS, **REGULARISER_DEFAULTS.get(spec.get("regulariser"), {}), **spec}


def check_spec_keys(spec: dict) -> None:
    """``train --spec`` is also written by hand (the workflow's schema checks the config): an unknown key would be
    ignored silently, so it is rejected by name with the keys that exist."""
    unknown = sorted(set(spec) - set(DEFAULTS) - set(SHEET_FIELDS))
    if unknown:
        raise AttnauditError(
            f"train --spec: unknown key {unknown[0]!r}; expected some of {', '.join([*DEFAULTS, *SHEET_FIELDS])}"
        )


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


def undefined_selection_score(metric: str, epoch: int, labels: np.ndarray, num_classes: int) -> AttnauditError:
    """The dev score that selects the epoch is NaN (ROC-AUC of a dev split without every class): no epoch could
    ever be selected, so training stops after its first epoch instead of failing after the last."""
    present = len(np.unique(labels))
    return AttnauditError(
        f"train.selection_metric: dev {metric} is undefined (NaN) after epoch {epoch}; the dev split has "
        f"{present} of the {num_classes} classes, and one-vs-rest ROC-AUC needs every class. Select on "
        "macro_f1 or accuracy (J&W's QA models select on accuracy)"
    )


@torch.no_grad()
def predict(
    model: AttentionClassifier, data: Encoded, batch_size: int, device, max_tokens: int | None = None
) -> tuple[np.ndarray, list]:
    """Probabilities [N, C] and attention (a list of length-T arrays), in the order of ``data``."""
    model.eval()
    probs = np.zeros((len(data), model.cfg.num_classes), dtype=np.float64)
    attention: list = [None] * len(data)
    for rows, batch in iterate_batches(data, batch_size, max_tokens=max_tokens):
        out = model(batch.to(device))
        probs[rows] = out.probs.double().cpu().numpy()
        alpha = out.attention.cpu().numpy()
        for row, a, n in zip(rows, alpha, batch.lengths.tolist()):
            attention[row] = a[:n].astype(np.float32)
    return probs, attention


def build_model(spec: dict, vocab: dict[str, int], num_classes: int, matrix: torch.Tensor) -> AttentionClassifier:
    hidden_mode = spec["regulariser"] if spec["regulariser"] in ("concat", "residual") else "plain"
    cfg = ModelConfig(**config_fields(spec, vocab, num_classes, matrix.shape[1]), hidden_mode=hidden_mode)
    return AttentionClassifier(cfg, matrix)


def adam(model, spec: dict) -> Adam:
    """J&W's optimiser as their App. A.1 states it, "the Adam Optimizer with default parameters in PyTorch" and ℓ2
    regularisation (``weight_decay``) "applied to all parameters", as one fused kernel over all parameters: the dense
    update of the embedding matrix (4M parameters on SST) costs more than the BiLSTM's backward pass with the
    per-tensor loop. J&W's and W&P's classification code differs from the paper in two ways a model may take:
    AMSGrad (``amsgrad: true``) and no decay on the attention's parameters (``attention_weight_decay: 0``).
    ``torch.optim.Adam``'s update without its import of ``torch._dynamo`` (:mod:`attnaudit.adam`)."""
    trained = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    decay, attention_decay = spec["weight_decay"], spec["attention_weight_decay"]
    groups: list = [p for _, p in trained]
    if attention_decay is not None and attention_decay != decay:
        attention = [p for name, p in trained if name.startswith("attention.")]
        rest = [p for name, p in trained if not name.startswith("attention.")]
        groups = [{"params": rest}, {"params": attention, "weight_decay": attention_decay}]
        groups = [group for group in groups if group["params"]]
    return Adam(groups, lr=spec["lr"], weight_decay=decay, amsgrad=spec["amsgrad"], fused=True)


def epoch_losses(
    model,
    data: Encoded,
    terms,
    batch_size: int,
    device,
    *,
    optimizer=None,
    clip=None,
    seed=0,
    epoch=0,
    progress=False,
    max_tokens: int | None = None,
) -> dict[str, float]:
    """One pass over ``data``: a training epoch when an ``optimizer`` is given (shuffled, seeded), else an
    evaluation of the objective (dev loss). Returns the mean of every term and of their sum (``loss``)."""
    training = optimizer is not None
    model.train(training)
    sums = dict.fromkeys([t.name for t in terms], 0.0)
    total, batches = 0.0, 0
    stream = iterate_batches(data, batch_size, shuffle=training, seed=seed * 1000 + epoch, max_tokens=max_tokens)
    n_batches = -(-len(data) // batch_size)
    label = f"epoch {epoch}" if training else "dev loss"
    with torch.set_grad_enabled(training):
        for index, (_, batch) in enumerate(
            tqdm(stream, total=n_batches, desc=label, disable=not progress, mininterval=5)
        ):
            batch = batch.to(device)
            out = model(batch)
            values = {term.name: term.loss(model, batch, out) for term in terms}
            for name, value in values.items():
                if not torch.isfinite(value):
                    raise AttnauditError(
                        f"training diverged: the {name} loss is {value.item()} at epoch {epoch}, "
                        f"batch {index}; lower the learning rate or the term's weight, or check "
                        "the embeddings"
                    )
            loss = sum(values.values())
            if training:
                optimizer.zero_grad()
                loss.backward()
                if clip:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
                optimizer.step()
            total += loss.item()
            for name, value in values.items():
                sums[name] += value.item()
            batches += 1
    means = {name: value / max(batches, 1) for name, value in sums.items()}
    return {"loss": total / max(batches, 1), **means}


def train_model(
    dataset_dir: str,
    embeddings: str,
    spec: dict,
    threads: int = 1,
    progress: bool = True,
    guide_predictions: str | None = None,
    teacher_predictions: str | None = None,
    final_epoch: str | None = None,
) -> tuple[AttentionClassifier, dict, pd.DataFrame]:
    """Train one model and evaluate it on every split; with ``final_epoch``, also save the run's final epoch
    there (with its spec and history) for a ``selection: last`` model to be read off."""
    spec = full_spec(spec)
    started = time.time()
    torch.set_num_threads(max(1, threads))
    seed_everything(spec["seed"])
    device = pick_device()
    examples, vocab = load_examples(dataset_dir)
    splits = {s: encode_split(examples, vocab, s) for s in ("train", "dev", "test")}
    for name, data in splits.items():
        if len(data) == 0:
            raise AttnauditError(f"{dataset_dir}/examples.parquet has no '{name}' examples")
    guides = None
    if spec["attention"] == "guided":
        if not guide_predictions:
            raise AttnauditError(f"variant {spec.get('variant')!r}: guided attention needs the guide's predictions")
        guides = attach_guides(splits, guide_predictions)
    if spec["objective"] == "imitate":
        if not teacher_predictions:
            raise AttnauditError(
                f"variant {spec.get('variant')!r}: the imitate objective needs the teacher's predictions"
            )
        attach_teacher(splits, teacher_predictions)
    num_classes = int(examples["label"].max()) + 1
    matrix = torch.from_numpy(load_npy(embeddings))
    if "query_tokens" in examples.columns:  # QA/NLI: query-conditioned attention (J&W §3, attnaudit.models.qa)
        model = build_qa_model(spec, vocab, num_classes, matrix, examples).to(device)
    else:
        model = build_model(spec, vocab, num_classes, matrix).to(device)
    if spec["freeze_embeddings"]:
        model.embedding.weight.requires_grad_(False)
    optimizer = adam(model, spec)
    weight = None
    if spec["class_weighting"]:
        counts = np.bincount(splits["train"].labels, minlength=num_classes).astype(np.float64)
        weight = torch.tensor(counts.sum() / (num_classes * np.maximum(counts, 1)), dtype=torch.float32, device=device)
    context = TrainingContext(
        num_classes=num_classes,
        vocab_size=len(vocab),
        marker_ids=marker_ids(vocab),
        pad_index=model.cfg.pad_index,
        first_word_index=len(SPECIALS),
        class_weight=weight,
        seed=spec["seed"],
    )
    terms = terms_for(spec, context)
    on_loss = spec["objective"] == "imitate"  # W&P §4 keep the model with the best imitation loss

    history, best_score, best_state, best_epoch = [], -np.inf, None, None
    for epoch in range(spec["epochs"]):
        train_losses = epoch_losses(
            model,
            splits["train"],
            terms,
            spec["batch_size"],
            device,
            optimizer=optimizer,
            clip=spec["clip"],
            seed=spec["seed"],
            epoch=epoch,
            progress=progress,
            max_tokens=spec["max_batch_tokens"],
        )
        dev_probs, _ = predict(model, splits["dev"], spec["eval_batch_size"], device, spec["max_batch_tokens"])
        dev = classification_metrics(splits["dev"].labels, dev_probs)
        record = {"epoch": epoch, "train_loss": train_losses.pop("loss")}
        if len(terms) > 1 or on_loss:
            record.update({f"train_loss_{name}": value for name, value in train_losses.items()})
        record.update({f"dev_{k}": v for k, v in dev.items() if k != "per_class_f1"})
        if on_loss:
            record["dev_loss"] = epoch_losses(
                model, splits["dev"], terms, spec["eval_batch_size"], device, max_tokens=spec["max_batch_tokens"]
            )["loss"]
        history.append(record)
        log.info("epoch %d: %s", epoch, ", ".join(f"{k} {v:.4f}" for k, v in record.items() if k != "epoch"))
        score = -record["dev_loss"] if on_loss else dev[spec["selection_metric"]]
        if np.isnan(score) and spec["selection"] == "best":
            raise undefined_selection_score(spec["selection_metric"], epoch, splits["dev"].labels, dev_probs.shape[1])
        if spec["selection"] == "last" or score > best_score:
            best_score, best_epoch = score, epoch
            best_state = copy.deepcopy(model.state_dict())
        if spec["patience"] and spec["selection"] == "best" and epoch - best_epoch >= spec["patience"]:
            log.info("no better dev score for %d epochs: stopping after epoch %d", spec["patience"], epoch)
            break
    model.guides = guides
    if final_epoch:
        save_model(final_epoch, model, {"spec": spec, "history": history})
    model.load_state_dict(best_state)
    metrics: dict = {"model": spec, "selected_epoch": best_epoch, "history": history}
    predictions = evaluate_splits(model, splits, spec, device, metrics)
    metrics["provenance"] = provenance(device, threads, spec["seed"], time.time() - started)
    return model, metrics, predictions


def evaluate_splits(model, splits: dict[str, Encoded], spec: dict, device, metrics: dict) -> pd.DataFrame:
    """Predictions and attention on every split (one frame); dev and test metrics go into ``metrics``."""
    model.eval()
    frames = []
    for name, data in splits.items():
        probs, attention = predict(model, data, spec["eval_batch_size"], device, spec["max_batch_tokens"])
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
    return pd.concat(frames, ignore_index=True)


def read_off_final_epoch(
    dataset_dir: str, final_epoch: str, spec: dict, threads: int = 1
) -> tuple[AttentionClassifier, dict, pd.DataFrame]:
    """The ``selection: last`` model of a run another job trained and saved (``train_model(final_epoch=…)``):
    its final epoch, evaluated like a trained model. The run's fields must be this model's but for
    :data:`SELECTION_FIELDS`, and the run must have gone through every epoch."""
    spec = full_spec(spec)
    started = time.time()
    torch.set_num_threads(max(1, threads))
    device = pick_device()
    payload = load_torch(final_epoch, map_location="cpu")
    # a run saved before a training field existed trained with that field's default
    run_spec, history = full_spec(payload["spec"]), payload["history"]
    differing = sorted(
        key for key in {*spec, *run_spec} if key not in SELECTION_FIELDS and spec.get(key) != run_spec.get(key)
    )
    if spec["selection"] != "last" or differing or len(history) != spec["epochs"]:
        raise AttnauditError(
            f"{final_epoch} is not this model's training run: it is variant {run_spec.get('variant')!r} "
            f"({len(history)} of {run_spec.get('epochs')} epochs), this is {spec.get('variant')!r} with selection "
            f"{spec['selection']!r}" + (f"; they differ in {', '.join(differing)}" if differing else "")
        )
    model = load_model(final_epoch, device)
    examples, vocab = load_examples(dataset_dir)
    splits = {s: encode_split(examples, vocab, s) for s in ("train", "dev", "test")}
    for data in splits.values():
        attach_saved_guides(model, data, final_epoch)
    metrics: dict = {
        "model": spec,
        "selected_epoch": len(history) - 1,
        "history": history,
        "final_epoch_of": f"{run_spec['variant']}-s{run_spec['seed']}",
    }
    predictions = evaluate_splits(model, splits, spec, device, metrics)
    metrics["provenance"] = provenance(device, threads, spec["seed"], time.time() - started)
    return model, metrics, predictions


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


def run(
    dataset_dir: str,
    embeddings: str | None,
    out_dir: str,
    spec: dict,
    threads: int,
    guide_predictions=None,
    teacher_predictions=None,
    final_epoch: str | None = None,
    from_final_epoch: str | None = None,
) -> dict:
    """Train (or, ``from_final_epoch``, read off another job's run) and write model.pt, predictions, metrics."""
    check_spec_keys(spec)
    if from_final_epoch:
        model, metrics, predictions = read_off_final_epoch(dataset_dir, from_final_epoch, spec, threads)
    elif not embeddings:
        raise AttnauditError("train: give --embeddings (the matrix.npy of the dataset), or --from-final-epoch")
    else:
        model, metrics, predictions = train_model(
            dataset_dir,
            embeddings,
            spec,
            threads,
            guide_predictions=guide_predictions,
            teacher_predictions=teacher_predictions,
            final_epoch=final_epoch,
        )
    out = Path(out_dir)
    save_model(out / "model.pt", model, {"spec": full_spec(spec)})
    write_parquet(out / "predictions.parquet", predictions)
    write_json(out / "metrics.json", metrics)
    log.info("test: %s", {k: v for k, v in metrics["test"].items() if k != "per_class_f1"})
    return metrics
