"""Which files each job of a Snakemake run opened, from ``strace -f`` of the whole run, against the inputs Snakemake
knows the job reads (``snakemake --detailed-summary``). A file a job reads but does not declare is missing from the
DAG: the job can run before the file is written and does not rerun when the file changes.

A job is its ``python -m attnaudit …`` process (with its threads); it is told apart by the files it and its shell
wrote (its outputs and its log), since strace shortens long command lines. A whole run starts more processes and
threads than there are process ids (32,768 by default), so a process is a lifetime of its id, from its first line
to strace's "+++ exited" line, not the id itself.
"""

from __future__ import annotations

import collections
import itertools
import os
import re
import shutil
import subprocess
from pathlib import Path

from system_packages import apt_install, unavailable

from attnaudit.job_costs import Job

SYSCALLS = "execve,openat,open,rename,renameat,renameat2,clone,clone3,fork,vfork"
LINE = re.compile(r"^(\d+)\s+(.*)$")
CALL = re.compile(r"(\w+)\((.*)\)\s+=\s+(-?\d+)", re.S)
OPEN = re.compile(r'(?:(?:AT_FDCWD|\d+(?:<[^>]*>)?),\s*)?"((?:[^"\\]|\\.)*)",\s*([A-Z_|]+)')
QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')


def skip_without_strace() -> None:
    """Skip a test that needs strace where it cannot trace; fail under CI (:func:`system_packages.unavailable`)."""
    unavailable("strace unavailable here (not installed and no apt-get, or ptrace not permitted)")


def strace_prefix(trace: Path) -> list[str] | None:
    """The command prefix that traces a run into ``trace`` (installing strace with apt-get if it is missing), or
    None where this machine cannot trace (no strace and no apt-get, or ptrace not permitted)."""
    apt_install(["strace"], lambda: shutil.which("strace") is not None)
    prefix = ["strace", "-f", "--seccomp-bpf", "-q", "-e", f"trace={SYSCALLS}", "-e", "signal=none"]
    if shutil.which("strace") is None or subprocess.run([*prefix, "-o", os.devnull, "true"]).returncode != 0:
        return None
    return [*prefix, "-o", str(trace)]


class Trace:
    """Per process (thread ids folded into their process; a process id used again is another process): its
    command line, the files it opened for reading and the files it wrote (opened for writing, or renamed into
    place). Processes are numbered in the order they appear; ``parent`` maps a process to the one that forked it."""

    def __init__(self, path: Path):
        self.current, self.parent, self._numbers = {}, {}, itertools.count()
        self.argv, self.reads, self.writes = {}, collections.defaultdict(set), collections.defaultdict(set)
        pending = {}
        with open(path, errors="replace") as lines:
            for raw in lines:
                if not (m := LINE.match(raw.rstrip("\n"))):
                    continue
                tid, rest = int(m.group(1)), m.group(2)
                if rest.startswith("+++ "):  # "+++ exited with 0 +++", "+++ killed by SIGKILL +++": the id is free
                    self.current.pop(tid, None)
                    continue
                if rest.endswith("<unfinished ...>"):
                    pending[tid] = rest.removesuffix("<unfinished ...>").rstrip()
                    continue
                if resumed := re.match(r"<\.\.\. (\w+) resumed>(.*)$", rest):
                    rest = pending.pop(tid, resumed.group(1) + "(") + resumed.group(2)
                if call := CALL.match(rest):
                    self._call(tid, call.group(1), call.group(2), int(call.group(3)))

    def _process(self, tid: int) -> int:
        """The process thread ``tid`` belongs to now (a new one for an id not seen since it last exited)."""
        if tid not in self.current:
            self.current[tid] = next(self._numbers)
        return self.current[tid]

    def _call(self, tid: int, name: str, args: str, result: int) -> None:
        process = self._process(tid)
        if result < 0:
            return
        if name in ("clone", "clone3", "fork", "vfork") and result > 0:
            child = self._process(result)  # its first lines may come before this one
            if "CLONE_THREAD" in args:
                self.reads[process] |= self.reads.pop(child, set())
                self.writes[process] |= self.writes.pop(child, set())
                self.current[result] = process
            else:
                self.parent[child] = process
        elif name == "execve" and (argv := re.match(r'"[^"]*",\s*\[(.*?)\]', args, re.S)):
            self.argv[process] = QUOTED.findall(argv.group(1))
        elif name in ("open", "openat") and (opened := OPEN.match(args)):
            path, flags = opened.groups()
            if "O_WRONLY" in flags or "O_RDWR" in flags:
                self.writes[process].add(path)
            elif "O_DIRECTORY" not in flags:
                self.reads[process].add(path)
        elif name.startswith("rename") and len(names := QUOTED.findall(args)) == 2:
            self.writes[process].add(names[1])


def job_reads(trace_path: Path, workdir: Path, jobs: list[Job]) -> list[tuple[Job, set[str]]]:
    """Each attnaudit job of ``jobs`` (the run's :func:`attnaudit.job_costs.read_summary`) that the trace holds,
    with the files its process opened for reading (as the process named them: absolute, or relative to
    ``workdir``). A job is told apart by the files it or its shell wrote (its outputs and its log)."""
    workdir = Path(os.path.realpath(workdir))
    by_written = {f: job for job in jobs for f in (*job.outputs, *job.logs)}
    trace, found = Trace(trace_path), []
    for process, argv in trace.argv.items():
        if argv[1:3] != ["-m", "attnaudit"]:
            continue
        shell = trace.parent.get(process)  # the job's shell opened its log
        written = {relative(workdir, f) for f in trace.writes[process] | trace.writes.get(shell, set())}
        matched = {id(by_written[f]): by_written[f] for f in written if f in by_written}
        assert len(matched) == 1, f"{len(matched)} jobs wrote the files of {' '.join(argv)[:200]}: " + "; ".join(
            f"{job.rule} {sorted(f for f in written if by_written.get(f) is job)[:3]}" for job in matched.values()
        )
        found.append((next(iter(matched.values())), trace.reads[process]))
    return found


def relative(workdir: Path, path: str) -> str | None:
    """``path`` relative to ``workdir`` (a real path), or None if it is outside it."""
    full = os.path.normpath(workdir / path)
    return os.path.relpath(full, workdir) if full.startswith(f"{workdir}{os.sep}") else None


def undeclared_reads(traced: list[tuple[Job, set[str]]], workdir: Path) -> set[tuple[str, str]]:
    """{(rule, file)}: files under ``workdir`` a traced job (:func:`job_reads`) opened for reading that are none of
    its declared inputs (or inside a declared input folder), its outputs or its log."""
    workdir = Path(os.path.realpath(workdir))
    undeclared = set()
    for job, reads in traced:
        known = {*job.inputs, *job.outputs, *job.logs}
        for path in filter(None, (relative(workdir, f) for f in reads)):
            inside = path in known or any(path.startswith(f"{d.rstrip('/')}/") for d in known)
            if not inside and not path.startswith(".snakemake/"):
                undeclared.add((job.rule, path))
    return undeclared
