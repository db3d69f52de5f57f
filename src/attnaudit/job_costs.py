"""Summarise Snakemake ``benchmark:`` files per rule: jobs, wall seconds (sum and max), CPU seconds (the
``cpu_time`` column: robust to a busy machine) and peak RSS.

``python -m attnaudit job-costs [benchmarks/]`` (alias ``benchmarks``) prints one line per rule and a total;
``--per-model`` prints one line per dataset × model instead: the CPU seconds of each rule that ran on the model
(training, importance, audits) and their sum. Benchmark paths are ``benchmarks/{rule}/...tsv`` by convention, so
the first path component names the rule, and per-model jobs are ``benchmarks/{rule}/{dataset}/{model}[/…].tsv``.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from attnaudit import AttnauditError


def collect(root: str | Path) -> pd.DataFrame:
    """One row per Snakemake benchmark file under ``root`` (its last repeat); a path that is not a folder of
    them, or a file that is not one, is named (a typo used to report 0 jobs)."""
    rows = []
    root = Path(root)
    if not root.is_dir():
        raise AttnauditError(f"{root}: not a folder (expected the workflow's benchmarks/ folder)")
    for path in sorted(root.rglob("*.tsv")):
        try:
            last = pd.read_csv(path, sep="\t").iloc[-1]  # the last repeat
            row = {"seconds": float(last["s"]), "max_rss_mb": float(last["max_rss"])}
        except (pd.errors.EmptyDataError, pd.errors.ParserError, KeyError, IndexError) as err:
            raise AttnauditError(
                f"{path}: not a Snakemake benchmark file with rows (s, max_rss, …): {type(err).__name__}: {err}"
            ) from None
        row["cpu_seconds"] = float(last["cpu_time"]) if "cpu_time" in last else float("nan")
        rows.append({"rule": path.relative_to(root).parts[0], "job": str(path.relative_to(root)), **row})
    return pd.DataFrame(rows, columns=["rule", "job", "seconds", "cpu_seconds", "max_rss_mb"])


def per_model(root: str | Path) -> pd.DataFrame:
    """CPU seconds per dataset × model (rows) and rule (columns), with the wall and CPU totals per model."""
    jobs = collect(root)
    parts = jobs["job"].str.split("/")
    jobs = jobs[parts.str.len() >= 3].assign(dataset=parts.str[1], model=parts.str[2].str.removesuffix(".tsv"))
    table = jobs.pivot_table(index=["dataset", "model"], columns="rule", values="cpu_seconds", aggfunc="sum")
    totals = jobs.groupby(["dataset", "model"]).agg(
        cpu_seconds_sum=("cpu_seconds", "sum"), seconds_sum=("seconds", "sum")
    )
    return table.join(totals).fillna(0.0).round(1)


def summarise(root: str | Path) -> pd.DataFrame:
    jobs = collect(root)
    per_rule = jobs.groupby("rule", sort=False).agg(
        jobs=("job", "size"),
        seconds_sum=("seconds", "sum"),
        seconds_max=("seconds", "max"),
        cpu_seconds_sum=("cpu_seconds", "sum"),
        peak_rss_mb=("max_rss_mb", "max"),
    )
    total = pd.DataFrame(
        [
            {
                "jobs": len(jobs),
                "seconds_sum": jobs["seconds"].sum(),
                "seconds_max": jobs["seconds"].max(),
                "cpu_seconds_sum": jobs["cpu_seconds"].sum(),
                "peak_rss_mb": jobs["max_rss_mb"].max(),
            }
        ],
        index=["TOTAL"],
    )
    return pd.concat([per_rule, total]).round(1)


def add_cli(subparsers) -> None:
    p = subparsers.add_parser(
        "job-costs",
        aliases=["benchmarks"],
        help="per-rule wall and CPU time and peak RSS from Snakemake benchmark files",
    )
    p.add_argument("root", nargs="?", default="benchmarks")
    p.add_argument("--per-model", action="store_true", help="CPU seconds per dataset × model and rule")
    p.set_defaults(func=lambda a: print((per_model if a.per_model else summarise)(a.root).to_string()))
