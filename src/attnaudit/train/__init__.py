"""Train stage: one model of the model sheet per job (:mod:`.training`; teachers' outputs: :mod:`.teachers`)."""

from __future__ import annotations

import json

from attnaudit.train.training import DEFAULTS, classification_metrics, predict, run, train_model

__all__ = ["DEFAULTS", "add_cli", "classification_metrics", "predict", "run", "train_model"]


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("train", help="train one model variant of the model sheet")
    p.add_argument("--dataset-dir", required=True)
    p.add_argument("--embeddings", required=True, help="matrix.npy aligned to vocab.json")
    p.add_argument("--out-dir", required=True)
    p.add_argument("--spec", default="{}", help="JSON: the variant's fields (encoder, attention, seed, epochs, ...)")
    p.add_argument("--guide-predictions", help="predictions.parquet of the guide (attention: guided)")
    p.add_argument("--teacher-predictions", help="predictions.parquet of the teacher (objective: imitate)")
    p.add_argument("--threads", type=int, default=1)
    p.set_defaults(
        func=lambda a: run(
            a.dataset_dir,
            a.embeddings,
            a.out_dir,
            json.loads(a.spec),
            a.threads,
            guide_predictions=a.guide_predictions,
            teacher_predictions=a.teacher_predictions,
        )
    )
