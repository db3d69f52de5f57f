"""The runtime settings every run from the repository gets: profiles/default (which Snakemake loads itself) and
the environment the Snakefile gives its jobs."""

from __future__ import annotations

import copy
import os
import re
import shlex
import subprocess
import sys

import yaml
from conftest import REPO, WORKFLOW, snakemake
from forked_snakemake import run_snakemake
from test_faults import user_config, write_corpus

from attnaudit.cli import build_parser


def test_jobs_are_selected_once_per_finished_job_and_the_run_exits_at_once(tmp_path):
    """max-jobs-per-timespan: Snakemake's 1-second re-evaluation timers, one more chain per finished job, would
    re-run the job selection dozens of times while jobs wait for the one core; the profile's 10-minute span leaves
    one selection per finished job, and the workflow cancels the last timer at exit (else the process would live on
    for 10 minutes after the run: the timeout below)."""
    corpus = write_corpus(tmp_path / "mine.csv", ["pos", "neg"] * 30)
    config = user_config(corpus)
    config["corpora"]["user"]["yours"] = copy.deepcopy(config["corpora"]["user"]["mine"])
    config["datasets"]["yours"] = copy.deepcopy(config["datasets"]["mine"]) | {"corpus": "yours"}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    targets = [f"results/embeddings/{name}/matrix.npy" for name in ("mine", "yours")]
    run = snakemake(tmp_path, "--cores", "1", "--verbose", *targets, config=tmp_path / "config.yaml", timeout=120)
    finished = run.stderr.count("Finished jobid")
    selections = run.stderr.count("Ready jobs:")
    assert finished == 6, run.stderr[-3000:]  # a corpora, a tokenise and an embeddings job per corpus
    assert 1 <= selections <= finished + 1, f"{selections} job selections for {finished} jobs"


def test_a_run_that_snakemake_itself_fails_exits_at_once(tmp_path):
    """A job whose log folder cannot be written fails in Snakemake's own handling of it (a PermissionError past the
    onerror hook): the run stops with the path at once, where the 10-minute re-evaluation timer of profiles/default
    kept it alive, deaf to SIGTERM (rules/common.smk, stop_reevaluation_timers_at_exit). As root, the run is
    started without the capabilities that override file permissions, as a user's would be."""
    config = user_config(write_corpus(tmp_path / "mine.csv", ["pos", "neg"] * 30))
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    logs = tmp_path / "logs" / "tokenise"
    logs.mkdir(parents=True)
    logs.chmod(0o555)
    user = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner"] if os.geteuid() == 0 else []
    try:
        probe = subprocess.run([*user, "touch", str(logs / "probe")], capture_output=True)
        assert probe.returncode != 0, "the log folder is writable: the test cannot make the error it is about"
        run = snakemake(
            tmp_path,
            "--cores",
            "1",
            "results/datasets/mine/vocab.json",
            config=tmp_path / "config.yaml",
            check=False,
            timeout=90,
            prefix=user or ["env"],
        )
    finally:
        logs.chmod(0o755)
    assert run.returncode != 0 and "Permission denied: 'logs/tokenise/mine.log'" in run.stderr, run.stderr[-3000:]


def tunables_in_log(log):
    """The GLIBC_TUNABLES a job's log says it ran with (its first line, written by the CLI), or None."""
    found = re.search(r"GLIBC_TUNABLES=([^,\s]+)", log.read_text().splitlines()[0])
    return found and found.group(1)


def test_jobs_run_with_the_allocator_tunables_unless_the_user_set_their_own(tmp_path):
    """The Snakefile gives every job glibc malloc tunables that keep freed memory (rules/common.smk); each job's log
    names the GLIBC_TUNABLES it ran with. A value the user exported wins."""
    config = user_config(write_corpus(tmp_path / "mine.csv", ["pos", "neg"] * 30))
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    target, log = "results/datasets/mine/vocab.json", tmp_path / "logs" / "tokenise" / "mine.log"
    env = {name: value for name, value in os.environ.items() if name != "GLIBC_TUNABLES"}
    snakemake(tmp_path, "--cores", "1", target, config=tmp_path / "config.yaml", env=env)
    assert tunables_in_log(log), f"the job ran without GLIBC_TUNABLES: {log.read_text()[:300]}"
    tunables = dict(item.split("=") for item in tunables_in_log(log).split(":"))
    assert int(tunables["glibc.malloc.mmap_threshold"]) > 2**20 < int(tunables["glibc.malloc.trim_threshold"])
    own = {**env, "GLIBC_TUNABLES": "glibc.malloc.arena_max=2"}
    snakemake(tmp_path, "--cores", "1", target, "--forcerun", "tokenise", config=tmp_path / "config.yaml", env=own)
    assert tunables_in_log(log) == "glibc.malloc.arena_max=2"


def test_a_job_leaves_openmp_its_own_wait_policy_unless_the_user_sets_one(tmp_path):
    """A job given N threads owns N cores (Snakemake and Slurm reserve them), where OpenMP's default wait (spin
    briefly, then sleep) made two threads faster than one and a forced passive wait made them slower than one
    (docs/performance.md, "Two threads"); the log's first line names the policy a user exported."""

    def first_log_line(**extra):
        env = {name: value for name, value in os.environ.items() if name != "OMP_WAIT_POLICY"} | extra
        run = subprocess.run(
            [sys.executable, "-m", "attnaudit", "job-costs", str(tmp_path)], env=env, capture_output=True, text=True
        )
        return run.stderr.splitlines()[0]

    assert "OMP_WAIT_POLICY" not in first_log_line()
    assert "OMP_WAIT_POLICY=PASSIVE" in first_log_line(OMP_WAIT_POLICY="PASSIVE")


def attnaudit_arguments(shell_line: str) -> list[str]:
    """The arguments of ``python -m attnaudit`` in a job's shell command, up to its redirections."""
    words = shlex.split(shell_line.split("python -m attnaudit ", 1)[1])
    return words[: words.index(">")] if ">" in words else words


def test_every_command_that_takes_threads_is_given_its_jobs_threads(tmp_path):
    """A profile's ``set-threads`` reserves cores for a job (Snakemake locally, ``cpus-per-task`` on Slurm); a
    command that takes ``--threads`` must be passed them, else the job holds the cores and computes on one. Every
    rule set to 3 threads, the end-to-end config planned with 3 cores: each planned command whose parser has
    ``--threads`` gets 3."""
    listed = run_snakemake([*WORKFLOW, "--list-rules"], cwd=REPO)
    assert listed.returncode == 0, listed.stderr
    rules = [line.split()[0] for line in listed.stdout.splitlines() if re.match(r"[a-z_]+( \(|$)", line)]
    overrides = [f"{rule}=3" for rule in rules if rule != "all"]
    planned = snakemake(
        tmp_path, "-n", "-p", "--cores", "3", "--set-threads", *overrides, config=REPO / "tests" / "config.yaml"
    )
    parser, given = build_parser(), {}
    for words in (attnaudit_arguments(line) for line in planned.stdout.splitlines() if "python -m attnaudit " in line):
        arguments = parser.parse_args(words)
        if hasattr(arguments, "threads"):
            command = " ".join(word for word in words[:2] if not word.startswith("-"))
            given.setdefault(command, set()).add(arguments.threads)
    assert {"train", "importance score", "tutek-snajder mutual-information"} <= set(given), sorted(given)
    assert {command: threads for command, threads in given.items() if threads != {3}} == {}
