"""Bastings & Filippova (2020) part of a model's audit card: attention's rank among all importance methods by
ERASER AOPC comprehensiveness (higher = more faithful) and sufficiency (lower = more faithful) (B&F §3.3, §6;
DeYoung et al. 2020 §4), and on the planted corpus its precision@k against the planted tokens."""

from __future__ import annotations

import pandas as pd

from attnaudit.cards.summary import check, existing, make_summary, number
from attnaudit.io import read_parquet

TITLE = "Bastings & Filippova (2020): attention among input-saliency methods (ERASER faithfulness)"
# the cards.* options this summary reads (only they are its jobs' parameters: attnaudit.cards.summary.stage_options)
OPTIONS = ("split",)


def aopc(frame: pd.DataFrame) -> pd.DataFrame:
    """AOPC per method: mean over the k bins per instance, then over instances (signed ranking if present,
    deletion variant if present), as the B&F faithfulness table computes it."""
    for column, preferred in (("ranking", "signed"), ("variant", "deletion")):
        if preferred in set(frame[column]):
            frame = frame[frame[column] == preferred]
    per_row = frame.groupby(["method", "row"])[["comprehensiveness", "sufficiency"]].mean()
    return per_row.groupby("method").mean()


def rank_of(values: pd.Series, method: str, ascending: bool) -> tuple[int, int]:
    ranks = values.dropna().rank(ascending=ascending, method="min")
    return int(ranks[method]), len(ranks)


def rank_check(key, what, rank, n, citation):
    half = n / 2
    return check(
        key,
        f"attention ranks {rank}/{n} by {what}",
        f"pass if attention ranks in the better half (rank ≤ {half:g} of {n})",
        rank <= half,
        citation,
    )


def planted_precision(importance: list[str], examples: str, split: str) -> pd.Series | None:
    """Mean precision@n_planted per method (R-precision against the planted positions), or None if the dataset
    has no planted ground truth."""
    from pathlib import Path

    from attnaudit.importance._stage import read_scores
    from attnaudit.saliency.agreement import candidates_of_split
    from attnaudit.saliency.planted import planted_positions, precision_frame
    from attnaudit.saliency.ranking import scores_by_row

    if "important" not in read_parquet(examples, columns=None).columns:
        return None
    dataset_dir = str(Path(examples).parent)
    frame = read_scores(importance)
    methods = list(dict.fromkeys(frame["method"]))
    table = scores_by_row(frame, methods)
    per = precision_frame(
        table, planted_positions(dataset_dir, split), candidates_of_split(dataset_dir, split), methods, ks=()
    )
    per = per[(per["k"] == "n_planted") & (per["ranking"] == per["ranking"].iloc[0])]
    return per.groupby("method")["precision_at_k"].mean()


def summary(inputs: dict, *, dataset: str, model: str, options: dict) -> dict:
    """``inputs``: ``faithfulness`` (saliency_faithfulness.parquet); optional ``importance`` (list of parquets)
    and ``examples`` for the planted precision on ``options["split"]``."""
    numbers, checks, missing, n = [], [], [], None
    if path := existing(inputs, "faithfulness"):
        frame = read_parquet(path)
        n = int(frame["row"].nunique())
        table = aopc(frame)
        if "attention" in table.index:
            rc, nc = rank_of(table["comprehensiveness"], "attention", ascending=False)
            rs, ns = rank_of(table["sufficiency"], "attention", ascending=True)
            numbers += [
                number(
                    "aopc_comprehensiveness",
                    "attention's AOPC comprehensiveness",
                    table.loc["attention", "comprehensiveness"],
                    citation="B&F §3.3; DeYoung et al. §4",
                ),
                number(
                    "comprehensiveness_rank",
                    f"attention's rank by comprehensiveness (of {nc})",
                    rc,
                    digits=0,
                    citation="B&F §3.3",
                    headline=True,
                ),
                number(
                    "aopc_sufficiency",
                    "attention's AOPC sufficiency",
                    table.loc["attention", "sufficiency"],
                    citation="B&F §3.3; DeYoung et al. §4",
                ),
                number(
                    "sufficiency_rank",
                    f"attention's rank by sufficiency (of {ns})",
                    rs,
                    digits=0,
                    citation="B&F §3.3",
                    headline=True,
                ),
            ]
            checks += [
                rank_check("bf_comprehensiveness", "AOPC comprehensiveness", rc, nc, "B&F §3.3"),
                rank_check("bf_sufficiency", "AOPC sufficiency", rs, ns, "B&F §3.3"),
            ]
        else:
            missing.append("attention in the faithfulness audit")
    else:
        missing.append("faithfulness")
    if (importance := existing(inputs, "importance")) and (examples := existing(inputs, "examples")):
        precision = planted_precision(importance, examples, options["split"])
        if precision is not None and "attention" in precision.index:
            rank, total = rank_of(precision, "attention", ascending=False)
            numbers += [
                number(
                    "planted_precision",
                    "attention's precision@k (k = planted tokens)",
                    precision["attention"],
                    citation="planted ground truth",
                    headline=True,
                ),
                number(
                    "planted_rank",
                    f"attention's rank by planted precision (of {total})",
                    rank,
                    digits=0,
                    citation="planted ground truth",
                ),
            ]
            checks.append(
                rank_check("planted_precision", "precision@k of the planted tokens", rank, total, "planted corpus")
            )
    return make_summary(
        "saliency", TITLE, "Bastings & Filippova (2020) §3.3, §6", dataset, model, numbers, checks, missing, n
    )
