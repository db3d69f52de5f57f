"""``python -m attnaudit results``: the README's results section, regenerated from ``results/tables`` (never typed by
hand). Prints markdown, or with ``--readme README.md`` replaces the block between ``<!-- results:start -->`` and
``<!-- results:end -->`` in place (``--block NAME``: between ``<!-- NAME:start -->`` and ``<!-- NAME:end -->``, for
another experiment's results, e.g. ``--papers jain_wallace`` of ``configs/jain_wallace_laptop.yaml``).

Sections: J&W per model (τ over both predicted classes, weighted by instances; permutation; ε-max JSD), B&F's AOPC
ranking of one model, and the W&P and T&Š tables as their stages wrote them (markdown files, copied).
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from attnaudit import AttnauditError
from attnaudit.io import write_text

PAPERS = ("jain_wallace", "bastings_filippova", "wiegreffe_pinter", "tutek_snajder")


def _weighted(frame: pd.DataFrame, value: str, keys: list[str]) -> pd.Series:
    frame = frame.assign(_w=frame[value] * frame["n"])
    grouped = frame.groupby(keys, sort=False)
    return grouped["_w"].sum() / grouped["n"].sum()


def jain_wallace_section(tables: Path, metrics_root: Path) -> list[str]:
    corr = pd.read_csv(tables / "correlation.csv")
    perm = pd.read_csv(tables / "permutation.csv")
    adv = pd.read_csv(tables / "adversarial.csv")
    keys = ["dataset", "model"]
    tau = {pair: _weighted(corr[corr["pair"] == pair], "tau_mean", keys) for pair in corr["pair"].unique()}
    small = _weighted(perm, "small_change_fraction", keys)
    jsd = _weighted(adv, "eps_max_jsd_mean", keys)
    high = _weighted(adv, "high_jsd_fraction", keys)
    lines = [
        "| dataset | model | test macro-F1 | τ_g | τ_loo | τ(grad, LOO) | median Δŷ < 0.05 (permutation) | "
        "mean ε-max JSD | ε-max JSD > 0.5 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for dataset, model in small.index:
        metrics = metrics_root / dataset / model / "metrics.json"
        f1 = pd.read_json(metrics, typ="series")["test"]["macro_f1"] if metrics.exists() else float("nan")
        cell = {pair: f"{tau[pair].get((dataset, model), float('nan')):.3f}" for pair in tau}
        cell = {pair: cell.get(pair, "–") for pair in ("attention~gradient", "attention~loo", "gradient~loo")}
        lines.append(
            f"| {dataset} | {model} | {f1:.3f} | {cell['attention~gradient']} | {cell['attention~loo']} | "
            f"{cell['gradient~loo']} | {100 * small[(dataset, model)]:.0f} % | {jsd[(dataset, model)]:.3f} | "
            f"{100 * high[(dataset, model)]:.0f} % |"
        )
    return lines


def bastings_filippova_section(tables: Path, model: str) -> list[str]:
    """B&F's AOPC ranking of ``model``; a missing table or a model it does not hold stops (a README section would
    otherwise lose its table without a word)."""
    faith = pd.read_csv(required(tables / "faithfulness.csv", "bastings_filippova"))
    aopc = faith[(faith["k"] == "aopc") & (faith["variant"] == "deletion") & (faith["ranking"] == "signed")]
    if model not in set(aopc["model"]):
        raise AttnauditError(
            f"--model {model!r}: no B&F AOPC rows in {tables}/faithfulness.csv; "
            f"its models are {sorted(set(aopc['model']))}"
        )
    lines = []
    for (dataset, name), group in aopc.groupby(["dataset", "model"], sort=False):
        if name != model:
            continue
        ranked = group.sort_values("comprehensiveness", ascending=False).reset_index(drop=True)
        lines += [f"AOPC comprehensiveness, {dataset} / {name} (tokens deleted, signed ranking):", ""]
        lines += ["| rank | method | AOPC comprehensiveness | AOPC sufficiency |", "|---|---|---|---|"]
        lines += [
            f"| {i + 1} | {r.method} | {r.comprehensiveness:.3f} | {r.sufficiency:.3f} |" for i, r in ranked.iterrows()
        ]
    return lines


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").rstrip().splitlines()


def required(path: Path, paper: str) -> Path:
    """``path``, a table of ``paper`` the README block shows; a missing one stops the command (the section would
    otherwise lose its table, or be replaced by a note that it is missing)."""
    if not path.exists():
        raise AttnauditError(
            f"{path} is missing: run the pipeline first, or leave {paper} out (--papers without {paper})"
        )
    return path


def copied(path: Path, paper: str) -> list[str]:
    """A stage's markdown table (:func:`required`), its title demoted below the README's headings."""
    demoted = (
        re.sub(r"^(#+) ", lambda m: "#" * min(6, len(m.group(1)) + 4) + " ", line)
        for line in lines(required(path, paper))
    )
    return list(demoted)


def summary(
    results: str | Path = "results",
    model: str = "lstm-additive-base-s0",
    papers: tuple[str, ...] = PAPERS,
    jw_tables: tuple[str, ...] = ("table1",),
) -> str:
    root = Path(results)
    tables = root / "tables"
    if not (tables / "jain_wallace" / "correlation.csv").exists():
        raise AttnauditError(f"{tables}/jain_wallace/correlation.csv is missing: run the pipeline first")
    lines = []
    if "jain_wallace" in papers:
        lines += ["### Jain & Wallace", "", *jain_wallace_section(tables / "jain_wallace", root / "models"), ""]
        for name in jw_tables:
            lines += [*copied(tables / "jain_wallace" / f"{name}.md", "jain_wallace"), ""]
    if "bastings_filippova" in papers:
        lines += ["### Bastings & Filippova", "", *bastings_filippova_section(tables / "bastings_filippova", model)]
        lines += [""]
    for title, paper, names in (
        ("Wiegreffe & Pinter", "wiegreffe_pinter", ["table2_uniform", "seed_variance", "diagnostic_mlp"]),
        (
            "Tutek & Šnajder",
            "tutek_snajder",
            [
                "table1_fragility",
                "table2_mutual_information",
                "table3_token_probability",
                "table6_layers",
                "summary",
                "directions",
            ],
        ),
    ):
        if paper not in papers:
            continue
        lines += [f"### {title}", ""]
        for name in names:
            lines += [*copied(tables / paper / f"{name}.md", paper), ""]
    return "\n".join(lines).rstrip() + "\n"


def update_readme(readme: str | Path, text: str, block: str = "results") -> None:
    path = Path(readme)
    content = path.read_text(encoding="utf-8")
    start, end = f"<!-- {block}:start -->", f"<!-- {block}:end -->"
    if start not in content or end not in content:
        raise AttnauditError(f"{readme} has no {start} … {end} block to replace")
    if content.count(start) > 1 or content.count(end) > 1 or content.index(end) < content.index(start):
        raise AttnauditError(f"{readme}: expected one {start} followed by one {end}")
    head, rest = content.split(start, 1)
    _, tail = rest.split(end, 1)
    write_text(path, f"{head}{start}\n{text}{end}{tail}")


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("results", help="the README's results section from results/tables (markdown)")
    p.add_argument("--results", default="results")
    p.add_argument("--model", default="lstm-additive-base-s0", help="the model of the B&F AOPC ranking")
    p.add_argument("--readme", help="replace the results block of this README instead of printing")
    p.add_argument("--block", default="results", help="the README block to replace: <!-- BLOCK:start --> …")
    p.add_argument("--papers", nargs="+", choices=PAPERS, default=list(PAPERS), help="the sections to write")
    p.add_argument("--jw-tables", nargs="*", default=["table1"], help="J&W tables copied (table1, table2, seeds)")

    def _run(a):
        text = summary(a.results, a.model, tuple(a.papers), tuple(a.jw_tables))
        if a.readme:
            update_readme(a.readme, text, a.block)
        else:
            print(text, end="")

    p.set_defaults(func=_run)
