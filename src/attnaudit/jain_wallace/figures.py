"""Figures of the J&W audits for one dataset, one panel per model (J&W Figs. 2–8).

fig2_tau_gradient / fig2_tau_loo: histograms of per-instance τ by predicted class (Fig. 2);
fig3_permutation: median Δŷ under permutation vs max attention, violins by class (Fig. 3);
fig4_adversarial_jsd: histogram of ε-max JSD by class (Fig. 4); fig5_jsd_vs_max_attention (Fig. 5);
fig6_7_appendix_c: mean τ(gradient, LOO) − τ(attention, LOO) and − τ(attention, gradient) (App. C, Figs. 6–7);
fig8_average_vs_lstm: τ(attention, LOO) of the Average vs the BiLSTM encoder (App. C, Fig. 8).
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from attnaudit.io import read_parquet  # noqa: E402
from attnaudit.labels import label_names  # noqa: E402
from attnaudit.metrics import LN2  # noqa: E402
from attnaudit.plotting import attention_violins, class_groups, save_figure  # noqa: E402

log = logging.getLogger(__name__)

FIGURES = (
    "fig2_tau_gradient",
    "fig2_tau_loo",
    "fig3_permutation",
    "fig4_adversarial_jsd",
    "fig5_jsd_vs_max_attention",
    "fig6_7_appendix_c",
    "fig8_average_vs_lstm",
)
ATTENTION_BINS = (0.0, 0.25, 0.5, 0.75, 1.0)


def _panels(n: int, width: float = 4.0, height: float = 3.0):
    cols = min(3, max(1, n))
    rows = math.ceil(max(1, n) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False, layout="constrained")
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat)


def _histograms(
    frames: dict[str, pd.DataFrame], column: str, xlabel: str, title: str, bins, path: Path, names: list[str]
) -> None:
    fig, axes = _panels(len(frames))
    for ax, (model, frame) in zip(axes, frames.items()):
        groups, palette = class_groups(frame["predicted_class"], names)
        for group, colour in palette.items():
            values = frame.loc[groups == group, column].dropna()
            ax.hist(values, bins=bins, alpha=0.6, color=colour, label=f"predicted {group} (n={len(values)})")
        ax.set_title(model, fontsize=9)
        ax.set_xlabel(xlabel)
        ax.legend(fontsize=7)
    fig.suptitle(title)
    save_figure(fig, path)


def _violins(
    frames: dict[str, pd.DataFrame], column: str, xlabel: str, title: str, xlim, path: Path, names: list[str]
) -> None:
    """Densities of ``column`` (x) per max-attention bin (y), split by predicted class, as J&W Figs. 3 and 5."""
    labels = [f"[{a:.2f}, {b:.2f})" for a, b in zip(ATTENTION_BINS[:-1], ATTENTION_BINS[1:])]
    fig, axes = _panels(len(frames), 4.5, 3.5)
    for ax, (model, frame) in zip(axes, frames.items()):
        data = frame[[column, "max_attention", "predicted_class"]].dropna().copy()
        data["max attention"] = pd.cut(
            data["max_attention"], ATTENTION_BINS, labels=labels, include_lowest=True, right=False
        )
        data["max attention"] = data["max attention"].cat.set_categories(labels)
        data.loc[data["max_attention"] >= 1.0, "max attention"] = labels[-1]
        data["class"], palette = class_groups(data["predicted_class"], names)
        if len(data):
            attention_violins(ax, data, column, "max attention", labels[::-1], palette)
        ax.set_xlim(*xlim)
        ax.set_xlabel(xlabel)
        ax.set_title(model, fontsize=9)
    fig.suptitle(title)
    save_figure(fig, path)


def _unavailable(path: Path, message: str) -> None:
    fig, ax = plt.subplots(figsize=(5, 2))
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes)
    ax.set_axis_off()
    save_figure(fig, path)


def _appendix_c(correlation: dict[str, pd.DataFrame], path: Path) -> None:
    needed = {"tau_gradient_loo", "tau_attention_loo", "tau_attention_gradient"}
    if not all(needed <= set(f.columns) for f in correlation.values()):
        return _unavailable(path, "needs correlation.methods to include attention, gradient and loo")
    models = list(correlation)
    diff_loo = [np.nanmean(f["tau_gradient_loo"] - f["tau_attention_loo"]) for f in correlation.values()]
    diff_grad = [np.nanmean(f["tau_gradient_loo"] - f["tau_attention_gradient"]) for f in correlation.values()]
    fig, ax = plt.subplots(figsize=(max(5, 1.3 * len(models)), 3.5), layout="constrained")
    x = np.arange(len(models))
    ax.bar(x - 0.2, diff_loo, 0.4, label="τ(gradient, LOO) − τ(attention, LOO)  (Fig. 6)", color="#4575b4")
    ax.bar(x + 0.2, diff_grad, 0.4, label="τ(gradient, LOO) − τ(attention, gradient)  (Fig. 7)", color="#d73027")
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_xticks(x, models, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("mean difference in τ")
    ax.legend(fontsize=7)
    ax.set_title("J&W App. C: gradients and LOO agree with each other more than with attention")
    save_figure(fig, path)


def _average_vs_lstm(correlation: dict[str, pd.DataFrame], variants: dict[str, dict], path: Path) -> None:
    if not all("tau_attention_loo" in f.columns for f in correlation.values()):
        return _unavailable(path, "needs correlation.methods to include attention and loo")
    groups: dict[str, dict[str, list[pd.DataFrame]]] = {}
    for model, frame in correlation.items():  # seeds and regularisers of one encoder × attention are pooled
        v = variants.get(model, {})
        if v.get("encoder") in ("average", "lstm"):
            groups.setdefault(v.get("attention"), {}).setdefault(v["encoder"], []).append(frame)
    pairs = {
        att: {enc: pd.concat(frames) for enc, frames in g.items()}
        for att, g in groups.items()
        if {"average", "lstm"} <= set(g)
    }
    fig, axes = _panels(max(1, len(pairs)), 5, 3.5)
    if not pairs:
        axes[0].text(
            0.5,
            0.5,
            "needs an average and an lstm model\nwith the same attention",
            ha="center",
            va="center",
            transform=axes[0].transAxes,
        )
        axes[0].set_axis_off()
    for ax, (att, g) in zip(axes, sorted(pairs.items())):
        for encoder, colour in (("average", "#1b9e77"), ("lstm", "#7570b3")):
            tau = g[encoder]["tau_attention_loo"].dropna()
            ax.hist(
                tau, bins=np.linspace(-1, 1, 41), alpha=0.55, color=colour, label=f"{encoder} (mean {tau.mean():.2f})"
            )
            ax.axvline(tau.mean(), color=colour, linewidth=2)
        diff = g["average"]["tau_attention_loo"].mean() - g["lstm"]["tau_attention_loo"].mean()
        ax.set_title(f"{att} attention: average − lstm = {diff:+.2f}", fontsize=9)
        ax.set_xlabel("τ(attention, LOO)")
        ax.legend(fontsize=7)
    fig.suptitle("J&W App. C, Fig. 8: attention–LOO correlation, Average vs BiLSTM encoder")
    save_figure(fig, path)


def write_figures(
    dataset: str,
    models: list[str],
    paths: dict[str, list[str]],
    out_dir: str | Path,
    variants: dict[str, dict] | None = None,
    manifest: str | Path | None = None,
) -> list[Path]:
    """All J&W figures of one dataset; ``paths``: audit → its gathered parquet per model, in ``models`` order;
    ``variants``: model → its sheet fields (encoder, attention) for Fig. 8's pooling; ``manifest``: the corpus
    manifest, whose class names label the legends."""
    names = label_names(manifest)
    out = Path(out_dir)
    load = lambda audit: {m: read_parquet(p) for m, p in zip(models, paths[audit], strict=True)}
    correlation, permutation, adversarial = load("correlation"), load("permutation"), load("adversarial")
    tau_bins = np.linspace(-1, 1, 41)
    _histograms(
        correlation,
        "tau_attention_gradient",
        "τ(attention, gradient)",
        f"{dataset}: Kendall τ between attention and gradients (J&W Fig. 2)",
        tau_bins,
        out / "fig2_tau_gradient.png",
        names,
    )
    _histograms(
        correlation,
        "tau_attention_loo",
        "τ(attention, LOO)",
        f"{dataset}: Kendall τ between attention and leave-one-out",
        tau_bins,
        out / "fig2_tau_loo.png",
        names,
    )
    _violins(
        permutation,
        "delta_median",
        "median Δŷ (TVD) over permutations",
        f"{dataset}: permuting attention (J&W Fig. 3)",
        (0, 1),
        out / "fig3_permutation.png",
        names,
    )
    _histograms(
        adversarial,
        "eps_max_jsd",
        "ε-max JSD (nats)",
        f"{dataset}: adversarial attention (J&W Fig. 4)",
        np.linspace(0, LN2, 36),
        out / "fig4_adversarial_jsd.png",
        names,
    )
    _violins(
        adversarial,
        "eps_max_jsd",
        "ε-max JSD (nats)",
        f"{dataset}: ε-max JSD vs max attention (J&W Fig. 5)",
        (0, LN2),
        out / "fig5_jsd_vs_max_attention.png",
        names,
    )
    _appendix_c(correlation, out / "fig6_7_appendix_c.png")
    _average_vs_lstm(correlation, variants or {}, out / "fig8_average_vs_lstm.png")
    paths = [out / f"{name}.png" for name in FIGURES]
    log.info("wrote %d figures for %s to %s", len(paths), dataset, out)
    return paths
