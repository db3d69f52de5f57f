"""``python -m attnaudit job-costs``: Snakemake benchmark files summed per rule, and per dataset × model; what a
job's process used (the last line of its log) and how it exits."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pytest import approx

from attnaudit import AttnauditError
from attnaudit.job_costs import per_model, predict_slots, read_dag, summarise
from attnaudit.process_usage import read_usage

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def bench(root, path, seconds, cpu, rss=100.0):
    file = root / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(HEADER + f"{seconds}\t0:00:01\t{rss}\t0\t0\t0\t0\t0\t0\t{cpu}\n")


def test_per_rule_and_per_model_sums(tmp_path):
    bench(tmp_path, "train/sst/lstm-s0.tsv", 10, 8, rss=900)
    bench(tmp_path, "importance/sst/lstm-s0/loo-0-of-2.tsv", 4, 3)
    bench(tmp_path, "importance/sst/lstm-s0/loo-1-of-2.tsv", 5, 4)
    bench(tmp_path, "importance/sst/cnn-s0/loo-0-of-1.tsv", 2, 1)
    bench(tmp_path, "tokenise/sst.tsv", 7, 6)  # not a model's job
    rules = summarise(tmp_path)
    assert rules.loc["importance", "jobs"] == 3 and rules.loc["importance", "cpu_seconds_sum"] == 8
    assert rules.loc["TOTAL", "cpu_seconds_sum"] == 22 and rules.loc["TOTAL", "peak_rss_mb"] == 900
    models = per_model(tmp_path)
    assert models.loc[("sst", "lstm-s0"), "importance"] == 7 and models.loc[("sst", "lstm-s0"), "train"] == 8
    assert models.loc[("sst", "lstm-s0"), "cpu_seconds_sum"] == 15 and models.loc[("sst", "cnn-s0"), "train"] == 0
    assert list(models.index.get_level_values("model")) == ["cnn-s0", "lstm-s0"]


def test_a_wrong_folder_or_an_unreadable_file_is_named(tmp_path):
    """A typo in the folder used to print 0 jobs; an empty or header-only file a pandas traceback."""
    with pytest.raises(AttnauditError, match="benchmark: not a folder"):
        summarise(tmp_path / "benchmark")
    for broken in ("", HEADER):
        (tmp_path / "train").mkdir(exist_ok=True)
        (tmp_path / "train" / "x.tsv").write_text(broken)
        with pytest.raises(AttnauditError, match=r"x.tsv: not a Snakemake benchmark file with rows"):
            summarise(tmp_path)
    for broken in (HEADER + "1\t0:00:01\tabc\t0\t0\t0\t0\t0\t0\t1\n", b"\xff\xfes\x00"):
        path = tmp_path / "train" / "x.tsv"
        path.write_bytes(broken) if isinstance(broken, bytes) else path.write_text(broken)
        with pytest.raises(AttnauditError, match=r"x.tsv: not a Snakemake benchmark file with rows"):
            summarise(tmp_path)
    (tmp_path / "results").mkdir()  # the wrong folder: it exists but holds no benchmark file
    with pytest.raises(AttnauditError, match=r"results: no benchmark files \(\*.tsv\) below it"):
        summarise(tmp_path / "results")


def test_an_error_is_printed_once(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "attnaudit", "job-costs", str(tmp_path / "absent")], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert proc.stderr.count("not a folder") == 1, proc.stderr
    assert f"attnaudit job-costs: error: {tmp_path / 'absent'}: not a folder" in proc.stderr


def test_what_snakemake_could_not_measure_is_left_out_of_the_sums(tmp_path):
    """Snakemake writes "-" for what it could not sample (a job of a fraction of a second): not a number, not 0."""
    bench(tmp_path, "card/sst/a.tsv", 0.4, "-", rss="-")
    bench(tmp_path, "card/sst/b.tsv", 0.6, 0.5, rss=12.0)
    rules = summarise(tmp_path)
    assert rules.loc["card", "jobs"] == 2 and rules.loc["card", "seconds_sum"] == approx(1.0)
    assert rules.loc["card", "cpu_seconds_sum"] == approx(0.5) and rules.loc["card", "peak_rss_mb"] == 12.0


def test_a_dag_without_slots_is_refused(tmp_path, capsys):
    from attnaudit.cli import main

    bench(tmp_path, "train/sst/lstm-s0.tsv", 10, 8)
    assert main(["job-costs", str(tmp_path), "--dag", "-"]) == 2
    assert "--dag needs --slots" in capsys.readouterr().err


SUMMARY_HEADER = "output_file\tdate\trule\tlog-file(s)\tinput-file(s)\tshellcmd\tstatus\tplan\n"


def dag_summary(path, jobs):
    """A ``snakemake --detailed-summary`` table: one row per output of each (rule, log, outputs, inputs)."""
    rows = [
        f"{out}\t-\t{rule}\t{log}\t{','.join(inputs)}\tpython -m attnaudit …\tok\tno update\n"
        for rule, log, outputs, inputs in jobs
        for out in outputs
    ]
    path.write_text(SUMMARY_HEADER + "".join(rows))
    return path


def test_slots_predict_a_schedule_that_starts_the_long_chain_first(tmp_path):
    """A short job (1 s) in front of a long one (10 s), beside two independent 5 s jobs: on two slots the chain
    must start at once (11 s, its own length); running the 5 s jobs first would take 16 s."""
    benchmarks = tmp_path / "benchmarks"
    jobs = [  # rule, log, outputs, inputs (raw.txt is no job's output: a source file)
        ("tokenise", "logs/tokenise/a.log", ["t/a", "t/a.json"], ["raw.txt"]),
        ("train", "logs/train/a/m.log", ["m/a"], ["t/a", "t/a.json"]),
        ("corpora", "logs/corpora/b.log", ["c/b"], []),
        ("corpora", "logs/corpora/c.log", ["c/c"], []),
    ]
    for (_, log, _, _), seconds in zip(jobs, (1, 10, 5, 5)):
        bench(benchmarks, log.removeprefix("logs/").removesuffix(".log") + ".tsv", seconds, seconds)
    summary = dag_summary(tmp_path / "summary.tsv", jobs)
    dag = read_dag(summary, benchmarks)
    assert len(dag) == 4 and dag[("train", "logs/train/a/m.log")].benchmark == "train/a/m.tsv"
    table, path = predict_slots(summary, benchmarks, [1, 2, 4])
    assert table.loc[1, "predicted_wall_min"] * 60 == approx(sum((1, 10, 5, 5)))
    assert table.loc[2, "predicted_wall_min"] * 60 == approx(11) == table.loc[2, "critical_path_min"] * 60
    assert table.loc[4, "predicted_wall_min"] * 60 == approx(11)
    assert path == ["tokenise: logs/tokenise/a.log", "train: logs/train/a/m.log"]


def test_slots_name_a_job_without_a_benchmark_and_a_file_that_is_no_summary(tmp_path):
    benchmarks = tmp_path / "benchmarks"
    bench(benchmarks, "corpora/b.tsv", 5, 5)
    summary = dag_summary(
        tmp_path / "summary.tsv",
        [("corpora", "logs/corpora/b.log", ["c/b"], []), ("train", "logs/train/x.log", ["m/x"], ["c/b"])],
    )
    with pytest.raises(AttnauditError, match=r"1 of the DAG's 2 jobs have no benchmark file .* logs/train/x.log"):
        predict_slots(summary, benchmarks, [2])
    (tmp_path / "not.tsv").write_text("s\th:m:s\n1\t0:00:01\n")
    with pytest.raises(AttnauditError, match=r"not.tsv: not the output of `snakemake --detailed-summary`"):
        predict_slots(tmp_path / "not.tsv", benchmarks, [2])


BUSY_CHILD = """
import time
from attnaudit.process_usage import usage_line
start = time.process_time()
while time.process_time() - start < 0.6:  # 0.6 s of CPU
    pass
block = bytearray(300 << 20)  # 300 MB, touched
for i in range(0, len(block), 4096):
    block[i] = 1
del block
time.sleep(0.4)  # wall time without CPU
print(usage_line())
"""


def usage_of_a_busy_child() -> tuple[str, float, float]:
    """A child that uses 0.6 CPU s, 300 MB and sleeps 0.4 s: its usage line, and its wall and CPU seconds as the
    parent measured them (from before it was started, and ``RUSAGE_CHILDREN``)."""
    before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    line = subprocess.run([sys.executable, "-c", BUSY_CHILD], capture_output=True, text=True, check=True).stdout
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return line, wall, cpu


def test_the_usage_line_says_what_the_process_used(tmp_path):
    """CPU as the parent's getrusage counts it, wall from the process's creation (psutil's create_time is up to 1 s
    early: it adds the boot time in whole seconds), and the peak RSS."""
    line, wall, cpu = usage_of_a_busy_child()
    log = tmp_path / "job.log"
    log.write_text(f"2026-01-01 00:00:00,000 INFO attnaudit: tokenise; no runtime variables set\n{line}")
    usage = read_usage(log)
    assert usage is not None, line
    assert cpu - 0.1 <= usage["cpu_seconds"] <= cpu and usage["cpu_seconds"] >= 0.6  # less its exit's CPU
    # never more than the parent saw (the start time is in clock ticks of 10 ms, the line rounds to 10 ms), less at
    # most the child's exit and the parent's waking up, which a loaded machine may delay
    assert wall - 1.0 <= usage["wall_seconds"] <= wall + 0.02 and usage["wall_seconds"] >= 1.0
    assert usage["peak_rss_mb"] >= 300
    assert read_usage(tmp_path / "absent.log") is None
    log.write_text("attnaudit tokenise: error: killed before its last line\n")
    assert read_usage(log) is None


LARGE_LAUNCHER = """
import subprocess, sys
block = bytearray(600 << 20)  # 600 MB, touched, held while the child runs
for i in range(0, len(block), 4096):
    block[i] = 1
child = "from attnaudit.process_usage import usage_line; print(usage_line())"
subprocess.run([sys.executable, "-c", child], check=True)  # exec'd straight from this process's memory map
"""


@pytest.mark.skipif(
    not Path("/proc/self/status").exists(),
    reason="no procfs (macOS): ru_maxrss, which keeps the launcher's peak, is all a process can read of its own",
)
def test_the_peak_rss_is_the_processs_own_not_its_launchers(tmp_path):
    """A small process started straight from a large one (``subprocess.run``, as a user may call ``python -m
    attnaudit``) says its own peak: ``ru_maxrss`` alone said the launcher's 600 MB."""
    log = tmp_path / "job.log"
    log.write_text(subprocess.run([sys.executable, "-c", LARGE_LAUNCHER], capture_output=True, text=True).stdout)
    usage = read_usage(log)
    assert usage is not None and usage["peak_rss_mb"] < 200, log.read_text()  # an interpreter and the package


def test_a_jobs_cpu_and_peak_memory_come_from_its_log_where_the_benchmark_only_sampled_them(tmp_path):
    """Snakemake samples a job every 30 s after its first 15 (in the default study a 38-s faithfulness job was
    recorded at 15 CPU s); the log's last line says what the job's process used. A job whose log has no such line
    keeps the benchmark file's figures and is counted as sampled."""
    line, _, cpu = usage_of_a_busy_child()
    root = tmp_path / "benchmarks"
    bench(root, "saliency_faithfulness/sst/m-s0/chunk-0-of-1.tsv", 2.5, 0.2, rss=20.0)
    bench(root, "train/sst/m-s0.tsv", 44.0, 40.1, rss=900.0)  # its log is an older version's: no usage line
    log = tmp_path / "logs/saliency_faithfulness/sst/m-s0/chunk-0-of-1.log"
    log.parent.mkdir(parents=True)
    log.write_text(f"... INFO attnaudit: saliency; no runtime variables set\n... INFO attnaudit: {line}")
    (tmp_path / "logs/train/sst").mkdir(parents=True)
    (tmp_path / "logs/train/sst/m-s0.log").write_text("... INFO attnaudit.train.training: epoch 0: ...\n")
    rules = summarise(root)
    faithfulness = rules.loc["saliency_faithfulness"]
    assert cpu - 0.15 <= faithfulness["cpu_seconds_sum"] <= cpu + 0.05  # the summary rounds to 0.1 s
    assert faithfulness["peak_rss_mb"] >= 300
    assert faithfulness["sampled_jobs"] == 0 and faithfulness["seconds_sum"] == 2.5  # wall: Snakemake's
    assert rules.loc["train", "cpu_seconds_sum"] == 40.1 and rules.loc["train", "sampled_jobs"] == 1
    assert rules.loc["TOTAL", "sampled_jobs"] == 1 and rules.loc["TOTAL", "peak_rss_mb"] == 900
    assert per_model(root).loc[("sst", "m-s0"), "saliency_faithfulness"] == approx(faithfulness["cpu_seconds_sum"])


EXITING_CHILD = """
import atexit, sys, threading, time
from attnaudit import cli

class TornDown:
    def __del__(self):
        sys.stderr.write("torn down\\n")

kept = TornDown()  # freed by the interpreter's teardown, if there is one
atexit.register(lambda: sys.stderr.write("atexit ran\\n"))
if "--thread" in sys.argv:
    sys.argv.remove("--thread")
    returned, command = threading.Event(), cli.main

    def main_then_signal():
        try:
            return command()
        finally:
            returned.set()

    cli.main = main_then_signal  # the thread outlives main() however long main() takes
    threading.Thread(
        target=lambda: (returned.wait(), time.sleep(0.3), sys.stderr.write("thread finished\\n"))
    ).start()
cli.run()
"""


@pytest.mark.parametrize("thread", [False, True])
def test_a_command_leaves_without_the_interpreters_teardown(tmp_path, thread):
    """``python -m attnaudit`` skips freeing every module and object at exit (0.4–1 s a job) but runs the atexit
    handlers, flushes what it printed (here into a pipe) and keeps its exit code; a thread still running is waited
    for, as a normal exit would."""
    bench(tmp_path / "benchmarks", "train/sst/m-s0.tsv", 44.0, 40.1)
    buffered = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}  # piped: buffered
    for args, code in ([str(tmp_path / "benchmarks")], 0), ([str(tmp_path / "absent")], 2):
        argv = [sys.executable, "-c", EXITING_CHILD, "job-costs", *args, *(["--thread"] if thread else [])]
        child = subprocess.run(argv, capture_output=True, text=True, env=buffered)
        assert child.returncode == code, child.stderr
        assert "atexit ran" in child.stderr and ("TOTAL" in child.stdout) == (code == 0)
        assert ("thread finished" in child.stderr) == thread
        assert ("torn down" in child.stderr) == thread, child.stderr  # waiting for the thread, it exits normally
