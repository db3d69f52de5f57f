"""T&Š tables from the per-model outputs, our numbers beside the paper's (:mod:`attnaudit.tutek_snajder.paper`).

- ``table1_fragility``: Tr. F1 and Un./Pm. ΔF1 (points ×100) per dataset × attention × variant, 1-layer
  models, mean ± std over the variant's seeds (§4.1, Table 1). Every table has one row per variant: T&Š report
  only their best δ (tying) and η (MLM) per dataset, so each of our tying or MLM variants stands beside that one
  figure, and its comparison with base is made variant by variant.
- ``table2_mutual_information``: MI (nats) of MF and RS words per regulariser, with k used and the ln k bound;
  concat is marked excluded, as in the paper (§4.2, Table 2). Its CSV's ``k_used``, ``n_words`` and ``n_points``
  are the smaller of the MF and RS samples' (and of the seeds'): the tightest ln k bound and the smallest sample.
- ``table3_token_probability``: mean per-token probability of the predicted class over correctly predicted
  instances (§5, Eq. 9, Table 3).
- ``table6_layers``: fragility by number of LSTM layers for base / tying / MLM / concat (App. B, Table 6).
- ``directions``: whether T&Š's qualitative claims hold in our numbers and in theirs, computed comparison by
  comparison; each table's markdown ends with its claims' verdicts.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from attnaudit.io import read_parquet, write_text
from attnaudit.tutek_snajder import paper
from attnaudit.tutek_snajder.options import resolve
from attnaudit.tutek_snajder.runs import load_json, parse_runs, reported_f1, sort_key

log = logging.getLogger(__name__)

EXCLUDED = "excluded (dimensions differ)"
NO_POSITIVE = "; a dataset of more than two classes has no positive class: macro-F1 in its three columns, marked"
CLAIMS = {
    "fragility": "tying and MLM lose more F1 than base when attention is made uniform or permuted (§4.1, Table 1)",
    "mutual_information": "MI between e_t and h_t of base is below every regulariser's (§4.2, Table 2)",
    "token_probability": "per-token probability of base is above tying's and MLM's (§5, Table 3)",
    "layers_base": "base becomes more robust (smaller drops) with every added layer (App. B, Table 6)",
    "layers_fragility": "tying and MLM lose more F1 than base, per number of layers (App. B, Table 6)",
}
VARIANT_KEYS = ["dataset", "corpus", "attention", "layers", "regulariser", "variant"]


def _num(x) -> float:
    return np.nan if x is None else float(x)


def _std(values: pd.Series) -> float:
    return float(values.std(ddof=1)) if values.notna().sum() > 1 else np.nan


def _fmt(x, digits: int = 1) -> str:
    return "–" if x is None or pd.isna(x) else f"{x:.{digits}f}"


def _cell(mean, std, digits: int = 1) -> str:
    return _fmt(mean, digits) if pd.isna(std) else f"{_fmt(mean, digits)} ± {_fmt(std, digits)}"


def _tr_cell(row, f1: str) -> str:
    """Tr. ± std, marked where the row's dataset has no positive class and macro-F1 stands in for it."""
    return _cell(row.tr_mean, row.tr_std) + (f" ({row.f1} F1)" if row.f1 != f1 else "")


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    if frame.empty:
        return frame
    order = frame.apply(
        lambda r: (r["dataset"], r.get("layers", 1), *sort_key(r["regulariser"], r["attention"]), r["variant"]), 1
    )
    return frame.assign(_order=order).sort_values("_order", kind="stable").drop(columns="_order").reset_index(drop=True)


def _over_seeds(frame: pd.DataFrame, columns: list[str], extra: dict | None = None) -> pd.DataFrame:
    """Mean and std over seeds of ``columns`` per variant, with the seed count and list."""
    if frame.empty:
        return pd.DataFrame(columns=[*VARIANT_KEYS, "n_seeds"])
    agg = {"n_seeds": ("seed", "nunique"), "seeds": ("seed", lambda s: " ".join(str(x) for x in sorted(set(s))))}
    for column in columns:
        agg[f"{column}_mean"] = (column, "mean")
        agg[f"{column}_std"] = (column, _std)
    for name, (column, how) in (extra or {}).items():
        agg[name] = (column, how)
    return _sorted(frame.groupby(VARIANT_KEYS, sort=False).agg(**agg).reset_index())


# ---------------------------------------------------------------------------------------------- loading
def fragility_frame(runs: list[dict], f1: str = "positive") -> pd.DataFrame:
    """One row per run with a fragility result: Tr. (F1 ×100), Un. and Pm. (Δ points) in the chosen F1, and
    both F1s under explicit names. A dataset with more than two classes has no positive class: its rows use
    macro-F1 and say so (column ``f1``)."""
    rows = []
    for run in runs:
        result = load_json(run["fragility"])
        if result is None:
            continue
        d = result["delta"]
        row = {k: run[k] for k in (*VARIANT_KEYS, "model", "seed")}
        for metric in ("positive_f1", "macro_f1"):
            short = metric.split("_")[0]
            row[f"tr_{short}"] = 100 * _num(result["trained"][metric])
            row[f"un_{short}"] = _num(d[f"uniform_{metric}"])
            row[f"pm_{short}"] = _num(d[f"permutation_{metric}_mean"])
        used = reported_f1(result, f1)
        row.update(tr=row[f"tr_{used}"], un=row[f"un_{used}"], pm=row[f"pm_{used}"], f1=used)
        row.update(n=result["n"], n_permutations=result["n_permutations"])
        rows.append(row)
    return pd.DataFrame(rows)


def mutual_information_frame(runs: list[dict]) -> pd.DataFrame:
    rows = []
    for run in runs:
        result = load_json(run["mutual_information"])
        if result is None:
            continue
        samples = result["samples"]
        mf, rs = samples.get("MF", {}), samples.get("RS", {})
        k_used = [s.get("k_used") for s in (mf, rs) if s.get("k_used")]
        rows.append(
            {
                **{k: run[k] for k in (*VARIANT_KEYS, "model", "seed")},
                "mf": _num(mf.get("mi")),
                "rs": _num(rs.get("mi")),
                "k_requested": result["k_requested"],
                "k_used": min(k_used) if k_used else 0,
                "n_words": min(mf.get("n_words", 0), rs.get("n_words", 0)),
                "n_points": min(mf.get("n_points", 0), rs.get("n_points", 0)),
                "dimensions_differ": bool(result.get("dimensions_differ")),
            }
        )
    return pd.DataFrame(rows)


def token_probability_frame(runs: list[dict]) -> pd.DataFrame:
    rows = []
    for run in runs:
        path = run["token_probability"]
        if not path or not Path(path).exists():
            if path:
                log.warning("missing input %s", path)
            continue
        frame = read_parquet(path, columns=["correct", "mean_token_prob", "prediction_prob"])
        correct = frame[frame["correct"]]
        rows.append(
            {
                **{k: run[k] for k in (*VARIANT_KEYS, "model", "seed")},
                "token_prob": correct["mean_token_prob"].mean() if len(correct) else np.nan,
                "prediction_prob": correct["prediction_prob"].mean() if len(correct) else np.nan,
                "n_correct": len(correct),
                "n": len(frame),
            }
        )
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------- tables
def table1(fragility: pd.DataFrame) -> pd.DataFrame:
    frame = fragility[fragility["layers"] == 1] if not fragility.empty else fragility
    table = _over_seeds(frame, ["tr", "un", "pm", "tr_macro", "un_macro", "pm_macro"], {"f1": ("f1", "first")})
    for i, name in enumerate(("tr", "un", "pm")):
        table[f"ts_{name}"] = [
            _num((paper.table1(r.corpus, r.attention, r.regulariser) or (None,) * 3)[i]) for r in table.itertuples()
        ]
    return table


def _table6_reference(corpus: str, attention: str, layers: int, regulariser: str) -> tuple:
    """T&Š App. B has additive attention only; their 1-layer dot rows are in Table 1."""
    if attention == "additive":
        found = paper.table6(corpus, layers, regulariser)
    else:
        found = paper.table1(corpus, attention, regulariser) if layers == 1 else None
    return tuple(_num(x) for x in (found or (None,) * 3))


def table6(fragility: pd.DataFrame) -> pd.DataFrame:
    frame = (
        fragility[fragility["regulariser"].isin(["base", "tying", "mlm", "concat"])] if len(fragility) else fragility
    )
    table = _over_seeds(frame, ["tr", "un", "pm"], {"f1": ("f1", "first")})
    reference = [_table6_reference(r.corpus, r.attention, r.layers, r.regulariser) for r in table.itertuples()]
    for i, name in enumerate(("tr", "un", "pm")):
        table[f"ts_{name}"] = [ref[i] for ref in reference]
    return table


def table2(mi: pd.DataFrame) -> pd.DataFrame:
    table = _over_seeds(
        mi,
        ["mf", "rs"],
        {
            "k_requested": ("k_requested", "max"),
            "k_used": ("k_used", "min"),
            "n_words": ("n_words", "min"),
            "n_points": ("n_points", "min"),
            "dimensions_differ": ("dimensions_differ", "any"),
        },
    )
    if table.empty:
        return table
    table["ln_k"] = [np.log(k) if k > 0 else np.nan for k in table["k_used"]]
    ts = [
        paper.table2(r.corpus, r.regulariser) if r.attention == "additive" and r.layers == 1 else None
        for r in table.itertuples()
    ]
    table["ts_mf"] = [_num(t[0]) if t else np.nan for t in ts]
    table["ts_rs"] = [_num(t[1]) if t else np.nan for t in ts]
    table["ts_k"] = [paper.TABLE2_K if t else np.nan for t in ts]
    table["ts_ln_k"] = np.log(table["ts_k"])
    notes = []
    for r in table.itertuples():
        note = [EXCLUDED] if r.regulariser == "concat" else []
        if r.dimensions_differ and r.regulariser != "concat":
            note.append("hidden size ≠ embedding size (measured per space; not excluded)")
        if r.k_used < r.k_requested:
            note.append(f"k reduced to {r.k_used} (fewer points)")
        notes.append("; ".join(note))
    table["note"] = notes
    table["excluded"] = table["regulariser"] == "concat"  # as T&Š (§4.2); other size mismatches only noted
    return table


def table3(tokens: pd.DataFrame) -> pd.DataFrame:
    table = _over_seeds(tokens, ["token_prob", "prediction_prob"], {"n_correct": ("n_correct", "sum")})
    if not table.empty:
        table["ts_token_prob"] = [
            _num(paper.table3(r.corpus, r.attention, r.regulariser)) if r.layers == 1 else np.nan
            for r in table.itertuples()
        ]
    return table


# ---------------------------------------------------------------------------------------------- directions
def _holds(a: float, b: float, relation) -> bool | None:
    return None if pd.isna(a) or pd.isna(b) else bool(relation(a, b))


def _variants(table: pd.DataFrame, regulariser: str) -> list[pd.Series]:
    """The rows (one per variant) of ``regulariser`` in ``table``."""
    return [row for _, row in table[table["regulariser"] == regulariser].iterrows()]


def _pairs(group: pd.DataFrame, regularisers: tuple[str, ...], need_base: bool = False):
    """(regulariser, base row or None, other row) for every base variant × every variant of each regulariser."""
    bases = _variants(group, "base") or ([] if need_base else [None])
    for regulariser in regularisers:
        for other in _variants(group, regulariser):
            for base in bases:
                yield regulariser, base, other


def _direction(claim, key, measure, regulariser, comparison, ours, ts, relation, rows=(None, None)) -> dict:
    """One row of directions.csv. ``key`` = (dataset, corpus, attention, layers); ``ours``/``ts`` = (base-side,
    other-side) values; the claim holds where ``relation(base-side, other-side)`` (undetermined with a NaN);
    ``rows`` the two sides' table rows (their variants are named)."""
    dataset, corpus, attention, layers = key
    base_variant, variant = (None if r is None else r["variant"] for r in rows)
    return {
        "claim": claim,
        "dataset": dataset,
        "corpus": corpus,
        "attention": attention,
        "layers": int(layers),
        "measure": measure,
        "regulariser": regulariser,
        "variant": variant,
        "base_variant": base_variant,
        "comparison": comparison,
        "ours_base": ours[0],
        "ours_other": ours[1],
        "ours_holds": _holds(ours[0], ours[1], relation),
        "ts_base": ts[0],
        "ts_other": ts[1],
        "ts_holds": _holds(ts[0], ts[1], relation),
    }


def fragility_directions(table: pd.DataFrame, claim: str) -> list[dict]:
    """Tying and MLM drop more than base (Δ_reg < Δ_base) for Un. and Pm., ours and T&Š's, per variant."""
    rows = []
    if table.empty:
        return rows
    for key, group in table.groupby(["dataset", "corpus", "attention", "layers"], sort=False):
        for regulariser, base, other in _pairs(group, ("tying", "mlm")):
            for measure in ("un", "pm"):
                ours = [np.nan if r is None else r[f"{measure}_mean"] for r in (base, other)]
                ts = [np.nan if r is None else r[f"ts_{measure}"] for r in (base, other)]
                rows.append(
                    _direction(
                        claim,
                        key,
                        {"un": "Un.", "pm": "Pm."}[measure],
                        regulariser,
                        f"Δ {regulariser} < Δ base",
                        ours,
                        ts,
                        lambda base_, other_: other_ < base_,
                        (base, other),
                    )
                )
    return rows


def layers_base_directions(table: pd.DataFrame) -> list[dict]:
    """Base: Δ with L + 1 layers ≥ Δ with L layers (no larger drop), ours and T&Š's."""
    rows = []
    if table.empty:
        return rows
    base = table[table["regulariser"] == "base"]
    for (dataset, corpus, attention), group in base.groupby(["dataset", "corpus", "attention"], sort=False):
        group = group.sort_values("layers")
        for (_, shallow), (_, deep) in zip(group.iloc[:-1].iterrows(), group.iloc[1:].iterrows()):
            for measure in ("un", "pm"):
                shallow_deep = (shallow[f"{measure}_mean"], deep[f"{measure}_mean"])
                paper_values = (shallow[f"ts_{measure}"], deep[f"ts_{measure}"])
                rows.append(
                    _direction(
                        "layers_base",
                        (dataset, corpus, attention, deep["layers"]),
                        {"un": "Un.", "pm": "Pm."}[measure],
                        "base",
                        f"Δ base {int(deep['layers'])} layers ≥ Δ base {int(shallow['layers'])}",
                        shallow_deep,
                        paper_values,
                        lambda shallow_, deep_: deep_ >= shallow_,
                        (shallow, deep),
                    )
                )
    return rows


def mutual_information_directions(table: pd.DataFrame) -> list[dict]:
    """MI of base < MI of residual, tying and MLM (concat excluded), MF and RS, ours and T&Š's."""
    rows = []
    if table.empty:
        return rows
    usable = table[~table["excluded"]]
    for key, group in usable.groupby(["dataset", "corpus", "attention", "layers"], sort=False):
        for regulariser, base, other in _pairs(group, ("residual", "tying", "mlm")):
            for sample in ("mf", "rs"):
                ours = [np.nan if r is None else r[f"{sample}_mean"] for r in (base, other)]
                ts = [np.nan if r is None else r[f"ts_{sample}"] for r in (base, other)]
                rows.append(
                    _direction(
                        "mutual_information",
                        key,
                        sample.upper(),
                        regulariser,
                        f"MI base < MI {regulariser}",
                        ours,
                        ts,
                        lambda base_, other_: base_ < other_,
                        (base, other),
                    )
                )
    return rows


def token_probability_directions(table: pd.DataFrame) -> list[dict]:
    """Per-token probability of base > tying's and MLM's, ours and T&Š's."""
    rows = []
    if table.empty:
        return rows
    for key, group in table.groupby(["dataset", "corpus", "attention", "layers"], sort=False):
        for regulariser, base, other in _pairs(group, ("tying", "mlm")):
            ours = [np.nan if r is None else r["token_prob_mean"] for r in (base, other)]
            ts = [np.nan if r is None else r["ts_token_prob"] for r in (base, other)]
            rows.append(
                _direction(
                    "token_probability",
                    key,
                    "p̄(token)",
                    regulariser,
                    f"base > {regulariser}",
                    ours,
                    ts,
                    lambda base_, other_: base_ > other_,
                    (base, other),
                )
            )
    return rows


def verdict(values) -> str:
    """holds (every comparison), does not hold (none), mixed (some), n/a (nothing to compare)."""
    known = [bool(v) for v in values if v is not None and not pd.isna(v)]
    if not known:
        return "n/a"
    if all(known):
        return f"holds ({len(known)} of {len(known)})"
    if not any(known):
        return f"does not hold (0 of {len(known)})"
    return f"mixed ({sum(known)} of {len(known)})"


#: what identifies one comparison in T&Š's numbers: our variants of one regulariser (tying10/20/30) repeat it
PAPER_COMPARISON = ["dataset", "attention", "layers", "measure", "comparison"]


def verdicts(directions: pd.DataFrame) -> pd.DataFrame:
    """Per claim, how many comparisons hold: ours over our variants, T&Š's over their distinct comparisons."""
    rows = []
    for claim, text in CLAIMS.items():
        group = directions[directions["claim"] == claim] if len(directions) else directions
        rows.append(
            {
                "claim": claim,
                "statement": text,
                "ours": verdict(group["ours_holds"]) if len(group) else "n/a",
                "ts": verdict(group.drop_duplicates(PAPER_COMPARISON)["ts_holds"]) if len(group) else "n/a",
            }
        )
    return pd.DataFrame(rows)


def _directions_markdown(directions: pd.DataFrame, claims: list[str]) -> list[str]:
    lines = ["", "## Directions", "", "Computed from the numbers above, comparison by comparison (T&Š: the same"]
    lines += ["comparison on the paper's numbers for the variants we ran).", ""]
    summary = verdicts(directions)
    for claim in claims:
        row = summary[summary["claim"] == claim].iloc[0]
        lines.append(f"- **{row['statement']}** — ours: {row['ours']}; T&Š: {row['ts']}.")
    rows = directions[directions["claim"].isin(claims)] if len(directions) else directions
    if len(rows):
        lines += [
            "",
            "| claim | dataset | att. | layers | measure | comparison | variants (base vs other) | "
            "ours (base vs other) | holds | T&Š (base vs other) | holds |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        yes = lambda v: "–" if v is None or pd.isna(v) else ("yes" if v else "**no**")  # noqa: E731
        for r in rows.itertuples():
            digits = 3 if r.claim in ("mutual_information", "token_probability") else 1
            lines.append(
                f"| {r.claim} | {r.dataset} | {r.attention} | {r.layers} | {r.measure} | {r.comparison} | "
                f"{r.base_variant or '–'} vs {r.variant or '–'} | "
                f"{_fmt(r.ours_base, digits)} vs {_fmt(r.ours_other, digits)} | {yes(r.ours_holds)} | "
                f"{_fmt(r.ts_base, digits)} vs {_fmt(r.ts_other, digits)} | {yes(r.ts_holds)} |"
            )
    return lines


# ---------------------------------------------------------------------------------------------- markdown
def _header(title: str, provenance: str, text: str) -> list[str]:
    return [f"# {title}", "", text, "", f"T&Š: {provenance}.", ""]


def table1_markdown(table: pd.DataFrame, directions: pd.DataFrame, f1: str) -> str:
    lines = _header(
        "Tutek & Šnajder (2020) Table 1: attention fragility, ours vs the paper",
        paper.TABLE1_PROVENANCE,
        f"Tr.: test F1 ×100 with the trained attention ({f1} F1{NO_POSITIVE if f1 == 'positive' else ''}); "
        "Un./Pm.: ΔF1 = modified − trained in F1 points "
        "when attention is uniform over the non-marker tokens / randomly permuted among them (Pm.: mean over "
        "permutations). 1-layer models; mean ± std over seeds (n). T&Š: mean of five runs.",
    )
    lines += [
        "| dataset | att. | regulariser | variant | n | Tr. | Un. | Pm. | T&Š Tr. | T&Š Un. | T&Š Pm. |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table.itertuples():
        lines.append(
            f"| {r.dataset} | {r.attention} | {r.regulariser} | {r.variant} | {r.n_seeds} | "
            f"{_tr_cell(r, f1)} | {_cell(r.un_mean, r.un_std)} | {_cell(r.pm_mean, r.pm_std)} | "
            f"{_fmt(r.ts_tr)} | {_fmt(r.ts_un)} | {_fmt(r.ts_pm)} |"
        )
    return "\n".join(lines + _directions_markdown(directions, ["fragility"])) + "\n"


def table2_markdown(table: pd.DataFrame, directions: pd.DataFrame) -> str:
    lines = _header(
        "Tutek & Šnajder (2020) Table 2: mutual information between e_t and h_t, ours vs the paper",
        paper.TABLE2_PROVENANCE,
        "MI (nats) between MiniBatchKMeans cluster ids of the input embeddings and of the hidden states of "
        "occurrences of the 1k most frequent (MF) or sampled (unigram^0.75, RS) train words; bounded by ln k. "
        "Concat is excluded as in the paper (its hidden states are larger than the embeddings). Mean ± std "
        "over seeds (n).",
    )
    lines += [
        "| dataset | att. | layers | regulariser | variant | n | MF | RS | k used | ln k | T&Š MF | T&Š RS | T&Š ln k "
        "| note |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table.itertuples():
        mf, rs, note = _cell(r.mf_mean, r.mf_std, 3), _cell(r.rs_mean, r.rs_std, 3), r.note
        if r.excluded:  # T&Š do not report it; our number stays in the note (and the CSV)
            note = f"{note} (ours: MF {mf}, RS {rs})"
            mf = rs = EXCLUDED
        lines.append(
            f"| {r.dataset} | {r.attention} | {r.layers} | {r.regulariser} | {r.variant} | {r.n_seeds} | {mf} | {rs} | "
            f"{r.k_used} | {_fmt(r.ln_k, 3)} | {_fmt(r.ts_mf, 3)} | {_fmt(r.ts_rs, 3)} | {_fmt(r.ts_ln_k, 3)} | "
            f"{note} |"
        )
    return "\n".join(lines + _directions_markdown(directions, ["mutual_information"])) + "\n"


def table3_markdown(table: pd.DataFrame, directions: pd.DataFrame) -> str:
    lines = _header(
        "Tutek & Šnajder (2020) Table 3: average per-token prediction probability, ours vs the paper",
        paper.TABLE3_PROVENANCE,
        "softmax(W_d h_t + b_d) of the predicted class (Eq. 9: the prediction if all attention were on token t), "
        "averaged over the non-marker tokens of each instance, then over correctly predicted test instances; "
        "mean ± std over seeds (n). Lower is better. p(ŷ): the models' own probability of the predicted class, "
        "averaged over the same correctly predicted instances.",
    )
    lines += [
        "| dataset | att. | layers | regulariser | variant | n | per-token p | p(ŷ) | correct instances | T&Š |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table.itertuples():
        lines.append(
            f"| {r.dataset} | {r.attention} | {r.layers} | {r.regulariser} | {r.variant} | {r.n_seeds} | "
            f"{_cell(r.token_prob_mean, r.token_prob_std, 3)} | {_fmt(r.prediction_prob_mean, 3)} | {r.n_correct} | "
            f"{_fmt(r.ts_token_prob, 3)} |"
        )
    return "\n".join(lines + _directions_markdown(directions, ["token_probability"])) + "\n"


def table6_markdown(table: pd.DataFrame, directions: pd.DataFrame, f1: str) -> str:
    lines = _header(
        "Tutek & Šnajder (2020) Table 6 (App. B): fragility by number of LSTM layers, ours vs the paper",
        paper.TABLE6_PROVENANCE,
        f"As Table 1 ({f1} F1{NO_POSITIVE if f1 == 'positive' else ''}), for 1–3 layer BiLSTMs; mean ± std over "
        "seeds (n).",
    )
    lines += [
        "| dataset | att. | layers | regulariser | variant | n | Tr. | Un. | Pm. | T&Š Tr. | T&Š Un. | T&Š Pm. |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table.itertuples():
        lines.append(
            f"| {r.dataset} | {r.attention} | {r.layers} | {r.regulariser} | {r.variant} | {r.n_seeds} | "
            f"{_tr_cell(r, f1)} | {_cell(r.un_mean, r.un_std)} | {_cell(r.pm_mean, r.pm_std)} | "
            f"{_fmt(r.ts_tr)} | {_fmt(r.ts_un)} | {_fmt(r.ts_pm)} |"
        )
    return "\n".join(lines + _directions_markdown(directions, ["layers_base", "layers_fragility"])) + "\n"


def paper_directions() -> pd.DataFrame:
    """The same comparisons over T&Š's complete tables (every corpus and attention they report)."""

    def rows(table: dict, columns: tuple[str, ...], **fixed) -> list[dict]:
        out = []
        for corpus, by_attention in table.items():
            for attention, by_regulariser in by_attention.items():
                for regulariser, values in by_regulariser.items():
                    values = values if isinstance(values, tuple) else (values,)
                    cells = {}
                    for column, value in zip(columns, values):
                        cells[f"{column}_mean"] = cells[f"ts_{column}"] = value
                    out.append(
                        {
                            "dataset": corpus,
                            "corpus": corpus,
                            "attention": attention,
                            "layers": 1,
                            "regulariser": regulariser,
                            "variant": regulariser,
                        }
                        | fixed
                        | cells
                    )
        return out

    t1 = pd.DataFrame(rows(paper.TABLE1, ("tr", "un", "pm")))
    t2 = pd.DataFrame(rows({c: {"additive": v} for c, v in paper.TABLE2.items()}, ("mf", "rs"), excluded=False))
    t3 = pd.DataFrame(rows(paper.TABLE3, ("token_prob",)))
    t6 = pd.DataFrame(
        [
            r | {"layers": layers}
            for corpus, by_layers in paper.TABLE6.items()
            for layers, table in by_layers.items()
            for r in rows({corpus: {"additive": table}}, ("tr", "un", "pm"))
        ]
    )
    found = fragility_directions(t1, "fragility") + mutual_information_directions(t2)
    found += token_probability_directions(t3) + fragility_directions(t6, "layers_fragility")
    found += layers_base_directions(t6)
    return pd.DataFrame(found)


def directions_markdown(directions: pd.DataFrame) -> str:
    lines = ["# Do Tutek & Šnajder's claims hold in our runs?"]
    lines += _directions_markdown(directions, list(CLAIMS))
    full = verdicts(paper_directions())
    lines += ["", "## The same claims over T&Š's complete tables", ""]
    lines += ["All their corpora (incl. Anemia) and attentions; computed from the numbers in the paper.", ""]
    lines += [f"- {r.statement} — T&Š: {r.ts}." for r in full.itertuples()]
    return "\n".join(lines) + "\n"


def _attach(table: pd.DataFrame, directions: list[dict], columns: dict[str, str]) -> pd.DataFrame:
    """Per variant row, whether its comparison with base holds (ours, T&Š), as extra CSV columns (with several
    base variants, the last comparison's)."""
    if table.empty:
        return table
    index = {(d["dataset"], d["attention"], d["layers"], d["variant"], d["measure"]): d for d in directions}
    table = table.copy()
    for measure, column in columns.items():
        found = [index.get((r.dataset, r.attention, r.layers, r.variant, measure), {}) for r in table.itertuples()]
        table[f"direction_{column}"] = [d.get("ours_holds") for d in found]
        table[f"ts_direction_{column}"] = [d.get("ts_holds") for d in found]
    return table


def write_tables(runs, out_dir: str | Path, options: dict | None = None) -> dict[str, pd.DataFrame]:
    """All T&Š tables (CSV + markdown) for the run records ``runs`` (see :mod:`attnaudit.tutek_snajder.runs`)."""
    opts = resolve(options)
    f1 = opts["tables"]["f1"]
    runs = parse_runs(runs)
    out = Path(out_dir)
    fragility = fragility_frame(runs, f1)
    t1, t6 = table1(fragility), table6(fragility)
    t2, t3 = table2(mutual_information_frame(runs)), table3(token_probability_frame(runs))
    d1, d6 = fragility_directions(t1, "fragility"), fragility_directions(t6, "layers_fragility")
    d6 += layers_base_directions(t6)
    d2, d3 = mutual_information_directions(t2), token_probability_directions(t3)
    directions = pd.DataFrame(d1 + d2 + d3 + d6)
    if directions.empty:
        directions = pd.DataFrame(columns=["claim", "dataset", "attention", "layers", "measure", "comparison"])
    fragility_columns = {"Un.": "un", "Pm.": "pm"}
    tables = {
        "table1_fragility": _attach(t1, d1, fragility_columns),
        "table2_mutual_information": _attach(t2, d2, {"MF": "mf", "RS": "rs"}),
        "table3_token_probability": _attach(t3, d3, {"p̄(token)": "token_prob"}),
        "table6_layers": _attach(t6, [d for d in d6 if d["claim"] == "layers_fragility"], fragility_columns),
        "directions": directions,
    }
    for name, frame in tables.items():
        write_text(out / f"{name}.csv", frame.to_csv(index=False, float_format="%.6g"))
    write_text(out / "table1_fragility.md", table1_markdown(t1, directions, f1))
    write_text(out / "table2_mutual_information.md", table2_markdown(t2, directions))
    write_text(out / "table3_token_probability.md", table3_markdown(t3, directions))
    write_text(out / "table6_layers.md", table6_markdown(t6, directions, f1))
    write_text(out / "directions.md", directions_markdown(directions))
    log.info("T&Š tables of %d runs → %s", len(runs), out)
    return tables
