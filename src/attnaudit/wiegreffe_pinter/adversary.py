"""The consistently adversarial model against the baselines (W&P §4): one row per student (λ) with its test F1,
mean JSD to the teacher's attention and mean TVD to its predictions, plus in the same plane the seed variance
(W&P §3.3: mean over instances and seeds of JSD and TVD) and J&W's post-hoc adversary (mean ε-max JSD over all
instances as the audit recorded it, mean TVD of the best valid adversary over instances that have one).
A reference input not given is left out of the figure, and the caption and the log say so."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from attnaudit import AttnauditError
from attnaudit.io import read_json, read_parquet, write_text
from attnaudit.wiegreffe_pinter.figures import adversary_figure
from attnaudit.wiegreffe_pinter.imitation import KEYS

log = logging.getLogger(__name__)


def imitation_rows(paths: list[str | Path]) -> pd.DataFrame:
    """The imitation JSONs (:data:`~attnaudit.wiegreffe_pinter.imitation.KEYS`) of one dataset and teacher, by λ."""
    rows = []
    for path in paths:
        row = read_json(path)
        if set(row) != set(KEYS):
            raise AttnauditError(f"{path}: expected the keys {', '.join(KEYS)}")
        rows.append(row)
    table = pd.DataFrame(rows, columns=list(KEYS))
    for key in ("dataset", "teacher", "split"):
        if table[key].nunique() > 1:
            raise AttnauditError(f"imitations: mixed {key}s {sorted(table[key].unique())}; one figure per {key}")
    return table.sort_values("lambda", kind="stable").reset_index(drop=True)


def references(seed_variance: str | Path | None, adversarial: str | Path | None) -> tuple[dict, list[str]]:
    """(name → (mean JSD, mean TVD)) of the reference points given, and a note per missing one."""
    points, notes = {}, []
    if seed_variance:
        frame = read_parquet(seed_variance, columns=["jsd_mean", "tvd_mean", "n_seeds"])
        points["seed variance"] = (frame["jsd_mean"].mean(), frame["tvd_mean"].mean())
        notes.append(f"seed variance: mean over instances and {int(frame['n_seeds'].iat[0])} seeds")
    else:
        notes.append("seed variance not given: its reference point is left out")
    if adversarial:
        frame = read_parquet(adversarial, columns=["eps_max_jsd", "best_tvd"])
        points["J&W post-hoc adversary"] = (frame["eps_max_jsd"].mean(), frame["best_tvd"].mean())
        notes.append("J&W adversary: mean ε-max JSD, mean TVD of the best valid adversary")
    else:
        notes.append("J&W adversarial audit not given: its reference point is left out")
    return points, notes


def write_adversary(
    imitations: list[str | Path],
    out_csv: str | Path,
    out_png: str | Path,
    *,
    seed_variance: str | Path | None = None,
    adversarial: str | Path | None = None,
    title: str | None = None,
) -> pd.DataFrame:
    table = imitation_rows(imitations)
    points, notes = references(seed_variance, adversarial)
    for name, prefix in (("seed variance", "seed"), ("J&W post-hoc adversary", "jw_adversary")):
        jsd, tvd = points.get(name, (float("nan"), float("nan")))
        table[f"{prefix}_jsd_mean"], table[f"{prefix}_tvd_mean"] = jsd, tvd
    table["beyond_seed_jsd"] = table["jsd_mean"] > table["seed_jsd_mean"]  # False when no seed reference
    for note in notes:
        log.info("%s", note)
    write_text(out_csv, table.to_csv(index=False, float_format="%.6g"))
    dataset, teacher = table["dataset"].iat[0], table["teacher"].iat[0]
    adversary_figure(
        table, points, notes, out_png, title or f"{dataset}: consistently adversarial students of {teacher}"
    )
    return table
