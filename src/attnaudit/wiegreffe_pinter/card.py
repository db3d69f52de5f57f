"""Wiegreffe & Pinter (2019) part of the audit cards. The base model's card: the uniform-attention twin against the
spread of the base model's seeds (§3.2, Table 2), and J&W's adversaries against the seed-variance baseline (§3.3,
Fig. 3). An imitating model's card (W&P §4, and T&Š §4.3's adversaries of their regularised models): how far its
attention is from its teacher's (JSD) and its predictions from the teacher's (TVD), and the F1 it gave up."""

from __future__ import annotations

import numpy as np

from attnaudit.cards.summary import check, existing, make_summary, number, percent, share
from attnaudit.io import read_json, read_parquet
from attnaudit.wiegreffe_pinter.tables import metrics_f1

TITLE = "Wiegreffe & Pinter (2019): uniform attention and seed variance as baselines"
# the cards.* options this summary reads (only they are its jobs' parameters: attnaudit.cards.summary.stage_options)
OPTIONS = ("seed_spread", "majority")
ADVERSARY_TITLE = "Wiegreffe & Pinter (2019): an adversary imitating {teacher}, λ = {lam:g}"


def table2_measure(paths: list[str]) -> tuple[str, np.ndarray]:
    """W&P Table 2's measure of each model, as the W&P tables (:func:`~attnaudit.wiegreffe_pinter.tables.metrics_f1`):
    positive-class F1 of a binary task, macro-F1 with more classes (no positive class); the name and the values."""
    scores = [metrics_f1(p) for p in paths]
    name = "positive-class F1" if all(s["f1_measure"] == "positive" for s in scores) else "macro-F1"
    return name, np.array([s["pos_f1" if name == "positive-class F1" else "macro_f1"] for s in scores], dtype=float)


def adversary_summary(path: str, *, dataset: str, model: str) -> dict:
    """W&P §4 of one imitating model (its ``wp_imitation.json``): the numbers of W&P's adversary table on its card.
    No check: how far an adversary gets says something of its teacher's attention, which the teacher's card judges
    (W&P §3.3, against the seed variance), not of the adversary's own."""
    imitation = read_json(path)
    cite = "W&P §4"
    numbers = [
        number("adversary_jsd_mean", "mean JSD of attention to the teacher's", imitation["jsd_mean"], citation=cite),
        number(
            "adversary_jsd_median", "median JSD of attention to the teacher's", imitation["jsd_median"], citation=cite
        ),
        number("adversary_tvd_mean", "mean TVD of predictions to the teacher's", imitation["tvd_mean"], citation=cite),
        number(
            "adversary_tvd_median", "median TVD of predictions to the teacher's", imitation["tvd_median"], citation=cite
        ),
        number(
            "adversary_delta_f1",
            f"test macro-F1 change from the teacher's {imitation['teacher_macro_f1']:.3f}",
            100 * (imitation["student_macro_f1"] - imitation["teacher_macro_f1"]),
            unit="points",
            digits=1,
            citation=cite,
        ),
    ]
    for headline in (numbers[0], numbers[2]):
        headline["headline"] = True
    title = ADVERSARY_TITLE.format(teacher=imitation["teacher"], lam=imitation["lambda"])
    return make_summary(
        "wiegreffe_pinter", title, "Wiegreffe & Pinter (2019) §4", dataset, model, numbers, [], [], imitation["n"]
    )


def summary(inputs: dict, *, dataset: str, model: str, options: dict) -> dict:
    """``inputs``: ``base_metrics`` (metrics.json of the base model and its other seeds), ``uniform_metrics``
    (the uniform twins), ``seed_variance`` (wp_seed_variance.parquet); or, for an imitating model, ``imitation``
    (its wp_imitation.json)."""
    if "imitation" in inputs:
        if path := existing(inputs, "imitation"):
            return adversary_summary(path, dataset=dataset, model=model)
        title = "Wiegreffe & Pinter (2019): an adversary imitating its teacher"
        return make_summary("wiegreffe_pinter", title, "W&P §4", dataset, model, [], [], ["imitation"])
    numbers, checks, missing, n = [], [], [], None
    base, uniform = existing(inputs, "base_metrics"), existing(inputs, "uniform_metrics")
    if base and uniform:
        (f1, b), (_, u) = table2_measure(base), table2_measure(uniform)  # one dataset: one measure
        std = float(b.std(ddof=1)) if len(b) > 1 else None
        gap = 100 * (b.mean() - u.mean())
        numbers += [
            number("base_f1", f"base {f1}, mean of {len(b)} seeds", b.mean(), citation="W&P §3.2, Table 2"),
            number(
                "uniform_f1",
                f"uniform-attention twin {f1} (mean of {len(u)})",
                u.mean(),
                citation="W&P §3.2, Table 2",
                headline=True,
            ),
            number("base_seed_std", f"base {f1}, sample std over seeds", std, citation="W&P §3.2"),
        ]
        bound = None if std is None else 100 * options["seed_spread"] * std
        checks.append(
            check(
                "wp_uniform",
                f"learned attention beats uniform by {gap:.1f} {f1} points"
                + (f" ({options['seed_spread']:g}× seed std: {bound:.1f})" if bound is not None else " (one seed)"),
                f"pass if the gap exceeds {options['seed_spread']:g}× the base seeds' sample std of {f1}"
                " (undetermined with one seed; W&P Table 2 asks the converse: is uniform within the base's spread)",
                None if bound is None else gap > bound,
                "W&P §3.2",
            )
        )
    else:
        missing.append("uniform-attention baseline")
    if path := existing(inputs, "seed_variance"):
        frame = read_parquet(path)
        n = len(frame)
        beyond = float(frame["beyond_every_seed"].mean())
        numbers += [
            number(
                "seed_jsd_median",
                "median JSD of seed attention to base (mean over instances)",
                frame["jsd_median"].mean(),
                citation="W&P §3.3, Fig. 3",
            ),
            share("beyond_every_seed", "instances whose adversary is beyond every seed", beyond, citation="W&P §3.3"),
        ]
        checks.append(
            check(
                "wp_seed_variance",
                f"adversaries beyond seed variance for {percent(beyond)} of instances",
                f"pass if that share is below {100 * options['majority']:.0f} %",
                beyond < options["majority"],
                "W&P §3.3",
            )
        )
    else:
        missing.append("seed variance")
    return make_summary(
        "wiegreffe_pinter", TITLE, "Wiegreffe & Pinter (2019) §3.2–3.3", dataset, model, numbers, checks, missing, n
    )
