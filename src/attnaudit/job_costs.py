"""Summarise Snakemake ``benchmark:`` files per rule: jobs, wall seconds (sum and max), CPU seconds (the
``cpu_time`` column: robust to a busy machine) and peak RSS.

``python -m attnaudit job-costs [benchmarks/]`` (alias ``benchmarks``) prints one line per rule and a total;
benchmark paths are
``benchmarks/{rule}/...tsv`` by convention, so the first path component names the rule.
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
    p.set_defaults(func=lambda a: print(summarise(a.root).to_string()))
