"""Summarise Snakemake ``benchmark:`` files per rule: jobs, wall seconds (sum and max), CPU seconds (robust to a
busy machine) and peak RSS.

A job's CPU seconds and peak RSS are read from the last line of its log (``logs/{rule}/….log`` beside
``benchmarks/``), where every ``python -m attnaudit`` command writes what its process used
(:mod:`attnaudit.process_usage`): Snakemake samples a job every 30 s after its first 15 and misses the rest — a third
of the CPU of the default study's jobs in its ``cpu_time`` column — and any peak between two samples. A job whose log
has no such line (an older run, a job that was killed, a rule that runs no attnaudit command) keeps the benchmark
file's figures, and the summary counts those jobs (``sampled_jobs``).

``python -m attnaudit job-costs [benchmarks/]`` (alias ``benchmarks``) prints one line per rule and a total;
``--per-model`` prints one line per dataset × model instead: the CPU seconds of each rule that ran on the model
(training, importance, audits) and their sum. Benchmark paths are ``benchmarks/{rule}/...tsv`` by convention, so
the first path component names the rule, and per-model jobs are ``benchmarks/{rule}/{dataset}/{model}[/…].tsv``;
a job's benchmark file mirrors its log (``logs/{rule}/….log``).

``--dag SUMMARY --slots N …`` predicts the wall time of the same jobs on N job slots (``--cores N`` of one-thread
jobs, or N Slurm jobs at a time): the workflow's DAG comes from ``snakemake --detailed-summary`` (each output's
rule, log and inputs), each job's duration from its benchmark file, and the jobs are list-scheduled as they become
ready, the one with the longest chain of work still behind it first. It also prints the critical path, the floor
no number of slots goes below. Job times are taken as measured, so the prediction assumes a job runs as fast beside
N − 1 others as it did in the measured run.
"""

from __future__ import annotations

import csv
import graphlib
import heapq
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from attnaudit import AttnauditError
from attnaudit.process_usage import read_usage


def collect(root: str | Path, logs: str | Path | None = None) -> pd.DataFrame:
    """One row per Snakemake benchmark file under ``root`` (its last repeat), its CPU seconds and peak RSS from the
    job's log under ``logs`` (default: ``logs/`` beside ``root``) where the log says them; a path that is not a
    folder of them, or a file that is not one, is named (a typo used to report 0 jobs)."""
    rows = []
    root = Path(root)
    if not root.is_dir():
        raise AttnauditError(f"{root}: not a folder (expected the workflow's benchmarks/ folder)")
    logs = root.parent / "logs" if logs is None else Path(logs)
    for path in sorted(root.rglob("*.tsv")):
        try:
            # the last repeat; Snakemake writes "-" for what it could not measure (a job too short to sample)
            last = pd.read_csv(path, sep="\t", na_values=["-"], encoding="utf-8").iloc[-1]
            row = {"seconds": float(last["s"]), "max_rss_mb": float(last["max_rss"])}
            row["cpu_seconds"] = float(last["cpu_time"]) if "cpu_time" in last else float("nan")
        except (pd.errors.EmptyDataError, pd.errors.ParserError, KeyError, IndexError, ValueError) as err:
            raise AttnauditError(
                f"{path}: not a Snakemake benchmark file with rows (s, max_rss, …): {type(err).__name__}: {err}"
            ) from None
        job = path.relative_to(root)
        usage = read_usage((logs / job).with_suffix(".log"))
        row["sampled"] = usage is None
        if usage is not None:
            row.update(cpu_seconds=usage["cpu_seconds"], max_rss_mb=usage["peak_rss_mb"])
        rows.append({"rule": job.parts[0], "job": str(job), **row})
    if not rows:
        raise AttnauditError(
            f"{root}: no benchmark files (*.tsv) below it (expected the workflow's benchmarks/ folder)"
        )
    return pd.DataFrame(rows, columns=["rule", "job", "seconds", "cpu_seconds", "max_rss_mb", "sampled"])


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
        sampled_jobs=("sampled", "sum"),
    )
    total = pd.DataFrame(
        [
            {
                "jobs": len(jobs),
                "seconds_sum": jobs["seconds"].sum(),
                "seconds_max": jobs["seconds"].max(),
                "cpu_seconds_sum": jobs["cpu_seconds"].sum(),
                "peak_rss_mb": jobs["max_rss_mb"].max(),
                "sampled_jobs": jobs["sampled"].sum(),
            }
        ],
        index=["TOTAL"],
    )
    return pd.concat([per_rule, total]).round(1)


@dataclass
class Job:
    """One job of the DAG: its rule, the files it writes and reads, its log(s), its shell command, its benchmark
    file (relative to the benchmarks folder) and the wall seconds measured there."""

    rule: str
    logs: list[str]
    outputs: list[str] = field(default_factory=list)
    inputs: set[str] = field(default_factory=set)
    command: str = ""
    benchmark: str = ""
    seconds: float = 0.0


def read_summary(summary) -> dict[tuple[str, str], Job]:
    """The jobs of a ``snakemake --detailed-summary`` table (a path, or an open file), by (rule, logs)."""
    if isinstance(summary, str | Path):
        with open(summary, newline="", encoding="utf-8") as handle:
            return read_summary(handle)
    csv.field_size_limit(sys.maxsize)  # a gather's input list is one field
    reader = csv.DictReader(summary, delimiter="\t")
    needed = {"output_file", "rule", "log-file(s)", "input-file(s)"}
    if not needed <= set(reader.fieldnames or ()):
        raise AttnauditError(
            f"{getattr(summary, 'name', 'the DAG summary')}: not the output of `snakemake --detailed-summary` "
            f"(expected the columns {sorted(needed)}, found {reader.fieldnames or 'nothing'})"
        )
    jobs: dict[tuple[str, str], Job] = {}
    for row in reader:
        logs = [log for log in row["log-file(s)"].split(",") if log]
        key = (row["rule"], ",".join(logs) or row["output_file"])  # every job of this workflow writes a log
        job = jobs.setdefault(key, Job(row["rule"], logs, command=row.get("shellcmd") or ""))
        job.outputs.append(row["output_file"])
        job.inputs |= {path for path in row["input-file(s)"].split(",") if path}
    return jobs


def read_dag(summary, benchmarks: str | Path) -> dict[tuple[str, str], Job]:
    """The jobs of a ``snakemake --detailed-summary`` table (:func:`read_summary`) with the wall seconds of each
    job's benchmark file under ``benchmarks``: ``logs/{rule}/….log`` → ``{benchmarks}/{rule}/….tsv``."""
    jobs = read_summary(summary)
    seconds = collect(benchmarks).set_index("job")["seconds"].to_dict()
    unmeasured = []
    for job in jobs.values():
        mirrored = [str(Path(*Path(log).parts[1:]).with_suffix(".tsv")) for log in job.logs if log.startswith("logs/")]
        job.benchmark = next((path for path in mirrored if path in seconds), "")
        if job.benchmark:
            job.seconds = seconds[job.benchmark]
        else:
            unmeasured.append(job.logs[0] if job.logs else job.outputs[0])
    if unmeasured:
        raise AttnauditError(
            f"{len(unmeasured)} of the DAG's {len(jobs)} jobs have no benchmark file in {benchmarks} "
            f"(e.g. for {', '.join(unmeasured[:3])}): predict from the benchmarks of a finished run of the same DAG"
        )
    return jobs


@dataclass
class Schedule:
    """A DAG's jobs with their parents and children, and each job's seconds plus the longest chain of work after it."""

    jobs: dict
    parents: dict
    children: dict
    remaining: dict

    @classmethod
    def of(cls, jobs: dict) -> Schedule:
        producer = {path: key for key, job in jobs.items() for path in job.outputs}
        parents = {key: {producer[p] for p in job.inputs if p in producer} - {key} for key, job in jobs.items()}
        children: dict = {key: [] for key in jobs}
        for key, keys in parents.items():
            for parent in keys:
                children[parent].append(key)
        try:
            order = list(graphlib.TopologicalSorter(parents).static_order())
        except graphlib.CycleError as err:  # Snakemake never writes one
            raise AttnauditError(f"the DAG summary has a cycle: {err.args[1]}") from None
        remaining: dict = {}
        for key in reversed(order):
            remaining[key] = jobs[key].seconds + max((remaining[c] for c in children[key]), default=0.0)
        return cls(jobs, parents, children, remaining)

    def critical_path(self) -> list:
        """The jobs of the longest chain, first to last."""
        path = [max(self.remaining, key=self.remaining.get)] if self.jobs else []
        while path and self.children[path[-1]]:
            path.append(max(self.children[path[-1]], key=self.remaining.get))
        return path

    def wall_seconds(self, slots: int) -> float:
        """List scheduling on ``slots`` job slots, the ready job with the longest chain of work behind it first (on
        the default study's measured runs, within 0.2–0.6 min of Snakemake's own schedule on two cores)."""
        waiting = {key: len(parents) for key, parents in self.parents.items()}
        ready = [(-self.remaining[key], key) for key, n in waiting.items() if n == 0]
        heapq.heapify(ready)
        running: list = []
        now = 0.0
        while ready or running:
            while ready and len(running) < slots:
                _, key = heapq.heappop(ready)
                heapq.heappush(running, (now + self.jobs[key].seconds, key))
            now, key = heapq.heappop(running)
            for child in self.children[key]:
                waiting[child] -= 1
                if waiting[child] == 0:
                    heapq.heappush(ready, (-self.remaining[child], child))
        return now


def predict_slots(summary, benchmarks: str | Path, slots: list[int]) -> tuple[pd.DataFrame, list[str]]:
    """Predicted wall minutes per number of job slots, next to the two floors (work ÷ slots, the critical path),
    and the critical path's jobs as ``rule: log``."""
    if any(n < 1 for n in slots):
        raise AttnauditError(f"--slots {' '.join(map(str, slots))}: a number of job slots is at least 1")
    jobs = read_dag(summary, benchmarks)
    schedule = Schedule.of(jobs)
    path = schedule.critical_path()
    work = sum(job.seconds for job in jobs.values())
    table = pd.DataFrame(
        {
            "predicted_wall_min": [schedule.wall_seconds(n) / 60 for n in slots],
            "work_per_slot_min": [work / n / 60 for n in slots],
        },
        index=pd.Index(slots, name="slots"),
    ).assign(critical_path_min=schedule.remaining[path[0]] / 60 if path else 0.0)
    return table, [f"{jobs[key].rule}: {jobs[key].logs[0] if jobs[key].logs else key[1]}" for key in path]


def print_costs(args) -> None:
    if args.slots:
        if not args.dag:
            raise AttnauditError("--slots needs --dag: the output of `snakemake --detailed-summary` (a file, or -)")
        table, path = predict_slots(sys.stdin if args.dag == "-" else args.dag, args.root, args.slots)
        print(table.round(1).to_string())
        print("critical path: " + " → ".join(path))
    else:
        if args.dag:
            raise AttnauditError("--dag needs --slots: the numbers of job slots to predict the run's wall time on")
        print((per_model if args.per_model else summarise)(args.root).to_string())


def add_cli(subparsers) -> None:
    p = subparsers.add_parser(
        "job-costs",
        aliases=["benchmarks"],
        help="per-rule wall and CPU time and peak RSS from Snakemake benchmark files",
    )
    p.add_argument("root", nargs="?", default="benchmarks")
    p.add_argument("--per-model", action="store_true", help="CPU seconds per dataset × model and rule")
    p.add_argument(
        "--slots",
        type=int,
        nargs="+",
        metavar="N",
        help="predict the run's wall minutes on N job slots (cores of one-thread jobs, or Slurm jobs at a time)",
    )
    p.add_argument("--dag", metavar="SUMMARY", help="`snakemake --detailed-summary` of the run (file or -)")
    p.set_defaults(func=print_costs)
