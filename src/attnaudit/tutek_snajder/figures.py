"""T&Š figures: ΔF1 per regulariser (Table 1 as bars), per-token prediction probability along test instances
(§5, Fig. 2, App. D) and imitating adversaries, JSD vs TVD per λ (§4.3, Fig. 1). Missing inputs give a panel
that says so; a figure is always written."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from attnaudit.io import read_json, read_parquet  # noqa: E402
from attnaudit.labels import class_name, label_names  # noqa: E402
from attnaudit.metrics import LN2  # noqa: E402
from attnaudit.plotting import plain_text, save_figure  # noqa: E402
from attnaudit.tutek_snajder.runs import parse_runs, sort_key  # noqa: E402
from attnaudit.tutek_snajder.tables import fragility_frame, table1  # noqa: E402

log = logging.getLogger(__name__)

COLOURS = {"base": "#d62728", "concat": "#9467bd", "residual": "#8c564b", "tying": "#2ca02c", "mlm": "#1f77b4"}
IMITATION_KEYS = ("dataset", "teacher", "lambda", "jsd_mean", "tvd_mean")


def _colour(regulariser: str) -> str:
    return COLOURS.get(regulariser, "#7f7f7f")


def _message(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=9, wrap=True)
    ax.set_axis_off()


def _grid(n: int, cols: int, width: float, height: float):
    cols = max(1, min(cols, n))
    rows = math.ceil(max(1, n) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False, layout="constrained")
    for ax in axes.flat[max(1, n) :]:
        ax.set_visible(False)
    return fig, list(axes.flat)


# ---------------------------------------------------------------------------------------------- ΔF1 bars
def fragility_figure(runs: list[dict], out: str | Path, f1: str = "positive") -> None:
    """Un. and Pm. ΔF1 (mean ± std over seeds) per variant, coloured by regulariser, one panel per dataset ×
    attention, 1-layer models; T&Š's values (their one δ or η per dataset) as black outlines."""
    table = table1(fragility_frame(runs, f1))
    panels = list(table.groupby(["dataset", "attention"], sort=False)) if len(table) else []
    fig, axes = _grid(len(panels), 2, 4.5, 3.2)
    if not panels:
        _message(axes[0], "no fragility results in the runs")
    for ax, ((dataset, attention), group) in zip(axes, panels):
        x = np.arange(len(group))  # table1's order: regulariser, then variant
        for offset, measure, hatch in ((-0.2, "un", ""), (0.2, "pm", "//")):
            ax.bar(
                x + offset,
                group[f"{measure}_mean"],
                0.4,
                yerr=group[f"{measure}_std"].fillna(0),
                color=[_colour(r) for r in group["regulariser"]],
                hatch=hatch,
                edgecolor="white",
                label={"un": "Un. (uniform)", "pm": "Pm. (permuted)"}[measure],
            )
            ax.bar(x + offset, group[f"ts_{measure}"], 0.4, fill=False, edgecolor="black", linewidth=0.8)
        ax.axhline(0, color="black", linewidth=0.6)
        ticks = [f"{v}\n(n={n})" for v, n in zip(group["variant"], group["n_seeds"])]
        ax.set_xticks(x, ticks, fontsize=7, rotation=30, ha="right")
        ax.set_ylabel(f"Δ {f1} F1 (points)")
        ax.set_title(f"{dataset}, {attention} attention", fontsize=9)
        ax.legend(fontsize=7, title="black outline: T&Š", title_fontsize=7)
    fig.suptitle("Attention fragility: F1 change when attention is replaced (T&Š §4.1, Table 1)")
    save_figure(fig, out)


# ---------------------------------------------------------------------------------------------- Fig. 2
def _examples_tokens(dataset_dir: str | None, ids: list[str]) -> dict[str, list[str]]:
    if not dataset_dir or not (Path(dataset_dir) / "examples.parquet").exists():
        return {}
    examples = read_parquet(Path(dataset_dir) / "examples.parquet", columns=["id", "tokens"])
    examples = examples[examples["id"].isin(ids)]
    return {i: list(t) for i, t in zip(examples["id"], examples["tokens"])}


def _pick_models(runs: list[dict], dataset: str | None) -> tuple[str | None, list[dict]]:
    """One run per regulariser for the figure: additive attention if any, fewest layers, lowest seed."""
    usable = [r for r in runs if r["token_probability"] and Path(r["token_probability"]).exists()]
    if dataset is None and usable:
        dataset = usable[0]["dataset"]
    usable = [r for r in usable if r["dataset"] == dataset]
    if not usable:
        return dataset, []
    attention = "additive" if any(r["attention"] == "additive" for r in usable) else usable[0]["attention"]
    usable = [r for r in usable if r["attention"] == attention]
    layers = min(r["layers"] for r in usable)
    chosen: dict[str, dict] = {}
    for run in sorted((r for r in usable if r["layers"] == layers), key=lambda r: r["seed"]):
        chosen.setdefault(run["regulariser"], run)
    return dataset, [chosen[k] for k in sorted(chosen, key=sort_key)]


def choose_instances(frames: dict[str, pd.DataFrame], n: int, max_tokens: int) -> tuple[list[str], str]:
    """Ids of ``n`` test instances shared by every model, in split order: preferably short and predicted
    correctly and alike by all models; the criteria are relaxed in that order when too few qualify."""
    merged = None
    for name, frame in frames.items():
        part = frame[["id", "row", "n_tokens", "predicted", "correct"]].rename(
            columns={"predicted": f"predicted_{name}", "correct": f"correct_{name}"}
        )
        merged = part if merged is None else merged.merge(part.drop(columns=["row", "n_tokens"]), on="id")
    if merged is None or merged.empty:
        return [], "no instance is shared by the models"
    merged = merged.sort_values("row")
    predicted = merged[[c for c in merged.columns if c.startswith("predicted_")]]
    agree = predicted.nunique(axis=1).eq(1) & merged[[c for c in merged.columns if c.startswith("correct_")]].all(
        axis=1
    )
    short = merged["n_tokens"] <= max_tokens
    for mask, note in (
        (agree & short, f"≤ {max_tokens} tokens, predicted correctly by every model"),
        (short, f"≤ {max_tokens} tokens (models disagree or err)"),
        (pd.Series(True, index=merged.index), "the first shared instances"),
    ):
        if mask.sum() >= n:
            return merged.loc[mask, "id"].head(n).tolist(), note
    return merged["id"].head(n).tolist(), "the first shared instances"


def token_probability_figure(
    runs: list[dict],
    out: str | Path,
    n_examples: int = 3,
    max_tokens: int = 30,
    dataset: str | None = None,
    names: list[str] | None = None,
) -> None:
    """Per-token probability of the predicted class along ``n_examples`` test instances (the same ones for every
    regulariser), the model's prediction probability dotted (T&Š Fig. 2, App. D Figs. 3–7); ``names``: the
    corpus's class names (its manifest's ``label_names``), else class indices."""
    dataset, chosen = _pick_models(runs, dataset)
    frames = {r["regulariser"]: read_parquet(r["token_probability"]) for r in chosen}
    ids, note = choose_instances(frames, n_examples, max_tokens) if frames else ([], "")
    fig, axes = _grid(len(ids), 1, 10, 2.8)
    if not ids:
        _message(axes[0], f"no per-token probabilities for {dataset or 'any dataset'} in the runs")
        save_figure(fig, out)
        return
    tokens = _examples_tokens(next((r["dataset_dir"] for r in chosen if r["dataset_dir"]), None), ids)
    for ax, instance in zip(axes, ids):
        length = None
        for run in chosen:
            frame = frames[run["regulariser"]]
            row = frame[frame["id"] == instance].iloc[0]
            probs = np.asarray(row["token_probs"], dtype=float)
            length = len(probs)
            colour = _colour(run["regulariser"])
            ax.plot(np.arange(length), probs, marker="o", markersize=3, color=colour, label=run["regulariser"])
            ax.axhline(float(row["prediction_prob"]), color=colour, linestyle=":", linewidth=1.2)
        words = tokens.get(instance)
        if words is not None and len(words) == length:
            ax.set_xticks(np.arange(length), [plain_text(w) for w in words], rotation=60, ha="right", fontsize=7)
        else:
            ax.set_xlabel("token position (words unavailable: no dataset_dir in the run records)")
        ax.set_ylim(0, 1.02)
        ax.set_ylabel("p(ŷ | all attention on t)", fontsize=8)
        label, predicted = class_name(names or [], row["label"]), class_name(names or [], row["predicted"])
        ax.set_title(
            plain_text(f"{dataset} test instance {instance}: label {label}, predicted {predicted}"), fontsize=9
        )
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle(
        f"Per-token prediction probability (T&Š §5, Eq. 9, Fig. 2); dotted: the model's prediction probability; "
        f"instances: {note}",
        fontsize=9,
    )
    save_figure(fig, out)


# ---------------------------------------------------------------------------------------------- Fig. 1
def load_imitations(paths: list[str] | None, runs: list[dict]) -> pd.DataFrame:
    """Imitation/adversary results (W&P stage JSON) with the teacher's regulariser from the run records."""
    teachers = {(r["dataset"], r["model"]): r["regulariser"] for r in runs}
    by_model = {r["model"]: r["regulariser"] for r in runs}
    rows = []
    for path in paths or []:
        if not Path(path).exists():
            log.warning("missing imitation result %s", path)
            continue
        record = read_json(path)
        if any(key not in record for key in IMITATION_KEYS):
            log.warning("%s lacks one of %s; skipped", path, ", ".join(IMITATION_KEYS))
            continue
        regulariser = teachers.get((record["dataset"], record["teacher"]), by_model.get(record["teacher"], "unknown"))
        rows.append({**record, "teacher_regulariser": regulariser})
    return pd.DataFrame(rows)


def adversary_figure(imitations: pd.DataFrame, out: str | Path) -> None:
    """Test-set mean per-instance JSD (x) vs TVD (y) per λ for adversaries of base / MLM / tying teachers; the
    λ = 0 imitation of each teacher as dotted lines (T&Š §4.3, Fig. 1). Teachers of one regulariser (seeds)
    are averaged per λ."""
    datasets = sorted(imitations["dataset"].unique()) if len(imitations) else []
    fig, axes = _grid(len(datasets), 2, 4.5, 3.5)
    if not datasets:
        _message(axes[0], "no imitation / adversary results (W&P stage) were given")
    for ax, dataset in zip(axes, datasets):
        frame = imitations[imitations["dataset"] == dataset]
        means = frame.groupby(["teacher_regulariser", "lambda"], as_index=False)[["jsd_mean", "tvd_mean"]].mean()
        for regulariser in sorted(means["teacher_regulariser"].unique(), key=sort_key):
            group = means[means["teacher_regulariser"] == regulariser].sort_values("lambda")
            colour = _colour(regulariser)
            imitation = group[group["lambda"] == 0]
            adversaries = group[group["lambda"] != 0]
            if len(adversaries):
                ax.plot(adversaries["jsd_mean"], adversaries["tvd_mean"], marker="o", color=colour, label=regulariser)
                for lam, x, y in zip(adversaries["lambda"], adversaries["jsd_mean"], adversaries["tvd_mean"]):
                    ax.annotate(f"λ={lam:g}", (x, y), fontsize=6, color=colour)
            for x, y in zip(imitation["jsd_mean"], imitation["tvd_mean"]):
                ax.axvline(x, color=colour, linestyle=":", linewidth=1.2)
                ax.axhline(y, color=colour, linestyle=":", linewidth=1.2, label=f"{regulariser} imitation (λ = 0)")
        ax.set_xlim(0, LN2)
        ax.set_xlabel("mean per-instance JSD(α_student, α_teacher) (nats)")
        ax.set_ylabel("mean TVD(ŷ_student, ŷ_teacher)")
        ax.set_title(dataset, fontsize=9)
        ax.legend(fontsize=7)
    fig.suptitle("Adversaries trained against base / MLM / tying teachers (T&Š §4.3, Fig. 1)")
    save_figure(fig, out)


def write_figures(
    runs,
    out_fragility: str | Path,
    out_token_probability: str | Path,
    out_adversary: str | Path,
    imitations: list[str] | None = None,
    n_examples: int = 3,
    max_tokens: int = 30,
    dataset: str | None = None,
    f1: str = "positive",
    manifest: str | Path | None = None,
) -> list[Path]:
    runs = parse_runs(runs)
    fragility_figure(runs, out_fragility, f1)
    token_probability_figure(runs, out_token_probability, n_examples, max_tokens, dataset, label_names(manifest))
    adversary_figure(load_imitations(imitations, runs), out_adversary)
    paths = [Path(p) for p in (out_fragility, out_token_probability, out_adversary)]
    log.info("T&Š figures → %s", ", ".join(map(str, paths)))
    return paths
