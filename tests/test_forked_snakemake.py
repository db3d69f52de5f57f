"""The tests' forked Snakemake commands (tests/forked_snakemake.py) against the same commands started afresh."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
import yaml
from conftest import WORKFLOW
from forked_snakemake import run_snakemake

#: A Snakefile that prints, while Snakemake parses it, what a command's process is given.
PROBE = """
import os, sys
print("env", os.environ.get("PROBE"), "cwd", os.getcwd(), "path0", sys.path[0], "argv0", sys.argv[0], flush=True)
print("stdin", sys.stdin.read(), flush=True)
if os.environ.get("PROBE_SLEEP"):
    import time
    open("sleeping", "w").close()
    time.sleep(float(os.environ["PROBE_SLEEP"]))

rule all:
    shell: "echo $PROBE > out.txt"
"""


def afresh(args, cwd, env=None) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "snakemake", *args]
    return subprocess.run(
        command, capture_output=True, text=True, cwd=cwd, env=env, timeout=300, stdin=subprocess.DEVNULL
    )


def test_a_forked_command_prints_and_exits_as_the_command(tmp_path):
    """A config error's dry run: the same status, stdout and stderr, the message in them."""
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"datasets": {"planted": {"corpus": "planted"}}, "seed": -1}))
    args = [*WORKFLOW, "-n", "--directory", str(tmp_path), "--configfile", str(tmp_path / "config.yaml")]
    forked, started = run_snakemake(args, cwd=tmp_path, timeout=300), afresh(args, tmp_path)
    assert forked.returncode == started.returncode == 1
    assert "config seed: -1 is less than the minimum of 0" in forked.stdout + forked.stderr
    assert (forked.stdout, forked.stderr) == (started.stdout, started.stderr)
    assert run_snakemake(["--version"]).stdout == afresh(["--version"], tmp_path).stdout


def test_a_forked_command_has_its_own_directory_environment_and_streams(tmp_path):
    """Each command's working directory, environment, ``sys.argv[0]`` and ``sys.path[0]`` as ``python -m`` sets
    them, stdin empty; a job it runs sees the environment; one command's environment is not the next one's."""
    snakefile = tmp_path / "Snakefile"
    snakefile.write_text(PROBE)
    outputs = {}
    for name, run in {"by_fork": run_snakemake, "by_exec": afresh}.items():
        workdir = tmp_path / name
        workdir.mkdir()
        env = {**os.environ, "PROBE": name}
        proc = run(["--snakefile", str(snakefile), "--cores", "1"], cwd=workdir, env=env)
        assert proc.returncode == 0, proc.stderr
        outputs[name] = proc.stdout.replace(name, "NAME")
        assert (workdir / "out.txt").read_text() == f"{name}\n"
    assert outputs["by_fork"] == outputs["by_exec"]
    assert "env NAME" in outputs["by_fork"] and "stdin \n" in outputs["by_fork"]
    again = run_snakemake(["--snakefile", str(snakefile), "-n"], cwd=tmp_path / "by_fork")
    assert "env None" in again.stdout


def test_a_forked_command_past_its_timeout_is_killed_and_the_next_one_runs(tmp_path):
    snakefile = tmp_path / "Snakefile"
    snakefile.write_text(PROBE)
    env = {**os.environ, "PROBE_SLEEP": "60"}
    t = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_snakemake(["--snakefile", str(snakefile), "-n"], cwd=tmp_path, env=env, timeout=3)
    assert time.monotonic() - t < 30 and (tmp_path / "sleeping").exists()
    assert run_snakemake(["--snakefile", str(snakefile), "-n"], cwd=tmp_path).returncode == 0
