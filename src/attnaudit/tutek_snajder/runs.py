"""Run records of the T&Š tables, figures and summary: one per trained model, naming its variant and the paths of
its audit outputs (any of them may be null: the table cell or figure panel then says it is missing)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from attnaudit import AttnauditError
from attnaudit.io import json_arg, read_json
from attnaudit.modelsheet import parse_model_id

log = logging.getLogger(__name__)

PATH_KEYS = (
    "fragility",
    "mutual_information",
    "token_probability",
    "dataset_dir",
    "jw_correlation",
    "jw_adversarial",
    "saliency_faithfulness",
)
REGULARISER_ORDER = {"base": 0, "concat": 1, "residual": 2, "tying": 3, "mlm": 4}
ATTENTION_ORDER = {"additive": 0, "dot": 1}


def parse_runs(text: str | list | None) -> list[dict]:
    """Run records from a JSON list, inline or ``@file``; missing fields are filled (corpus = dataset, layers 1,
    regulariser base, attention additive, seed from the model id)."""
    if text is None:
        return []
    try:
        raw = text if isinstance(text, list) else json_arg(text)
    except (OSError, json.JSONDecodeError) as err:
        raise AttnauditError(f"--runs: not a JSON list or @file of one ({err})") from err
    if not isinstance(raw, list):
        raise AttnauditError("--runs must be a JSON list of run records")
    return [_normalise(r, i) for i, r in enumerate(raw)]


def _normalise(record: dict, index: int) -> dict:
    if not isinstance(record, dict) or "dataset" not in record or "model" not in record:
        raise AttnauditError(f"--runs[{index}] needs at least 'dataset' and 'model'")
    seed = record.get("seed")
    if seed is None:  # the rules always give it; hand-made records may name a standard model id instead
        try:
            seed = parse_model_id(record["model"])["seed"]
        except AttnauditError:
            seed = 0
    run = {
        "dataset": record["dataset"],
        "corpus": record.get("corpus") or record["dataset"],
        "model": record["model"],
        "variant": _variant(record["model"]),
        "regulariser": record.get("regulariser") or "base",
        "attention": record.get("attention") or "additive",
        "layers": int(record.get("layers") or 1),
        "seed": int(seed),
    }
    for key in PATH_KEYS:
        run[key] = record.get(key) or None
    return run


def _variant(model: str) -> str:
    """The model's variant (its id without the seed): seeds are pooled within a variant, never across variants
    that share a regulariser (tying10 and tying20 are two rows)."""
    try:
        return parse_model_id(model)["variant"]
    except AttnauditError:
        return model


def load_json(path: str | None) -> dict | None:
    """A JSON result, or None (logged) when the run has no such output or the file is missing."""
    if not path:
        return None
    if not Path(path).exists():
        log.warning("missing input %s (the table/figure marks it missing)", path)
        return None
    return read_json(path)


def reported_f1(result: dict, f1: str = "positive") -> str:
    """The F1 T&Š Table 1 reports for a fragility result under ``tutek_snajder.tables.f1``: with ``positive`` (T&Š's
    choice) class 1's F1 of a binary task, or ``macro`` where there is no positive class (more than two classes);
    with ``macro`` macro-F1. The table, the card and the summary all use it."""
    return "positive" if f1 == "positive" and result["trained"].get("positive_f1") is not None else "macro"


def sort_key(regulariser: str, attention: str = "additive") -> tuple[int, int, str, str]:
    return (REGULARISER_ORDER.get(regulariser, 9), ATTENTION_ORDER.get(attention, 9), regulariser, attention)
