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


def collect(root: str | Path) -> pd.DataFrame:
    rows = []
    root = Path(root)
    for path in sorted(root.rglob("*.tsv")):
        bench = pd.read_csv(path, sep="\t")
        rows.append(
            {
                "rule": path.relative_to(root).parts[0],
                "job": str(path.relative_to(root)),
                "seconds": float(bench["s"].iloc[-1]),
                "cpu_seconds": float(bench["cpu_time"].iloc[-1]) if "cpu_time" in bench else float("nan"),
                "max_rss_mb": float(bench["max_rss"].iloc[-1]),
            }
        )
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
