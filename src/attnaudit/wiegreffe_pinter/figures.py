"""Figures of the W&P stage.

- :func:`seed_figures`: W&P Fig. 3 in J&W Fig. 8's plane: violins of the median-over-seeds attention JSD (x) per
  bin of the base model's max attention (y), hue = predicted class, beside J&W's ε-max adversary in the same axes;
  and the companion scatter of median JSD vs median TVD of the predictions.
- :func:`adversary_figure`: W&P §4, the consistently adversarial students per λ in the (JSD, TVD) plane, with the
  seed-variance and J&W post-hoc adversary reference points.
"""

from __future__ import annotations

import logging
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from attnaudit.io import read_parquet  # noqa: E402
from attnaudit.labels import label_names  # noqa: E402
from attnaudit.metrics import LN2  # noqa: E402
from attnaudit.plotting import attention_violins, class_groups, save_figure  # noqa: E402
from attnaudit.wiegreffe_pinter.options import resolve  # noqa: E402

log = logging.getLogger(__name__)

JSD_LABEL = "JSD to the base model's attention (nats, max ln 2)"


def attention_bins(values: pd.Series, edges: list[float]) -> pd.Series:
    """Bins [a, b) of max attention, the last one closed ([0.75, 1] by default); the edges run from 0 to 1
    (:func:`~attnaudit.wiegreffe_pinter.options.resolve`), so every value has its own bin."""
    labels = [
        f"[{a:.2f}, {b:.2f}{']' if i == len(edges) - 2 else ')'}" for i, (a, b) in enumerate(zip(edges[:-1], edges[1:]))
    ]
    clipped = values.clip(edges[0], np.nextafter(edges[-1], edges[0]))
    return pd.cut(clipped, edges, labels=labels, right=False, include_lowest=True)


def _violins(ax, data: pd.DataFrame, column: str, order: list[str], palette: dict[str, str]) -> None:
    data = data.dropna(subset=[column, "bin"])
    if data.empty:
        ax.text(0.5, 0.5, "no instances", ha="center", va="center", transform=ax.transAxes)
        return
    attention_violins(ax, data, column, "bin", order, palette)


def seed_figures(
    seed_variance: str | Path,
    out_violin: str | Path,
    out_scatter: str | Path,
    title: str,
    options: dict | None = None,
    manifest: str | Path | None = None,
) -> None:
    """W&P Fig. 3 (violins, seeds | adversary sharing both axes) and its companion scatter; ``manifest``: the
    corpus manifest, whose class names label the legends (:func:`~attnaudit.plotting.class_groups`)."""
    edges = resolve(options)["seeds"]["attention_bins"]
    frame = read_parquet(seed_variance)
    n_seeds = int(frame["n_seeds"].iat[0]) if len(frame) else 0
    frame["bin"] = attention_bins(frame["max_attention"], edges)
    frame["class"], palette = class_groups(frame["predicted_class"], label_names(manifest))
    order = list(frame["bin"].cat.categories[::-1])
    no_valid = int((frame["n_valid"] == 0).sum())

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharex=True, sharey=True, layout="constrained")
    _violins(axes[0], frame, "jsd_median", order, palette)
    axes[0].set_title(f"random seeds: median over {n_seeds} seeds (W&P Fig. 3)", fontsize=9)
    axes[0].set_xlabel(f"median {JSD_LABEL}")
    _violins(axes[1], frame, "eps_max_jsd", order, palette)
    axes[1].set_title(f"J&W ε-max adversary (post hoc; {no_valid} of {len(frame)} with no valid adversary)", fontsize=9)
    axes[1].set_xlabel(f"ε-max {JSD_LABEL}")
    for ax in axes:
        ax.set_xlim(0, LN2)
        ax.set_ylabel("base model's max attention\n(non-marker tokens, renormalised)")
    fig.suptitle(title)
    save_figure(fig, out_violin)

    fig, ax = plt.subplots(figsize=(5, 4), layout="constrained")
    data = frame.dropna(subset=["jsd_median", "tvd_mean"])
    if len(data):
        sns.scatterplot(  # W&P's seed_graphs.py: the median JSD against the mean TVD over seeds
            data=data,
            x="jsd_median",
            y="tvd_mean",
            hue="class",
            hue_order=list(palette),
            palette=palette,
            s=12,
            alpha=0.6,
            linewidth=0,
            ax=ax,
        )
        ax.get_legend().set_title("predicted class")
    ax.set_xlim(0, LN2)
    ax.set_ylim(0, 1)
    ax.set_xlabel(f"median {JSD_LABEL}")
    ax.set_ylabel("mean TVD to the base model's prediction")
    ax.set_title(f"{title}: {n_seeds} seeds", fontsize=9)
    save_figure(fig, out_scatter)


def adversary_figure(table: pd.DataFrame, references: dict, notes: list[str], out: str | Path, title: str) -> None:
    """Students per λ (W&P §4) as points in the (mean JSD, mean TVD) plane, labelled with λ and joined in λ
    order; the reference points of ``references`` (name → (jsd, tvd)); ``notes`` printed as the caption."""
    fig, ax = plt.subplots(figsize=(6, 4.5), layout="constrained")
    colours = plt.get_cmap("viridis")(np.linspace(0, 0.9, max(1, len(table))))
    ax.plot(table["jsd_mean"], table["tvd_mean"], color="grey", linewidth=0.8, zorder=1)
    ax.scatter(table["jsd_mean"], table["tvd_mean"], c=colours[: len(table)], s=40, zorder=2, label="students (λ)")
    for lam, x, y in zip(table["lambda"], table["jsd_mean"], table["tvd_mean"]):
        ax.annotate(f"λ={lam:g}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    markers = {"seed variance": ("*", "#1b9e77"), "J&W post-hoc adversary": ("X", "#d73027")}
    for name, (x, y) in references.items():
        marker, colour = markers.get(name, ("s", "black"))
        ax.scatter([x], [y], marker=marker, s=120, color=colour, zorder=3, label=name)
    ax.set_xlim(0, LN2 * 1.02)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("mean JSD to the teacher's attention (nats, max ln 2)")
    ax.set_ylabel("mean TVD to the teacher's predictions")
    ax.legend(fontsize=7, loc="best")
    ax.set_title(title, fontsize=10)
    if notes:
        fig.text(0.01, -0.02, "\n".join(notes), fontsize=7, va="top", ha="left")
    save_figure(fig, out)
