"""What a job's process used, written as the last line of its log and read back by ``job-costs``.

Snakemake's ``benchmark:`` files sample a job's CPU time: every 0.5 s for its first 15 s, then every 30 s, and
what the job uses after its last sample is never counted. In the default study every job of 15–45 s wall is
recorded at about 15 CPU s (a faithfulness job of 38 s at 15.2), and the rules' ``cpu_time`` sums come to 2,570 CPU s
against 3,507 job-seconds on two busy cores. The process itself knows exactly:
``getrusage`` (user + system time of every thread, and of any child it waited for), its peak RSS (its own memory
map's, :func:`own_peak_rss_mb`), and its wall
time from its creation, start-up and imports included. Every ``python -m attnaudit`` command logs that at exit
(:func:`usage_line`), and :func:`read_usage` finds it in a log.
"""

from __future__ import annotations

import os
import re
import resource
import sys
import time
from pathlib import Path

PREFIX = "process usage:"
_LINE = re.compile(
    re.escape(PREFIX) + r" wall (?P<wall>[0-9.]+) s, CPU (?P<cpu>[0-9.]+) s \(user [0-9.]+, system [0-9.]+\), "
    r"peak RSS (?P<rss>[0-9.]+) MB"
)


def process_age() -> float:
    """Seconds since this process was created. On Linux from its start time in clock ticks since boot (exact to the
    tick): psutil's ``create_time`` adds that to the boot time in whole seconds, up to a second off."""
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            ticks = int(stat.read().rsplit(")", 1)[1].split()[19])  # field 22, starttime; the name may hold spaces
        return time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, AttributeError, ValueError, IndexError):  # not Linux
        import psutil  # installed with Snakemake

        return time.time() - psutil.Process().create_time()


#: ``ru_maxrss`` is in bytes on macOS, KiB on Linux
MAXRSS_PER_MB = 1 << 20 if sys.platform == "darwin" else 1 << 10


def own_peak_rss_mb(own: resource.struct_rusage) -> float:
    """This process's peak resident set. On Linux the high-water mark of its own memory map (``VmHWM``): ``getrusage``'s
    ``ru_maxrss`` also keeps that of the map the process replaced at ``exec``, its launcher's when the launcher
    execs it directly (``subprocess.run``, ``bash -c`` with one command and no redirection), so a 13 MB child of a
    600 MB parent said 613 MB."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024  # kB
    except (OSError, StopIteration, ValueError):  # no procfs (macOS)
        return own.ru_maxrss / MAXRSS_PER_MB


def usage_line() -> str:
    """``process usage: wall W s, CPU C s (user U, system S), peak RSS R MB`` of this process so far (its children
    that have ended included)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    user, system = own.ru_utime + children.ru_utime, own.ru_stime + children.ru_stime
    # a child's ru_maxrss may carry this process's map at the child's start: never above this process's own peak
    peak = max(own_peak_rss_mb(own), children.ru_maxrss / MAXRSS_PER_MB)
    return (
        f"{PREFIX} wall {process_age():.2f} s, CPU {user + system:.2f} s (user {user:.2f}, system {system:.2f}), "
        f"peak RSS {peak:.0f} MB"
    )


def read_usage(log: str | Path) -> dict[str, float] | None:
    """The wall seconds, CPU seconds and peak RSS (MB) of the last :func:`usage_line` in ``log``; ``None`` when the
    log is missing or has none (a job of an older version, or one that SIGKILL ended; SIGTERM, a Slurm time
    limit's first signal, still lets the job write it: ``cli.Terminated``)."""
    try:
        text = Path(log).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    matches = list(_LINE.finditer(text))
    if not matches:
        return None
    last = matches[-1]
    return {"wall_seconds": float(last["wall"]), "cpu_seconds": float(last["cpu"]), "peak_rss_mb": float(last["rss"])}
