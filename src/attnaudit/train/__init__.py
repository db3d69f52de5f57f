"""Train stage: one model of the model sheet per job (:mod:`.training`; teachers' outputs: :mod:`.teachers`)."""

from __future__ import annotations

import json

from attnaudit.train.training import DEFAULTS, classification_metrics, predict, read_off_final_epoch, run, train_model

__all__ = ["DEFAULTS", "add_cli", "classification_metrics", "predict", "read_off_final_epoch", "run", "train_model"]


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("train", help="train one model variant of the model sheet")
    p.add_argument("--dataset-dir", required=True)
    p.add_argument("--embeddings", help="matrix.npy aligned to vocab.json (to train)")
    p.add_argument("--out-dir", required=True)
    p.add_argument("--spec", default="{}", help="JSON: the variant's fields (encoder, attention, seed, epochs, ...)")
    p.add_argument("--guide-predictions", help="predictions.parquet of the guide (attention: guided)")
    p.add_argument("--teacher-predictions", help="predictions.parquet of the teacher (objective: imitate)")
    p.add_argument("--final-epoch", help="also save the run's final epoch here (for a selection: last model)")
    p.add_argument(
        "--from-final-epoch",
        help="do not train: read this selection: last model off another run's saved final epoch (--final-epoch)",
    )
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
            final_epoch=a.final_epoch,
            from_final_epoch=a.from_final_epoch,
        )
    )
