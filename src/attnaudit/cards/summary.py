"""The summary file each audit stage contributes to a model's card, and the helpers stages build it with.

A summary is one small JSON per (stage, dataset, model): ``{stage, title, citation, dataset, model, numbers,
checks, missing}``. ``numbers`` are ``{key, label, value, ci, unit, citation, headline, digits}`` (``ci`` a
``[low, high]`` bootstrap interval or null; ``headline`` numbers go to the explorer's index); ``checks`` are
``{key, text, rule, passed, citation}`` where ``passed`` is True (evidence that attention explains the
prediction), False (evidence against) or None (undetermined), computed by the stage from its own numbers with the
stated ``rule``. The card assembles summaries without knowing which stage wrote them (see
:mod:`attnaudit.cards.card`).
"""

from __future__ import annotations

import importlib
import math
from pathlib import Path

import numpy as np

from attnaudit.io import write_json

DEFAULTS = {
    "bootstrap_samples": 1000,
    "confidence": 0.95,
    "seed": 0,
    "majority": 0.5,
    "delta_median": 0.05,
    "eps_max_jsd": 0.5,
    "seed_spread": 2.0,
    "fragility_points": 1.0,
    "fragility_f1": "positive",
    "split": "test",
}


def stage_card(stage: str):
    """The stage's own card module, ``attnaudit.<stage>.card``."""
    return importlib.import_module(f"attnaudit.{stage}.card")


def stage_options(stage: str, options: dict | None) -> dict:
    """The ``cards.*`` options ``stage``'s summary reads (its card module's ``OPTIONS``), defaults filled in. Only
    these are the parameters of its summary jobs, so a threshold another stage reads reruns none of them; and reading
    an option the module does not declare fails (KeyError) instead of falling back to a default unseen."""
    unknown = set(options or {}) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"cards: unknown option(s) {sorted(unknown)}; expected some of {sorted(DEFAULTS)}")
    given = {**DEFAULTS, **(options or {})}
    return {key: given[key] for key in stage_card(stage).OPTIONS}


def bootstrap_ci(values, *, n_resamples: int, confidence: float, seed: int) -> tuple[float, float] | None:
    """Percentile bootstrap CI of the mean over instances (NaNs dropped); None with fewer than 2 values.

    ``scipy.stats.bootstrap`` with a seeded generator, so the interval is reproducible from config."""
    from scipy.stats import bootstrap

    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if len(x) < 2:
        return None
    if np.all(x == x[0]):
        return (float(x[0]), float(x[0]))
    res = bootstrap(
        (x,),
        np.mean,
        n_resamples=n_resamples,
        confidence_level=confidence,
        method="percentile",
        vectorized=True,
        random_state=np.random.default_rng(seed),
    )
    return (float(res.confidence_interval.low), float(res.confidence_interval.high))


def clean(value):
    """A JSON-safe float (NaN/inf → None)."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def number(key, label, value, *, ci=None, unit="", citation="", headline=False, digits=3) -> dict:
    """One measure; ``digits``: decimals shown (0 for ranks and counts)."""
    return {
        "digits": digits,
        "key": key,
        "label": label,
        "value": clean(value),
        "ci": [clean(ci[0]), clean(ci[1])] if ci is not None else None,
        "unit": unit,
        "citation": citation,
        "headline": bool(headline),
    }


def share(key, label, fraction, citation="") -> dict:
    """A headline share of instances, ``fraction`` in [0, 1], shown in % with one decimal."""
    return number(key, label, 100 * fraction, unit="%", digits=1, citation=citation, headline=True)


def level(confidence: float) -> str:
    """A confidence level as the cards write it: 0.95 → "95 %"."""
    return f"{100 * confidence:g} %"


def percent(fraction: float) -> str:
    """A share as a check's text shows it: one decimal, so 99.6 % does not read as 100 %."""
    return f"{100 * fraction:.1f} %"


def check(key, text, rule, passed, citation="") -> dict:
    return {
        "key": key,
        "text": text,
        "rule": rule,
        "passed": None if passed is None else bool(passed),
        "citation": citation,
    }


def make_summary(
    stage, title, citation, dataset, model, numbers, checks, missing=(), n_instances=None, confidence=None
) -> dict:
    """``confidence``: the level of the numbers' bootstrap CIs (``cards.confidence``), when any has one."""
    return {
        "stage": stage,
        "title": title,
        "citation": citation,
        "dataset": dataset,
        "model": model,
        "n_instances": n_instances,
        "confidence": confidence,
        "numbers": list(numbers),
        "checks": list(checks),
        "missing": list(missing),
    }


def existing(inputs: dict, key: str) -> str | None:
    """The path of input ``key`` if it is given and exists (an optional audit of a partial run), else None."""
    path = inputs.get(key)
    if isinstance(path, list):
        return path if path and all(Path(p).exists() for p in path) else None
    return path if path and Path(path).exists() else None


def run_summary(stage: str, inputs: dict, dataset: str, model: str, options: dict | None, out: str) -> dict:
    """Call ``attnaudit.<stage>.card.summary`` (the stage's own code) and write its summary JSON."""
    result = stage_card(stage).summary(inputs, dataset=dataset, model=model, options=stage_options(stage, options))
    write_json(out, result)
    return result
