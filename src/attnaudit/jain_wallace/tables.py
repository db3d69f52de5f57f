"""Summary tables of the J&W audits (results/tables/jain_wallace/): one row per dataset × model × predicted
class, in the layout of J&W Table 2 (mean ± std of τ and the fraction significant at p < 0.05), plus
``table2.csv``/``table2.md`` that put our numbers next to the paper's Table 2, and ``seeds.csv``/``seeds.md``:
τ_g and τ_loo over training seeds and model-selection rules (how much of a gap to J&W is run-to-run noise)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from attnaudit.io import read_json, read_parquet, write_text
from attnaudit.jain_wallace.correlation import method_pairs, pair_name
from attnaudit.jain_wallace.options import resolve
from attnaudit.labels import ALL_CLASSES, class_name, label_names
from attnaudit.modelsheet import parse_model_id
from attnaudit.tables import markdown_cell

log = logging.getLogger(__name__)


# J&W (2019) Table 2, classification rows (additive attention): (mean, std, significant fraction) per measure.
# Keys are this project's corpus registry names; Diabetes/Anemia (MIMIC) are kept for users who add them.
JW_TABLE2 = {
    "sst": {
        0: ((0.34, 0.21, 0.48), (0.61, 0.20, 0.87), (0.27, 0.19, 0.33)),
        1: ((0.36, 0.21, 0.49), (0.60, 0.21, 0.83), (0.32, 0.19, 0.40)),
    },
    "imdb": {
        0: ((0.44, 0.06, 1.00), (0.67, 0.05, 1.00), (0.34, 0.07, 1.00)),
        1: ((0.43, 0.06, 1.00), (0.68, 0.05, 1.00), (0.34, 0.07, 0.99)),
    },
    "adr": {
        0: ((0.47, 0.18, 0.76), (0.73, 0.13, 0.96), (0.29, 0.20, 0.44)),
        1: ((0.49, 0.15, 0.85), (0.72, 0.12, 0.97), (0.44, 0.16, 0.74)),
    },
    "20news": {
        0: ((0.07, 0.17, 0.37), (0.79, 0.07, 1.00), (0.06, 0.15, 0.29)),
        1: ((0.21, 0.22, 0.61), (0.75, 0.08, 1.00), (0.20, 0.20, 0.62)),
    },
    "agnews": {
        0: ((0.36, 0.13, 0.82), (0.78, 0.07, 1.00), (0.30, 0.13, 0.69)),
        1: ((0.42, 0.13, 0.90), (0.76, 0.07, 1.00), (0.43, 0.14, 0.91)),
    },
    "diabetes": {
        0: ((0.42, 0.05, 1.00), (0.75, 0.02, 1.00), (0.41, 0.05, 1.00)),
        1: ((0.40, 0.05, 1.00), (0.75, 0.02, 1.00), (0.45, 0.05, 1.00)),
    },
    "anemia": {
        0: ((0.47, 0.05, 1.00), (0.77, 0.02, 1.00), (0.46, 0.05, 1.00)),
        1: ((0.46, 0.06, 1.00), (0.77, 0.03, 1.00), (0.47, 0.06, 1.00)),
    },
    # QA/NLI rows (J&W Table 2, bottom): bAbI and CNN are reported over all instances ("all"), SNLI per class
    # (0 neutral, 1 contradiction, 2 entailment). babi3_1k (the 1k task 3, runnable from the mirror) is compared
    # with J&W's en-10k task 3.
    "babi1": {"all": ((0.25, 0.16, 0.55), (0.72, 0.12, 0.99), (0.16, 0.14, 0.28))},
    "babi2": {"all": ((-0.02, 0.14, 0.27), (0.68, 0.06, 1.00), (-0.01, 0.13, 0.27))},
    "babi3": {"all": ((0.24, 0.11, 0.87), (0.61, 0.13, 1.00), (0.26, 0.10, 0.89))},
    "cnn": {"all": ((0.24, 0.07, 0.99), (0.50, 0.10, 1.00), (0.20, 0.07, 0.98))},
    "snli": {
        0: ((0.31, 0.23, 0.36), (0.59, 0.18, 0.80), (0.16, 0.26, 0.20)),
        1: ((0.33, 0.21, 0.38), (0.58, 0.19, 0.80), (0.36, 0.19, 0.44)),
        2: ((0.31, 0.21, 0.36), (0.57, 0.19, 0.80), (0.34, 0.20, 0.40)),
    },
}
JW_TABLE2["babi3_1k"] = JW_TABLE2["babi3"]
# J&W (2019) Table 1, "test performance" of their BiLSTM (additive attention): the positive class's F1 for the binary
# classification corpora, accuracy for QA (bAbI, CNN), micro-F1 (= accuracy) for NLI (SNLI).
JW_TABLE1 = {
    "sst": ("positive-class F1", 0.81),
    "imdb": ("positive-class F1", 0.88),
    "adr": ("positive-class F1", 0.61),
    "20news": ("positive-class F1", 0.94),
    "agnews": ("positive-class F1", 0.96),
    "mimic_diabetes": ("positive-class F1", 0.79),
    "mimic_anemia": ("positive-class F1", 0.92),
    "cnn": ("accuracy", 0.64),
    "babi1": ("accuracy", 1.0),
    "babi2": ("accuracy", 0.65),
    "babi3": ("accuracy", 0.64),
    "babi3_1k": ("accuracy", 0.64),  # J&W's number is for the en-10k task 3
    "snli": ("micro-F1", 0.78),
}
# the three column groups of Table 2: (measure, J&W encoder, our pair)
JW_MEASURES = (
    ("tau_g", "lstm", "attention~gradient"),
    ("tau_g", "average", "attention~gradient"),
    ("tau_loo", "lstm", "attention~loo"),
)


def _load(runs: list[dict], audit: str) -> pd.DataFrame:
    """One audit's gathered parquets (``run[audit]``: its path) with the run's identity columns."""
    frames = []
    for run in runs:
        identity = {"dataset": run["dataset"], "model": run["model"], "selection": run.get("selection", "")}
        identity["variant"] = run.get("variant") or parse_model_id(run["model"])["variant"]
        identity.update({k: run.get(k, "") for k in ("encoder", "attention", "regulariser")})
        identity["seed"] = run.get("seed", -1)
        if "epsilon" in run:  # per-dataset ε (datasets.<name>.jain_wallace.adversarial.epsilon; J&W: 0.05 for QA)
            identity["epsilon"] = run["epsilon"]
        frames.append(read_parquet(run[audit]).assign(**identity))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _keys():
    return [
        "dataset",
        "model",
        "variant",
        "encoder",
        "attention",
        "regulariser",
        "seed",
        "selection",
        "predicted_class",
    ]


def correlation_table(frame: pd.DataFrame, options: dict) -> pd.DataFrame:
    opts = options["correlation"]
    rows = []
    for key, group in frame.groupby(_keys(), sort=True):
        for a, b in method_pairs(opts["methods"]):
            tau, p = group[f"tau_{a}_{b}"].to_numpy(float), group[f"p_{a}_{b}"].to_numpy(float)
            defined = ~np.isnan(tau)
            rows.append(
                {
                    **dict(zip(_keys(), key)),
                    "pair": pair_name(a, b),
                    "tau_mean": np.mean(tau[defined]) if defined.any() else np.nan,
                    "tau_std": np.std(tau[defined], ddof=1) if defined.sum() > 1 else np.nan,
                    "tau_median": np.median(tau[defined]) if defined.any() else np.nan,
                    "significant_fraction": np.mean(p[defined] < opts["significance"]) if defined.any() else np.nan,
                    "n": int(defined.sum()),
                    "n_undefined": int((~defined).sum()),
                    "exclude_markers": opts["exclude_markers"],
                    "absolute": opts["absolute"],
                    "tau_variant": "tau-b (scipy.stats.kendalltau)",
                }
            )
    return pd.DataFrame(rows)


def permutation_table(frame: pd.DataFrame, options: dict) -> pd.DataFrame:
    opts = options["permutation"]
    rows = []
    for key, group in frame.groupby(_keys(), sort=True):
        median = group["delta_median"].to_numpy(float)
        rows.append(
            {
                **dict(zip(_keys(), key)),
                "n": len(group),
                "max_attention_mean": group["max_attention"].mean(),
                "delta_median_mean": median.mean(),
                "delta_median_q25": np.quantile(median, 0.25),
                "delta_median_q50": np.quantile(median, 0.5),
                "delta_median_q75": np.quantile(median, 0.75),
                "delta_median_q95": np.quantile(median, 0.95),
                "small_change_fraction": np.mean(median < opts["small_change"]),
                "small_change": opts["small_change"],
                "n_permutations": opts["n_permutations"],
                "exclude_markers": opts["exclude_markers"],
            }
        )
    return pd.DataFrame(rows)


def adversarial_table(frame: pd.DataFrame, options: dict) -> pd.DataFrame:
    opts = options["adversarial"]
    rows = []
    for key, group in frame.groupby(_keys(), sort=True):
        jsd = group["eps_max_jsd"].to_numpy(float)
        valid = np.concatenate([np.asarray(v, bool) for v in group["adversary_valid"]])
        rows.append(
            {
                **dict(zip(_keys(), key)),
                "n": len(group),
                "eps_max_jsd_mean": np.nanmean(jsd),
                "eps_max_jsd_std": np.nanstd(jsd, ddof=1) if len(jsd) > 1 else np.nan,
                "eps_max_jsd_median": np.nanmedian(jsd),
                "high_jsd_fraction": np.mean(jsd > opts["high_jsd"]),
                "high_jsd": opts["high_jsd"],
                "no_valid_fraction": np.mean(group["n_valid"].to_numpy() == 0),
                "valid_adversary_fraction": valid.mean() if valid.size else np.nan,
                "max_attention_mean": group["max_attention"].mean(),
                "epsilon": group["epsilon"].iloc[0] if "epsilon" in group else opts["epsilon"],
                "k": opts["k"],
                "no_valid": opts["no_valid"],
            }
        )
    return pd.DataFrame(rows)


def overall_rows(frame: pd.DataFrame, options: dict, datasets: list[str]) -> pd.DataFrame:
    """:func:`correlation_table` over every instance of ``datasets`` (predicted_class = :data:`ALL_CLASSES`)."""
    chosen = frame[frame["dataset"].isin(datasets)] if len(frame) else frame
    if not len(chosen):
        return pd.DataFrame()
    return correlation_table(chosen.assign(predicted_class=ALL_CLASSES), options)


def pooled_datasets(runs: list[dict], corpora: dict[str, str], correlation: pd.DataFrame) -> list[str]:
    """The datasets whose Table 2 rows pool every predicted class (:data:`ALL_CLASSES`): the corpora J&W report so
    (bAbI, CNN: an "all" row in :data:`JW_TABLE2`), and a user's QA/NLI corpus (a run's ``qa``) of 4 or more
    classes — J&W's code splits τ by predicted class below 4 (``plot_SP_histogram_by_class``), as their SNLI rows
    are. Classes: the manifest's label names, else the distinct predicted classes."""

    def n_classes(dataset: str) -> int:
        manifest = next((r["manifest"] for r in runs if r["dataset"] == dataset and r.get("manifest")), None)
        predicted = correlation.loc[correlation["dataset"] == dataset, "predicted_class"] if len(correlation) else []
        return len(label_names(manifest)) or len(set(predicted))

    qa = {r["dataset"] for r in runs if r.get("qa")}
    return [
        dataset
        for dataset, corpus in corpora.items()
        if ("all" in JW_TABLE2[corpus] if corpus in JW_TABLE2 else dataset in qa and n_classes(dataset) >= 4)
    ]


def table2(correlation: pd.DataFrame, corpora: dict[str, str], pooled=()) -> pd.DataFrame:
    """Our τ_g (BiLSTM, Average) and τ_loo (BiLSTM) per predicted class next to J&W Table 2 (their additive
    attention; every attention variant of ours with the matching encoder is listed). The ``pooled`` datasets
    (:func:`pooled_datasets`) have rows of class :data:`ALL_CLASSES` only, compared with J&W's overall numbers."""
    rows = []
    for dataset, corpus in corpora.items():
        reference = JW_TABLE2.get(corpus, {})
        for measure_index, (measure, encoder, pair) in enumerate(JW_MEASURES):
            ours = correlation[
                (correlation["dataset"] == dataset)
                & (correlation["encoder"] == encoder)
                & (correlation["pair"] == pair)
            ]
            if dataset in pooled:  # QA: J&W report every instance pooled; per-class rows stay in correlation.csv
                ours = ours[ours["predicted_class"] == ALL_CLASSES]
            for _, row in ours.iterrows():
                klass = int(row["predicted_class"])
                jw = reference.get("all" if klass == ALL_CLASSES else klass)
                jw = jw[measure_index] if jw else (np.nan, np.nan, np.nan)
                rows.append(
                    {
                        "dataset": dataset,
                        "corpus": corpus,
                        "measure": measure,
                        "encoder": encoder,
                        "model": row["model"],
                        "predicted_class": int(row["predicted_class"]),
                        "ours_mean": row["tau_mean"],
                        "ours_std": row["tau_std"],
                        "ours_significant_fraction": row["significant_fraction"],
                        "ours_n": row["n"],
                        "jw_mean": jw[0],
                        "jw_std": jw[1],
                        "jw_significant_fraction": jw[2],
                    }
                )
    return pd.DataFrame(rows)


def with_labels(frame: pd.DataFrame, names: dict[str, list[str]]) -> pd.DataFrame:
    """``frame`` with a ``label`` column after ``predicted_class``: the class name, "all" for the pooled rows."""
    if "predicted_class" not in frame.columns or "label" in frame.columns:
        return frame
    labelled = frame.copy()
    labels = [class_name(names.get(d, []), c) for d, c in zip(frame["dataset"], frame["predicted_class"])]
    labelled.insert(frame.columns.get_loc("predicted_class") + 1, "label", labels)
    return labelled


def table1(runs: list[dict]) -> pd.DataFrame:
    """Each model's test score in J&W Table 1's metric for its corpus, next to J&W's BiLSTM number (runs with a
    ``metrics`` path only)."""
    rows = []
    for run in runs:
        if not run.get("metrics"):
            continue
        test = read_json(run["metrics"])["test"]
        metric, jw = JW_TABLE1.get(run.get("corpus", run["dataset"]), ("accuracy", np.nan))
        per_class = test.get("per_class_f1") or []
        ours = per_class[1] if metric == "positive-class F1" and len(per_class) == 2 else test["accuracy"]
        rows.append(
            {
                "dataset": run["dataset"],
                "corpus": run.get("corpus", run["dataset"]),
                "model": run["model"],
                "encoder": run.get("encoder", ""),
                "attention": run.get("attention", ""),
                "metric": metric,
                "ours": ours,
                "ours_macro_f1": test.get("macro_f1", np.nan),
                "n_test": test.get("n", np.nan),
                "jw_bilstm": jw,
            }
        )
    return pd.DataFrame(
        rows,
        columns=["dataset", "corpus", "model", "encoder", "attention", "metric", "ours", "ours_macro_f1", "n_test"]
        + ["jw_bilstm"],
    )


def number(x, digits: int = 2) -> str:
    return "–" if pd.isna(x) else f"{x:.{digits}f}"


def markdown(title: str, intro: str, columns: list[str], rows: list[list]) -> str:
    """A titled markdown table: ``columns`` header, one line per row of cell texts (a class name, the one cell
    that comes from the corpus, through :func:`attnaudit.tables.markdown_cell`)."""
    lines = [f"# {title}", "", intro, "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def table1_markdown(frame: pd.DataFrame) -> str:
    return markdown(
        "Jain & Wallace (2019) Table 1: test performance, ours vs the paper",
        "J&W report their BiLSTM's positive-class F1 (classification), accuracy (QA) or micro-F1 (NLI); ours for "
        "every audited model, in the same metric.",
        ["dataset", "model", "metric", "ours", "ours macro-F1", "n test", "J&W BiLSTM"],
        [
            [r["dataset"], r["model"], r["metric"], number(r["ours"], 3), number(r["ours_macro_f1"], 3)]
            + [r["n_test"], number(r["jw_bilstm"], 3)]
            for _, r in frame.iterrows()
        ],
    )


def table2_markdown(frame: pd.DataFrame, options: dict) -> str:
    opts = options["correlation"]
    return markdown(
        "Jain & Wallace (2019) Table 2: ours vs the paper",
        "Kendall τ-b (scipy, ties corrected) per instance between attention and gradient (τ_g) or leave-one-out "
        f"(τ_loo) over real tokens{' without the sentence markers' if opts['exclude_markers'] else ''}; "
        f"mean ± std and the fraction with p < {opts['significance']} per predicted class. J&W numbers are "
        "their additive-attention BiLSTM / Average rows.",
        ["dataset", "measure", "encoder", "model", "class", "ours mean ± std", "ours sig. frac.", "n"]
        + ["J&W mean ± std", "J&W sig. frac."],
        [
            [r["dataset"], r["measure"], r["encoder"], r["model"], markdown_cell(r["label"])]
            + [f"{number(r['ours_mean'])} ± {number(r['ours_std'])}", number(r["ours_significant_fraction"])]
            + [r["ours_n"], f"{number(r['jw_mean'])} ± {number(r['jw_std'])}", number(r["jw_significant_fraction"])]
            for _, r in frame.iterrows()
        ],
    )


SEED_MEASURES = {"attention~gradient": "tau_g", "attention~loo": "tau_loo"}


def seeds_table(correlation: pd.DataFrame, corpora: dict[str, str]) -> pd.DataFrame:
    """τ_g and τ_loo per dataset × selection rule × variant × predicted class: each seed's mean τ, then the mean
    and std over the seeds of that one variant (never over variants that share an encoder, attention and
    regulariser but differ in size, layers or weights), next to J&W Table 2 (BiLSTM τ_g/τ_loo; Average τ_g)."""
    jw_column = {(encoder, pair): i for i, (_, encoder, pair) in enumerate(JW_MEASURES)}
    frame = correlation[correlation["pair"].isin(list(SEED_MEASURES))]
    rows = []
    keys = ["dataset", "selection", "variant", "encoder", "attention", "regulariser", "pair", "predicted_class"]
    for key, group in frame.groupby(keys, sort=True):
        group = group.sort_values("seed")
        info = dict(zip(keys, key))
        reference = JW_TABLE2.get(corpora.get(info["dataset"], ""), {}).get(int(info["predicted_class"]))
        column = jw_column.get((info["encoder"], info["pair"]))
        jw_mean = reference[column][0] if reference and column is not None else np.nan
        means = group["tau_mean"].to_numpy(float)
        rows.append(
            {
                **info,
                "measure": SEED_MEASURES[info["pair"]],
                "n_seeds": len(means),
                "seeds": " ".join(str(int(x)) for x in group["seed"]),
                "per_seed": " ".join(number(x, 3) for x in means),  # –: no instance of the class has a τ
                "tau_mean_over_seeds": means.mean(),
                "tau_std_over_seeds": means.std(ddof=1) if len(means) > 1 else np.nan,
                "tau_min": means.min(),
                "tau_max": means.max(),
                "jw_mean": jw_mean,
                "ours_minus_jw": means.mean() - jw_mean,
            }
        )
    return pd.DataFrame(rows)


def seeds_markdown(frame: pd.DataFrame) -> str:
    return markdown(
        "τ over training seeds and model-selection rules (J&W Table 2 measures)",
        "Each seed's mean τ over the test instances of one predicted class; then mean ± std over seeds. "
        "– where no test instance of the class has a defined τ (a constant ranking, or fewer than two tokens). "
        "Selection: `best` = the epoch with the best dev score, `last` = the final epoch. J&W: their "
        "additive BiLSTM τ_g/τ_loo (Average τ_g for the average encoder), one run each.",
        ["dataset", "selection", "model", "measure", "class", "per seed", "mean ± std over seeds", "J&W"]
        + ["ours − J&W"],
        [
            [r["dataset"], r["selection"], r["variant"], r["measure"]]
            + [markdown_cell(r["label"]), f"{r['per_seed']} (s {r['seeds']})"]
            + [f"{number(r['tau_mean_over_seeds'])} ± {number(r['tau_std_over_seeds'])}", number(r["jw_mean"])]
            + [number(r["ours_minus_jw"])]
            for _, r in frame.iterrows()
        ],
    )


def write_tables(runs: list[dict], out_dir: str | Path, options: dict | None = None) -> dict:
    """``runs``: [{dataset, model, corpus, selection, encoder, attention, regulariser, seed, correlation,
    permutation, adversarial, manifest?, metrics?, qa?}], the three audits the paths of the model's gathered
    audits, the manifest the corpus's (its ``label_names`` name the classes in a ``label`` column), metrics the
    model's ``metrics.json`` (J&W Table 1), ``qa`` true for a QA/NLI dataset (a user's: J&W's have reference rows)."""
    opts = resolve(options)
    out = Path(out_dir)
    tables = {
        "correlation": correlation_table(_load(runs, "correlation"), opts),
        "permutation": permutation_table(_load(runs, "permutation"), opts),
        "adversarial": adversarial_table(_load(runs, "adversarial"), opts),
    }
    corpora = {r["dataset"]: r.get("corpus", r["dataset"]) for r in runs}
    overall = pooled_datasets(runs, corpora, tables["correlation"])
    if overall:
        extra = overall_rows(_load([r for r in runs if r["dataset"] in overall], "correlation"), opts, overall)
        tables["correlation"] = pd.concat([tables["correlation"], extra], ignore_index=True)
    tables["table1"] = table1(runs)
    tables["table2"] = table2(tables["correlation"], corpora, overall)
    tables["seeds"] = seeds_table(tables["correlation"], corpora)
    names = {run["dataset"]: label_names(run.get("manifest")) for run in runs}
    tables = {key: with_labels(frame, names) for key, frame in tables.items()}
    for name, frame in tables.items():
        write_text(out / f"{name}.csv", frame.to_csv(index=False, float_format="%.6g"))
    write_text(out / "table1.md", table1_markdown(tables["table1"]))
    write_text(out / "table2.md", table2_markdown(tables["table2"], opts))
    write_text(out / "seeds.md", seeds_markdown(tables["seeds"]))
    log.info("wrote %s to %s", ", ".join(f"{k}.csv" for k in tables), out)
    return tables
