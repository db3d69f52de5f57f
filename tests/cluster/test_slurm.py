"""profiles/slurm + Snakemake's slurm executor on a real one-node Slurm cluster (fixture in conftest.py).

    pytest -m slurm tests/cluster -s      # root; installs slurm/munge/mariadb with apt-get if missing

The runs use the profile as a user would, plus command-line overrides only (the cluster's partition
and account, a short first status poll, threads capped at the node's CPUs): see slurm_overrides().
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml
from conftest import last_epoch_pair_config

from . import slurm

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "profiles" / "slurm"
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
# Bounds for a hang (pitfall 1). A job costs 5-30 s here plus polling (pitfall 7); the pipeline's
# tests/config.yaml made ~50 jobs and ~10 min via Slurm on 2 busy cores.
TOY_TIMEOUT = 300
SLURM_TARGETS = [
    *(
        f"results/audits/sst_small/lstm-additive-base-s0/jw_{a}.parquet"
        for a in ("correlation", "permutation", "adversarial")
    ),
    "results/models/sst_small/lstm25-additive-tying20-s0/metrics.json",
    "results/models/planted/mlp-guided-base-s0/metrics.json",
]
PIPELINE_TIMEOUT = int(os.environ.get("ATTNAUDIT_SLURM_TIMEOUT", "3600"))


# ---- running Snakemake ------------------------------------------------------------------------------


def load_profile(directory: Path) -> dict:
    for name in ("profile.yaml", "config.yaml"):  # Snakemake's lookup order
        if (directory / name).is_file():
            return yaml.safe_load((directory / name).read_text()) or {}
    return {}


def effective_profile(profiles: list[Path]) -> dict:
    """What Snakemake uses: a later profile (the workflow profile last) replaces earlier keys whole."""
    merged: dict = {}
    for p in profiles:
        merged.update(load_profile(p))
    return merged


def as_cli(mapping: dict) -> list[str]:
    # like Snakemake's profile parser: a string that looks numeric stays a string
    def fmt(v):
        if isinstance(v, str):
            with_repr = any(_parses(t, v) for t in (int, float))
            return repr(v) if with_repr else v
        return v

    return [f"{k}={fmt(v)}" for k, v in mapping.items()]


def _parses(type_, value) -> bool:
    try:
        type_(value)
    except ValueError:
        return False
    return True


def capped(value, cpus: int):
    """cpus_per_task limited to the node's CPUs; an expression gets wrapped in min()."""
    return f"min({cpus}, {value})" if isinstance(value, str) else min(value, cpus)


def slurm_overrides(cluster: slurm.Cluster, profiles: list[Path]) -> list[str]:
    """Command-line overrides that point the profile(s) at the test cluster and change nothing else.

    A command-line --default-resources / --set-resources replaces the profiles' whole block, so the
    effective blocks are repeated with only partition, account and cpus_per_task changed.
    """
    eff = effective_profile(profiles)
    defaults = dict(
        eff.get("default-resources") or {}, slurm_partition=cluster.partition, slurm_account=cluster.account
    )
    per_rule = {rule: dict(res) for rule, res in (eff.get("set-resources") or {}).items()}
    # pitfall 6: a job asking for more CPUs than the node has pends forever. Capping here and not
    # with a global `--resources cpus_per_task=2`: global caps are not passed on to the Snakemake
    # inside the job, which would then run `srun --cpus-per-task=<uncapped>` and fail.
    for res in [defaults, *per_rule.values()]:
        if "cpus_per_task" in res:
            res["cpus_per_task"] = capped(res["cpus_per_task"], cluster.cpus)
    set_resources = [f"{rule}:{kv}" for rule, res in per_rule.items() for kv in as_cli(res)]
    return [
        "--executor",
        "slurm",
        "--default-resources",
        *as_cli(defaults),
        *(["--set-resources", *set_resources] if set_resources else []),
        "--max-threads",
        str(cluster.cpus),  # pitfall 6 again, for rules without cpus_per_task
        # pitfall 7: first poll 10 s after a submission, not the profile's 20. A poll that finds
        # nothing finished waits 10 s longer for the next, and a trivial job takes 5-8 s here
        # (two Python starts), so a shorter first poll is slower: 7 s made each level take 24 s.
        "--slurm-init-seconds-before-status-checks",
        "10",
    ]


def job_env() -> dict[str, str]:
    """The submitting environment; Slurm jobs inherit it (the plugin submits with --export=ALL)."""
    env = dict(os.environ)  # ATTNAUDIT_MIRROR, if set, passes through unchanged
    # rules call `python -m attnaudit`: make that this venv's python, locally and inside the jobs
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


class SnakemakeRun:
    """``snakemake`` started in the background (:meth:`start`), waited for with :meth:`finish`; on timeout, or if
    the caller fails in between (``with`` block), SIGINT first, which makes the plugin scancel its jobs
    (pitfall 12) -- SIGTERM would not stop a hung status loop (pitfall 1)."""

    def __init__(self, cmd: list[str], cwd: Path, env: dict, timeout: int, log: Path):
        self.cmd, self.cwd, self.env, self.log = cmd, cwd, env, log
        self.deadline = time.monotonic() + timeout
        self.timeout = timeout
        self.proc = None

    def start(self) -> SnakemakeRun:
        with open(self.log, "w") as out:
            out.write(f"$ {' '.join(self.cmd)}\n")
            out.flush()
            # A shell without job control starts background commands (`pytest ... &`) with SIGINT
            # ignored, and Python then never installs its handler: give Snakemake a working SIGINT.
            self.proc = subprocess.Popen(
                self.cmd,
                cwd=self.cwd,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
            )
        return self

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def finish(self) -> str:
        """The log once snakemake exited 0; else fail with its tail."""
        try:
            rc = self.proc.wait(timeout=max(1.0, self.deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.stop()
            rc = None
        text = self.log.read_text()
        if rc != 0:
            what = f"timed out after {self.timeout} s" if rc is None else f"exited {rc}"
            tail = "\n".join(text.splitlines()[-60:])
            pytest.fail(f"snakemake {what} (full log {self.log}):\n{tail}", pytrace=False)
        return text

    def __enter__(self) -> SnakemakeRun:
        return self.start()

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:  # the caller failed before finish()
            self.stop()


def run_snakemake(cmd: list[str], cwd: Path, env: dict, timeout: int, log: Path) -> str:
    """Run to completion or fail (:class:`SnakemakeRun`)."""
    with SnakemakeRun(cmd, cwd, env, timeout, log) as run:
        return run.finish()


def slurm_jobs_of(output: str) -> tuple[str, set[str], list[dict[str, str]]]:
    """(run id, job ids the plugin reported from sbatch, sacct rows of that run with their rule)."""
    run_id = re.search(r"SLURM run ID: (\S+)", output).group(1)
    submitted = set(re.findall(r"submitted with SLURM jobid (\d+)", output))
    rows = [r for r in slurm.sacct_jobs() if r["JobName"] == run_id]  # the plugin names jobs by run id
    for r in rows:
        # the plugin's --comment is rule_<name> or rule_<name>_wildcards_<...>
        r["rule"] = re.fullmatch(r"rule_(.+?)(?:_wildcards_.*)?", r["Comment"]).group(1)
    return run_id, submitted, rows


def assert_all_completed(submitted: set[str], rows: list[dict[str, str]]) -> None:
    assert submitted, "no job was submitted through sbatch"
    assert {r["JobID"] for r in rows} == submitted, "sacct rows of this run != jobs the plugin submitted"
    bad = [r for r in rows if r["State"] != "COMPLETED"]
    assert not bad, f"jobs not COMPLETED in sacct: {bad}"


def asks_gpu(row: dict[str, str]) -> bool:
    return re.search(r"gres/gpu(:[^=,]+)?=[1-9]", row["ReqTRES"]) is not None


def assert_rerun_submits_nothing(cmd, cwd, env, log: Path) -> None:
    before = slurm.last_jobid()
    output = run_snakemake(cmd, cwd, env, TOY_TIMEOUT, log)
    assert "Nothing to be done" in output, f"the rerun had work to do (see {log})"
    assert "submitted with SLURM jobid" not in output
    assert slurm.last_jobid() == before, "the rerun added sacct rows"


def sacct_table(rows: list[dict[str, str]]) -> str:
    cols = ["JobID", "rule", "State", "Elapsed", "Partition", "Account", "Timelimit", "ReqTRES"]
    return "\n".join(" | ".join(r[c] for c in cols) for r in [dict(zip(cols, cols))] + rows)


# ---- 0. no cluster needed: profiles/default must not undo profiles/slurm ------------------------------


def layering_problems() -> str | None:
    """Run from the repo root, `--profile profiles/slurm` also loads profiles/default, whose keys
    replace the slurm profile's key by key. Two ways that breaks the cluster run:
    - `set-resources` / `default-resources` there drop the slurm profile's blocks (GPU requests,
      partition, account) without a word;
    - `resources` there caps each job's value in the submitting Snakemake only (sbatch asks for
      gpu=0) while the Snakemake inside the job, which gets set-resources but not the caps, runs
      `srun --gpus=1`: "Step requested GRES but job doesn't have GRES", the job FAILS.
    """
    default = load_profile(REPO / "profiles" / "default")
    ours = load_profile(PROFILE)
    problems = [
        f"`{key}` (replaces profiles/slurm's)" for key in ("set-resources", "default-resources") if key in default
    ]
    requested: dict[str, list] = {}
    for res in [ours.get("default-resources") or {}, *(ours.get("set-resources") or {}).values()]:
        for name, value in res.items():
            if isinstance(value, (int, float)):
                requested.setdefault(name, []).append(value)
    for name, cap in (default.get("resources") or {}).items():
        if isinstance(cap, (int, float)) and any(v > cap for v in requested.get(name, [])):
            problems.append(
                f"`resources: {{{name}: {cap}}}` (profiles/slurm requests up to "
                f"{name}={max(requested[name])}; inside the job srun asks for it, sbatch did not)"
            )
    if not problems:
        return None
    return (
        "profiles/default sets " + "; ".join(problems) + ". Move these out of profiles/default (a CPU "
        "machine needs no gpu counter: without one a gpu=1 job still runs, and the code falls back to "
        "the CPU), or tell cluster users to add `--workflow-profile none`."
    )


def test_workflow_profile_leaves_slurm_profile_intact():
    problem = layering_problems()
    assert problem is None, problem


def test_profiles_name_existing_rules():
    """set-resources is keyed by rule name: a renamed rule silently falls back to default-resources."""
    out = subprocess.run([*SNAKEMAKE, "--list-rules"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    rules = {line.split()[0] for line in out.stdout.splitlines() if line.strip()}
    for profile in (PROFILE, REPO / "profiles" / "gpu"):
        unknown = set(load_profile(profile).get("set-resources") or {}) - rules
        assert not unknown, f"{profile.relative_to(REPO)} names rules the workflow lacks: {sorted(unknown)}"


# ---- 1. the profile and the harness, on a three-rule workflow --------------------------------------

TOY_SNAKEFILE = """\
# Rule names are the pipeline's, so profiles/slurm's set-resources apply to them.
rule all:
    input: "results/report.txt"

rule tokenise:
    output: "results/tokens.bin"
    resources: gpu=1   # the profile says gpu: 0 for tokenise and set-resources wins: no GPU asked
    shell: "truncate -s 40M {output}"   # sparse: 40 MiB for train's input.size_mb, ~0 on disk

rule train:
    input: "results/tokens.bin"
    output: "results/model.txt"
    resources: gpu=1
    shell: "echo job=$SLURM_JOB_ID cuda=$CUDA_VISIBLE_DEVICES mirror=$ATTNAUDIT_MIRROR > {output}"

rule report:   # not in the profile: default-resources
    input: "results/model.txt"
    output: "results/report.txt"
    shell: "cat {input} > {output}"
"""


def minutes_to_timelimit(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}:00" if minutes < 24 * 60 else f"{minutes}"


def test_profile_on_slurm(slurm_cluster, tmp_path, say):
    (tmp_path / "Snakefile").write_text(TOY_SNAKEFILE)
    env = job_env()
    env.setdefault("ATTNAUDIT_MIRROR", f"/probe/{tmp_path.name}")  # shows the jobs see our env
    # run in tmp_path with --workflow-profile none: no profiles/default of the repo can interfere
    cmd = [
        *SNAKEMAKE,
        "--profile",
        str(PROFILE),
        "--workflow-profile",
        "none",
        *slurm_overrides(slurm_cluster, [PROFILE]),
    ]

    t = time.monotonic()
    output = run_snakemake(cmd, tmp_path, env, TOY_TIMEOUT, tmp_path / "run.log")
    workflow_s = time.monotonic() - t

    run_id, submitted, rows = slurm_jobs_of(output)
    assert_all_completed(submitted, rows)
    by_rule = {r["rule"]: r for r in rows}
    assert sorted(by_rule) == ["report", "tokenise", "train"] and len(rows) == 3
    for r in rows:
        assert (r["Partition"], r["Account"]) == (slurm_cluster.partition, slurm_cluster.account)

    # gpu: from the profile's set-resources, overriding the rules' own declarations
    assert asks_gpu(by_rule["train"]), by_rule["train"]
    assert not asks_gpu(by_rule["tokenise"]) and not asks_gpu(by_rule["report"])
    # runtime: the profile's expression on input.size_mb (40 MiB) became the Slurm time limit
    expr = load_profile(PROFILE)["set-resources"]["train"]["runtime"]
    minutes = eval(expr, {"input": SimpleNamespace(size_mb=40.0)})
    assert by_rule["train"]["Timelimit"] == minutes_to_timelimit(minutes)
    assert by_rule["report"]["Timelimit"] == minutes_to_timelimit(load_profile(PROFILE)["default-resources"]["runtime"])

    # the train job ran inside its Slurm job, saw the fake GPU and the submitter's environment
    model = (tmp_path / "results" / "model.txt").read_text().split()
    assert model == [f"job={by_rule['train']['JobID']}", "cuda=0", f"mirror={env['ATTNAUDIT_MIRROR']}"]
    assert (tmp_path / "results" / "report.txt").read_text().split() == model

    t = time.monotonic()
    assert_rerun_submits_nothing(cmd, tmp_path, env, tmp_path / "rerun.log")
    rerun_s = time.monotonic() - t
    say(
        f"toy workflow via Slurm {workflow_s:.1f} s ({len(rows)} jobs), rerun {rerun_s:.1f} s; "
        f"sacct of run {run_id}:\n{sacct_table(rows)}"
    )


# ---- 2. the real pipeline: Slurm and local runs give the same numbers --------------------------------

# provenance that legitimately differs between the runs (metrics.json keys, parquet columns):
# wall time, device, host, thread counts, versions, ...
NOT_A_RESULT = re.compile(
    r"time|second|wall|elapsed|duration|date|device|host|thread|provenance|version"
    r"|slurm|cuda",
    re.IGNORECASE,
)


def numeric_metrics(obj, path: tuple = ()) -> dict[tuple, float]:
    """Flatten metrics.json to {key path: number}, dropping provenance keys (NOT_A_RESULT)."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if not NOT_A_RESULT.search(str(k)):
                out.update(numeric_metrics(v, path + (str(k),)))
        return out
    if isinstance(obj, list):
        out = {}
        for i, v in enumerate(obj):
            out.update(numeric_metrics(v, path + (str(i),)))
        return out
    if isinstance(obj, (int, float)) and not isinstance(obj, bool):
        return {path: obj}
    return {}


def results_only(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame without provenance columns (e.g. saliency's per-instance `seconds`, `device`)."""
    return frame.drop(columns=[c for c in frame.columns if NOT_A_RESULT.search(str(c))])


def same_number(a: float, b: float) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def test_pipeline_on_slurm_matches_local(slurm_cluster, tmp_path, say, request):
    """A Slurm run of part of tests/config.yaml against the session's local run of it (conftest.local_pipeline),
    which, if no test has made it yet, runs while the Slurm jobs do.

    The part keeps Slurm's share of CI short while covering every kind of job: the data stages, J&W's BiLSTM with
    its importance scores (chunked, gathered locally) and three audits, a T&Š regularised model, and a W&P guided
    model whose teacher's predictions cross job boundaries."""
    config = REPO / "tests" / "config.yaml"
    env = job_env()
    if not env.get("ATTNAUDIT_MIRROR") and (REPO.parent / "shared" / "corpora").is_dir():
        env["ATTNAUDIT_MIRROR"] = str(REPO.parent / "shared" / "corpora")  # tests/conftest.py's fallback
    workflow_profile = REPO / "profiles" / "default"  # Snakemake loads it automatically from the repo root
    if problem := layering_problems():  # would only fail after minutes, in srun
        pytest.fail(problem, pytrace=False)
    slurm_dir = tmp_path / "slurm"
    # --replace-workflow-config: tests/config.yaml replaces config.yaml (not merged into the SST grid)
    slurm_cmd = [
        *SNAKEMAKE,
        "--profile",
        "profiles/slurm",
        "--configfile",
        str(config),
        "--replace-workflow-config",
        "--directory",
        str(slurm_dir),
        *slurm_overrides(slurm_cluster, [PROFILE, workflow_profile]),
        *SLURM_TARGETS,
    ]

    t = time.monotonic()
    with SnakemakeRun(slurm_cmd, REPO, env, PIPELINE_TIMEOUT, tmp_path / "slurm.log") as slurm_run:
        # the session's local run, if no test has made it yet, runs meanwhile on the same cores
        local_dir = request.getfixturevalue("local_pipeline")
        output = slurm_run.finish()
    slurm_s = time.monotonic() - t

    run_id, submitted, rows = slurm_jobs_of(output)
    say(
        f"pipeline via Slurm {slurm_s:.1f} s ({len(rows)} jobs, beside the local run); "
        f"sacct of run {run_id}:\n{sacct_table(rows)}"
    )
    assert_all_completed(submitted, rows)
    train = [r for r in rows if r["rule"] == "train"]
    assert train, "no train job was submitted"
    no_gpu = [r["JobID"] for r in train if not asks_gpu(r)]
    assert not no_gpu, (
        f"train jobs {no_gpu} asked Slurm for no GPU. profiles/slurm sets gpu: 1 for train; a key in "
        f"{workflow_profile.relative_to(REPO)} replaces the same key of profiles/slurm (e.g. "
        "`resources: {gpu: 0}` caps every job's gpu at 0)"
    )

    # every model's metrics: the same numbers, apart from provenance (wall time, device, ...)
    metrics = sorted(p.relative_to(slurm_dir) for p in slurm_dir.glob("results/models/**/metrics.json"))
    assert metrics, "the Slurm run wrote no results/models/**/metrics.json"
    assert len(metrics) == 4, metrics  # the BiLSTM, the tying model, the guided MLP and its teacher
    assert set(metrics) <= {p.relative_to(local_dir) for p in local_dir.glob("results/models/**/metrics.json")}
    for rel in metrics:
        a = numeric_metrics(json.loads((slurm_dir / rel).read_text()))
        b = numeric_metrics(json.loads((local_dir / rel).read_text()))
        assert a, f"{rel}: no numeric metrics"
        assert a.keys() == b.keys(), rel
        differ = {".".join(k): (a[k], b[k]) for k in a if not same_number(a[k], b[k])}
        assert not differ, f"{rel}: slurm vs local differ: {differ}"

    # every audit table: identical frames, apart from provenance columns
    audits = sorted(p.relative_to(slurm_dir) for p in slurm_dir.glob("results/audits/**/*.parquet"))
    assert audits, "the Slurm run wrote no results/audits/**/*.parquet"
    assert set(audits) <= {p.relative_to(local_dir) for p in local_dir.glob("results/audits/**/*.parquet")}
    for rel in audits:
        pd.testing.assert_frame_equal(
            results_only(pd.read_parquet(slurm_dir / rel)),
            results_only(pd.read_parquet(local_dir / rel)),
            check_exact=True,
            obj=str(rel),
        )

    assert_rerun_submits_nothing(slurm_cmd, REPO, env, tmp_path / "slurm-rerun.log")


def test_last_epoch_model_is_read_off_its_twins_run_on_slurm(slurm_cluster, tmp_path, say):
    """The two jobs of one run and two selection rules (rules/train.smk) as Slurm jobs with their profile
    resources: the twin trains like ``train`` (GPU, 16 GB), the last-epoch model is read off on one CPU. The epoch
    count comes from ``--config``, which Snakemake hands each job's Snakemake as text again: the jobs must read it
    as the number the planning run did."""
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(last_epoch_pair_config()))
    models = tmp_path / "results/models/planted"
    cmd = [
        *SNAKEMAKE,
        "--profile",
        "profiles/slurm",
        "--configfile",
        str(tmp_path / "config.yaml"),
        "--replace-workflow-config",
        "--config",
        "datasets={'planted': {'train': {'epochs': 2}}}",
        "--directory",
        str(tmp_path),
        *slurm_overrides(slurm_cluster, [PROFILE, REPO / "profiles" / "default"]),
        *(f"results/models/planted/average-additive-{v}-s0/metrics.json" for v in ("base", "last")),
    ]
    env = job_env()
    output = run_snakemake(cmd, REPO, env, TOY_TIMEOUT, tmp_path / "run.log")
    run_id, submitted, rows = slurm_jobs_of(output)
    assert_all_completed(submitted, rows)
    by_rule = {r["rule"]: r for r in rows}
    assert {"train_keeping_final_epoch", "read_off_final_epoch"} <= set(by_rule) and "train" not in by_rule, rows
    assert asks_gpu(by_rule["train_keeping_final_epoch"]) and not asks_gpu(by_rule["read_off_final_epoch"])
    last = json.loads((models / "average-additive-last-s0/metrics.json").read_text())
    assert last["final_epoch_of"] == "average-additive-base-s0"
    assert len(last["history"]) == 2 and last["selected_epoch"] == 1  # the command line's epochs, not the file's 3
    assert_rerun_submits_nothing(cmd, REPO, env, tmp_path / "rerun.log")
    say(f"one run, two selection rules via Slurm; sacct of run {run_id}:\n{sacct_table(rows)}")
