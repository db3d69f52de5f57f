"""The consistently adversarial model, evaluated (W&P §4): a student trained (elsewhere) to imitate the teacher's
predictions while its attention diverges from the teacher's, L = TVD(ŷ_s, ŷ_t) − λ·D(α_s, α_t) (W&P §4 and W&P's
code: D = KL, reported as JSD; T&Š §3.3 Eq. 6: D = JSD; the variant's ``divergence``). Here: on one split, the JSD
(nats) between student and teacher attention over the non-marker tokens (both renormalised there, as in
:mod:`attnaudit.wiegreffe_pinter.seeds`), the TVD of their predicted distributions, and both models' F1 against the
gold labels (macro and positive class; W&P report the positive class, which a task of more than two classes does not
have: null there)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
from sklearn.metrics import f1_score

from attnaudit.io import write_json
from attnaudit.wiegreffe_pinter.distances import attention_jsd, load_predictions, load_split, output_tvd

log = logging.getLogger(__name__)

KEYS = (
    "dataset",
    "student",
    "teacher",
    "lambda",
    "split",
    "n",
    "jsd_mean",
    "jsd_median",
    "tvd_mean",
    "tvd_median",
    "student_macro_f1",
    "teacher_macro_f1",
    "student_pos_f1",  # null with more than two classes (no positive class)
    "teacher_pos_f1",
)


def _f1(labels: np.ndarray, predicted: np.ndarray, n_classes: int) -> tuple[float, float | None]:
    """Macro F1 and F1 of class 1, the positive class of a binary task (None with more classes: there is none)."""
    macro = f1_score(labels, predicted, average="macro", zero_division=0)
    if n_classes != 2:
        return float(macro), None
    positive = f1_score(labels, predicted, labels=[1], average=None, zero_division=0)[0]
    return float(macro), float(positive)


def imitation_summary(
    student_predictions: str | Path,
    teacher_predictions: str | Path,
    dataset_dir: str | Path,
    *,
    split: str = "test",
    lam: float,
    student: str,
    teacher: str,
    dataset: str,
) -> dict:
    """The W&P §4 numbers of one student (the JSON schema is :data:`KEYS`). JSD statistics skip instances made
    only of markers (no non-marker token to compare)."""
    data = load_split(dataset_dir, split)
    teacher_p = load_predictions(teacher_predictions, data)
    student_p = load_predictions(student_predictions, data)
    divergence = attention_jsd([student_p], teacher_p, data)[0][0]
    distance = output_tvd([student_p], teacher_p)[0]
    n_classes = teacher_p.probs.shape[1]
    student_macro, student_pos = _f1(data.data.labels, student_p.predicted, n_classes)
    teacher_macro, teacher_pos = _f1(data.data.labels, teacher_p.predicted, n_classes)
    defined = divergence[~np.isnan(divergence)]
    summary = {
        "dataset": dataset,
        "student": student,
        "teacher": teacher,
        "lambda": float(lam),
        "split": split,
        "n": len(data.data),
        "jsd_mean": float(defined.mean()) if defined.size else float("nan"),
        "jsd_median": float(np.median(defined)) if defined.size else float("nan"),
        "tvd_mean": float(distance.mean()),
        "tvd_median": float(np.median(distance)),
        "student_macro_f1": student_macro,
        "teacher_macro_f1": teacher_macro,
        "student_pos_f1": student_pos,
        "teacher_pos_f1": teacher_pos,
    }
    assert tuple(summary) == KEYS
    return summary


def write_imitation(out: str | Path, *args, **kwargs) -> dict:
    summary = imitation_summary(*args, **kwargs)
    write_json(out, summary)
    log.info(
        "%s λ=%g vs %s: JSD %.3f, TVD %.3f, macro-F1 %.3f (teacher %.3f)",
        summary["student"],
        summary["lambda"],
        summary["teacher"],
        summary["jsd_mean"],
        summary["tvd_mean"],
        summary["student_macro_f1"],
        summary["teacher_macro_f1"],
    )
    return summary
