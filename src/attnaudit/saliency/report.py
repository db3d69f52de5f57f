"""Tables and figures of the Bastings & Filippova (2020) audit from the gathered per-instance parquets.

Tables (``results/tables/bastings_filippova/``), one row per dataset × model × …:

* ``agreement.csv``: ``dataset, model, ranking, method_a, method_b, tau_mean, topk_overlap, n_overlap, tau_sd, k,
  n_instances`` — mean Kendall τ-b over the ``n_instances`` instances where it is defined, and mean top-k overlap
  over the ``n_overlap`` where it is (every instance with a candidate, those of at most k candidates included,
  whose overlap is 1 by construction).
* ``faithfulness.csv``: ``dataset, model, variant, ranking, method, signed, k, comprehensiveness, sufficiency,
  n_instances`` — k in % of the candidate tokens, plus ``k = aopc`` (per-instance mean over the k bins).
* ``cost.csv``: ``dataset, model, method, seconds_per_1000, n_instances, device, threads`` — wall-clock seconds
  of the method's ``attribute`` calls per 1,000 instances, measured during the audit run.
* ``ig_convergence.csv``: integrated gradients' completeness gap |Σ attributions − (f(x) − f(b))| per model.

``ranking`` says whether tokens were ranked by the signed score (B&F's saliency: evidence for the predicted
class) or its magnitude; unsigned methods (attention, gradient L2 = B&F's sensitivity, …) rank the same both ways.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from attnaudit.io import atomic_path, read_parquet

log = logging.getLogger(__name__)
CATEGORY = "Bastings & Filippova 2020"
# the columns of each table (a table without rows is still written with them, so that it reads as empty)
_RUN = ["dataset", "model"]
COLUMNS = {
    "agreement": [*_RUN, "ranking", "method_a", "method_b", "tau_mean", "topk_overlap", "n_overlap", "tau_sd"]
    + ["k", "n_instances"],
    "faithfulness": [*_RUN, "variant", "ranking", "method", "signed", "k"]
    + ["comprehensiveness", "sufficiency", "n_instances"],
    "cost": [*_RUN, "method", "seconds_per_1000", "n_instances", "device", "threads"],
    "ig_convergence": [*_RUN, "n_instances", "delta_abs_mean", "delta_abs_max", "n_flagged"],
}


def _write_csv(path, frame: pd.DataFrame) -> None:
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False, float_format="%.6g")


def agreement_table(frame: pd.DataFrame) -> pd.DataFrame:
    grouped = frame.groupby(["ranking", "method_a", "method_b"], sort=False)
    table = grouped.agg(
        tau_mean=("tau", "mean"),
        topk_overlap=("topk_overlap", "mean"),
        n_overlap=("topk_overlap", "count"),
        tau_sd=("tau", "std"),
        k=("k", "median"),
        n_instances=("tau", "count"),
    ).reset_index()
    return table


def faithfulness_table(frame: pd.DataFrame, signed: dict[str, bool]) -> pd.DataFrame:
    """Comprehensiveness and sufficiency per k and their AOPC; ``signed``: each method's importance files' ``signed``
    (B&F §3.1: saliency is signed, sensitivity is not), None for a method without them."""
    keys = ["variant", "ranking", "method"]
    per_k = (
        frame.groupby([*keys, "k"], sort=False)
        .agg(
            comprehensiveness=("comprehensiveness", "mean"),
            sufficiency=("sufficiency", "mean"),
            n_instances=("comprehensiveness", "count"),
        )
        .reset_index()
    )
    aopc = frame.groupby([*keys, "row"], sort=False)[["comprehensiveness", "sufficiency"]].mean().reset_index()
    aopc = (
        aopc.groupby(keys, sort=False)
        .agg(
            comprehensiveness=("comprehensiveness", "mean"),
            sufficiency=("sufficiency", "mean"),
            n_instances=("comprehensiveness", "count"),
        )
        .reset_index()
        .assign(k="aopc")
    )
    table = pd.concat([per_k, aopc], ignore_index=True)
    order = [pd.Categorical(table[key], categories=list(dict.fromkeys(table[key]))).codes for key in keys]
    table = table.iloc[np.lexsort(order[::-1]), :].reset_index(drop=True)  # grouped, in first-seen order
    table.insert(3, "signed", [signed.get(method) for method in table["method"]])
    return table


def cost_table(scores: pd.DataFrame) -> pd.DataFrame:
    grouped = scores.groupby("method", sort=False)
    table = grouped.agg(
        seconds=("seconds", "sum"),
        n_instances=("row", "nunique"),
        device=("device", "first"),
        threads=("threads", "first"),
    ).reset_index()
    table.insert(1, "seconds_per_1000", 1000 * table.pop("seconds") / table["n_instances"])
    return table


def ig_table(scores: pd.DataFrame) -> pd.DataFrame:
    ig = scores[scores["method"] == "integrated_gradients"]
    if ig.empty:
        return pd.DataFrame()
    delta = ig["delta"].abs()
    return pd.DataFrame(
        {
            "n_instances": [len(ig)],
            "delta_abs_mean": [delta.mean()],
            "delta_abs_max": [delta.max()],
            "n_flagged": [int(ig["flagged"].sum())],
        }
    )


def run_tables(runs: list[dict], out_dir: str) -> dict[str, pd.DataFrame]:
    """``runs``: [{dataset, model, agreement, faithfulness, importance: [paths]}] (gathered parquets). A table
    without rows (``ig_convergence`` when integrated gradients did not run) is written as its header row."""
    tables = {name: [] for name in COLUMNS}
    for run in runs:
        dataset, model = run["dataset"], run["model"]
        scores = pd.concat(
            [read_parquet(p).drop(columns=["scores", "id"]) for p in run["importance"]], ignore_index=True
        )
        parts = {
            "agreement": agreement_table(read_parquet(run["agreement"])),
            "faithfulness": faithfulness_table(
                read_parquet(run["faithfulness"]), dict(zip(scores["method"], scores["signed"].astype(bool)))
            ),
            "cost": cost_table(scores),
            "ig_convergence": ig_table(scores),
        }
        for name, table in parts.items():
            if not table.empty:
                table.insert(0, "model", model)
                table.insert(0, "dataset", dataset)
                tables[name].append(table)
    out = {}
    for name, frames in tables.items():
        frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS[name])
        _write_csv(Path(out_dir) / f"{name}.csv", frame)
        out[name] = frame
    aopc = out["faithfulness"]
    if not aopc.empty:
        aopc = aopc[aopc["k"] == "aopc"]
        for (dataset, model, variant, ranking), group in aopc.groupby(
            ["dataset", "model", "variant", "ranking"], sort=False
        ):
            best = group.sort_values("comprehensiveness", ascending=False)
            log.info(
                "%s/%s AOPC comprehensiveness (%s, %s ranking): %s",
                dataset,
                model,
                variant,
                ranking,
                ", ".join(f"{m} {c:.3f}" for m, c in zip(best["method"], best["comprehensiveness"])),
            )
    return out


# -- figures -----------------------------------------------------------------------------------------------------
def _style(method: str) -> dict:
    if method == "random":
        return {"color": "black", "linestyle": "--", "linewidth": 1.2}
    if method == "attention":
        return {"linewidth": 2.8}
    return {"linewidth": 1.4}


def agreement_heatmap(agreement: pd.DataFrame, out: str, ranking: str = "signed", title: str = "") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    table = agreement_table(agreement[agreement["ranking"] == ranking])
    methods = list(dict.fromkeys([*table["method_a"], *table["method_b"]]))
    side = 0.7 * len(methods)
    fig, axes = plt.subplots(1, 2, figsize=(2 * side + 4, side + 2.5))
    for ax, column, label in (
        (axes[0], "tau_mean", "mean Kendall τ-b"),
        (axes[1], "topk_overlap", f"mean top-{int(table['k'].median())} overlap"),
    ):
        matrix = pd.DataFrame(np.eye(len(methods)), index=methods, columns=methods)
        for row in table.itertuples():
            matrix.loc[row.method_a, row.method_b] = matrix.loc[row.method_b, row.method_a] = getattr(row, column)
        sns.heatmap(
            matrix,
            ax=ax,
            annot=True,
            fmt=".2f",
            cmap="vlag",
            vmin=-1 if column == "tau_mean" else 0,
            vmax=1,
            square=True,
            cbar=False,
            annot_kws={"size": 7},
        )
        ax.set_title(label)
    fig.suptitle(f"{title} ({ranking} ranking)")
    fig.tight_layout()
    with atomic_path(out) as tmp:
        fig.savefig(tmp, dpi=120, format=Path(out).suffix.lstrip(".") or "png")
    plt.close(fig)


def faithfulness_curves(faithfulness: pd.DataFrame, out: str, ranking: str = "signed", title: str = "") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frame = faithfulness[faithfulness["ranking"] == ranking]
    means = frame.groupby(["variant", "method", "fraction"])[["comprehensiveness", "sufficiency"]].mean().sort_index()
    variants = list(dict.fromkeys(frame["variant"]))
    methods = list(dict.fromkeys(frame["method"]))
    fig, axes = plt.subplots(len(variants), 2, figsize=(10, 3.6 * len(variants)), squeeze=False)
    for i, variant in enumerate(variants):
        for j, metric in enumerate(("comprehensiveness", "sufficiency")):
            ax = axes[i, j]
            for method in methods:
                curve = means.loc[(variant, method)][metric]
                ax.plot(
                    100 * curve.index.to_numpy(),
                    curve.to_numpy(),
                    marker="o",
                    markersize=3,
                    label=method,
                    **_style(method),
                )
            ax.set_xscale("log")
            ax.set_xlabel("k (% of tokens, log scale)")
            ax.set_ylabel("drop in p(predicted class)")
            ax.set_title(f"{metric} — {variant} ({'higher' if j == 0 else 'lower'} is more faithful)")
            ax.grid(alpha=0.3)
    axes[0, 1].legend(fontsize=7, loc="best")
    fig.suptitle(f"{title} ({ranking} ranking)")
    fig.tight_layout()
    with atomic_path(out) as tmp:
        fig.savefig(tmp, dpi=120, format=Path(out).suffix.lstrip(".") or "png")
    plt.close(fig)


def run_figures(
    agreement_path: str, faithfulness_path: str, heatmap: str, curves: str, ranking: str = "signed", title: str = ""
) -> None:
    agreement_heatmap(read_parquet(agreement_path), heatmap, ranking, title)
    faithfulness_curves(read_parquet(faithfulness_path), curves, ranking, title)
