"""Beyond T&Š: do their regularisers also change what the other audits of the same models find?

Per dataset × regulariser × attention (mean over the seeds that have the output): the mean Kendall τ between
attention and leave-one-out (J&W §4.1, ``jw_correlation.parquet``, ``tau_attention_loo``), the mean ε-max JSD of
adversarial attention (J&W §4.2.2, ``jw_adversarial.parquet``, ``eps_max_jsd``), and attention's rank among the
importance methods by AOPC comprehensiveness (B&F / ERASER, ``saliency_faithfulness.parquet``; AOPC = mean over
the k fractions per instance, then over instances; signed ranking, deletion variant; rank 1 = most faithful),
beside T&Š's own measures of the same models (Pm. ΔF1, MI of MF words, per-token probability).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from attnaudit.io import read_parquet, write_text
from attnaudit.tutek_snajder.runs import load_json, parse_runs, reported_f1
from attnaudit.tutek_snajder.tables import _fmt, _sorted

log = logging.getLogger(__name__)

KEYS = ["dataset", "corpus", "attention", "layers", "regulariser", "variant"]  # seeds pooled per variant
MEASURES = {
    "tau_attention_loo": "mean τ(attention, LOO)",
    "eps_max_jsd": "mean ε-max JSD",
    "attention_aopc_rank": "attention's AOPC-comprehensiveness rank",
    "pm_delta_f1": "Pm. ΔF1 (points; F1 of Table 1)",
    "mi_mf": "MI, MF words (nats)",
    "token_prob": "per-token probability (correct)",
}


FAITHFULNESS_COLUMNS = ["id", "row", "method", "ranking", "variant", "comprehensiveness"]


def _parquet(path: str | None, columns: list[str]) -> pd.DataFrame | None:
    """The ``columns`` of a parquet that it has (None if there is no such output)."""
    if not path:
        return None
    if not Path(path).exists():
        log.warning("missing input %s", path)
        return None
    import pyarrow.parquet as pq

    present = set(pq.read_schema(path).names)
    return read_parquet(path, columns=[c for c in columns if c in present])


def aopc_ranks(frame: pd.DataFrame, ranking: str = "signed", variant: str = "deletion") -> pd.DataFrame:
    """AOPC comprehensiveness per method (mean over fractions per instance, then over instances) and its rank
    (1 = highest comprehensiveness = most faithful; ties share the best rank)."""
    rows = frame[(frame["ranking"] == ranking) & (frame["variant"] == variant)]
    instance = "id" if "id" in rows.columns else "row"
    per_instance = rows.groupby(["method", instance], sort=False)["comprehensiveness"].mean()
    aopc = per_instance.groupby("method").mean().rename("aopc").reset_index()
    aopc["rank"] = aopc["aopc"].rank(ascending=False, method="min").astype(int)
    return aopc.sort_values("rank").reset_index(drop=True)


def run_measures(run: dict, f1: str = "positive") -> dict:
    row = {k: run[k] for k in (*KEYS, "model", "seed")}
    correlation = _parquet(run["jw_correlation"], ["tau_attention_loo"])
    row["tau_attention_loo"] = correlation["tau_attention_loo"].mean() if correlation is not None else np.nan
    adversarial = _parquet(run["jw_adversarial"], ["eps_max_jsd"])
    row["eps_max_jsd"] = adversarial["eps_max_jsd"].mean() if adversarial is not None else np.nan
    faithfulness = _parquet(run["saliency_faithfulness"], FAITHFULNESS_COLUMNS)
    row["attention_aopc_rank"], row["attention_aopc"], row["n_methods"] = np.nan, np.nan, 0
    if faithfulness is not None:
        ranks = aopc_ranks(faithfulness)
        row["n_methods"] = len(ranks)
        found = ranks[ranks["method"] == "attention"]
        row["attention_aopc_rank"] = float(found["rank"].iloc[0]) if len(found) else np.nan
        row["attention_aopc"] = float(found["aopc"].iloc[0]) if len(found) else np.nan
    fragility = load_json(run["fragility"])
    row["pm_delta_f1"] = np.nan
    if fragility:
        row["pm_delta_f1"] = fragility["delta"][f"permutation_{reported_f1(fragility, f1)}_f1_mean"]
    mi = load_json(run["mutual_information"])
    row["mi_mf"] = (mi["samples"].get("MF", {}).get("mi") if mi else None) or np.nan
    tokens = _parquet(run["token_probability"], ["correct", "mean_token_prob"])
    row["token_prob"] = tokens.loc[tokens["correct"], "mean_token_prob"].mean() if tokens is not None else np.nan
    return row


def summary_table(runs: list[dict], f1: str = "positive") -> pd.DataFrame:
    """The measures of every run, averaged over seeds per regulariser × attention; Pm. ΔF1 in Table 1's F1
    (``tutek_snajder.tables.f1``)."""
    per_run = pd.DataFrame([run_measures(r, f1) for r in runs])
    if per_run.empty:
        return pd.DataFrame(columns=[*KEYS, "n_runs"])
    columns = [*MEASURES, "n_methods"]
    per_run[columns] = per_run[columns].astype(float)
    agg = {"n_runs": ("model", "count")}
    for column in MEASURES:
        agg[column] = (column, "mean")
        agg[f"{column}_n"] = (column, "count")
    agg["n_methods"] = ("n_methods", "max")
    return _sorted(per_run.groupby(KEYS, sort=False).agg(**agg).reset_index())


def summary_markdown(table: pd.DataFrame) -> str:
    lines = [
        "# Beyond Tutek & Šnajder: the other audits of the same models, by variant",
        "",
        "Means over the runs (seeds) of each variant that have each output (count in brackets). "
        "τ(attention, LOO): J&W §4.1; ε-max JSD: J&W §4.2.2 (higher = easier adversaries); "
        "AOPC rank: attention among the B&F importance methods by ERASER comprehensiveness (signed ranking, "
        "deletion; 1 = most faithful, of n methods). "
        "If a regulariser makes attention more faithful, τ should rise, ε-max JSD fall and attention's rank improve.",
        "",
        "| dataset | att. | layers | regulariser | variant | runs | " + " | ".join(MEASURES.values()) + " |",
        "|" + "---|" * (6 + len(MEASURES)),
    ]
    digits = {"tau_attention_loo": 3, "eps_max_jsd": 3, "attention_aopc_rank": 1, "pm_delta_f1": 1}
    for r in table.to_dict("records"):
        cells = []
        for column in MEASURES:
            value = _fmt(r[column], digits.get(column, 3))
            if column == "attention_aopc_rank" and not pd.isna(r[column]):
                value += f" of {int(r['n_methods'])}"
            cells.append(f"{value} ({int(r[f'{column}_n'])})")
        lines.append(
            f"| {r['dataset']} | {r['attention']} | {r['layers']} | {r['regulariser']} | {r['variant']} | "
            f"{r['n_runs']} | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines) + "\n"


def write_summary(runs, out_csv: str | Path, out_md: str | Path, f1: str = "positive") -> pd.DataFrame:
    table = summary_table(parse_runs(runs), f1)
    write_text(out_csv, table.to_csv(index=False, float_format="%.6g"))
    write_text(out_md, summary_markdown(table))
    log.info("T&Š summary of %d variants → %s, %s", len(table), out_csv, out_md)
    return table
