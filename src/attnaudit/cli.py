"""``python -m attnaudit <stage> ...``: every pipeline stage is a subcommand, so it runs without Snakemake."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import json
import logging
import os
import signal
import sys
import threading

from attnaudit import AttnauditError
from attnaudit.process_usage import process_age, usage_line

# one entry per stage module; each exposes add_cli(subparsers)
STAGES = [
    "corpora",
    "tokenise",
    "embeddings",
    "train",
    "importance",
    "job_costs",
    "jain_wallace",
    "throughput",
    "saliency",
    "wiegreffe_pinter",
    "tutek_snajder",
    "results_summary",
    "tables",
    "cards",
    "explorer",
]
ALIASES = {
    "results": "results_summary",
    "bench": "throughput",
    "benchmarks": "job_costs",
    "job-costs": "job_costs",
    "jain-wallace": "jain_wallace",
    "jw": "jain_wallace",
    "wiegreffe-pinter": "wiegreffe_pinter",
    "wp": "wiegreffe_pinter",
    "tutek-snajder": "tutek_snajder",
    "ts": "tutek_snajder",
}
# environment variables that change how a job runs (not what it computes): written at the top of every job's log.
# OpenMP's wait policy is left to OpenMP (spin briefly, then sleep): a job given N threads owns N cores (Snakemake
# and Slurm reserve them), where a passive wait made two threads slower than one; on a machine shared with other
# work, OMP_WAIT_POLICY=PASSIVE keeps waiting threads off the cores (docs/performance.md, "Two threads").
RUNTIME_VARIABLES = (
    "GLIBC_TUNABLES",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OMP_WAIT_POLICY",
    "CUDA_VISIBLE_DEVICES",
    "ATTNAUDIT_TANH",
)


def stages_for(argv: list[str]) -> list[str]:
    """Only the named stage's module (each job imports what it uses: scikit-learn, Captum, ... cost seconds per
    Snakemake job); every stage for ``--help`` or an unknown command."""
    command = next((token for token in argv if not token.startswith("-")), None)
    stage = ALIASES.get(command, command)
    return [stage] if stage in STAGES else STAGES


#: flags of every command, accepted anywhere on the line (``attnaudit train ... --debug`` as well as before it)
GLOBAL_FLAGS = {"-v": "verbose", "--verbose": "verbose", "--debug": "debug"}


def build_parser(stages: list[str] = STAGES) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attnaudit", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log at debug level (anywhere on the line)")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error (anywhere on the line)")
    sub = parser.add_subparsers(dest="command", required=True)
    for stage in stages:
        importlib.import_module(f"attnaudit.{stage}").add_cli(sub)
    return parser


#: the errors of a path argument that is missing or not a file, and how to say them
PATH_ERRORS = {
    FileNotFoundError: "no such file or directory",
    IsADirectoryError: "is a directory, expected a file",
    NotADirectoryError: "a part of the path is not a directory",
    PermissionError: "permission denied",
}


def path_error(err: OSError) -> str:
    """``[Errno 2] No such file or directory: 'x'`` → ``x: no such file or directory``."""
    what = next(text for cls, text in PATH_ERRORS.items() if isinstance(err, cls))
    return f"{err.filename or err.args[0]}: {what}"


class Terminated(BaseException):
    """SIGTERM arrived: a scheduler's time limit (Slurm sends it, then SIGKILL after its ``KillWait``), ``scancel``,
    or ``kill``. Raised in the main thread by :func:`raise_terminated`, so every ``finally`` runs: an output being
    written loses its temporary file (``io.atomic_path``) and the log's last line says what the job used. A
    ``BaseException``, like ``KeyboardInterrupt``, so that no ``except Exception`` takes it for an error."""


def raise_terminated(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the process at once, as before
    raise Terminated


@contextlib.contextmanager
def stopping_on_sigterm():
    """SIGTERM raises :class:`Terminated` inside the block (only the main thread can set a handler)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    flags = {GLOBAL_FLAGS[token] for token in argv if token in GLOBAL_FLAGS}
    args = build_parser(stages_for(argv)).parse_args([token for token in argv if token not in GLOBAL_FLAGS])
    for flag in flags:
        setattr(args, flag, True)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    runtime = [f"{name}={os.environ[name]}" for name in RUNTIME_VARIABLES if name in os.environ]
    logging.getLogger("attnaudit").info("%s; %s", args.command, ", ".join(runtime) or "no runtime variables set")
    error, terminated = None, False
    try:
        with stopping_on_sigterm():
            args.func(args)
    except Terminated:
        terminated = True
    except (AttnauditError, json.JSONDecodeError, *PATH_ERRORS) as err:
        # a user-caused failure: the message names the file or key and the fix (stages are also run by hand: a
        # path argument that is missing or not a file, a JSON argument that is not JSON)
        if args.debug:
            raise
        error = err
        if isinstance(err, json.JSONDecodeError):
            error = f"an argument is not valid JSON ({err.msg}, column {err.colno}): {err.doc[:80]}"
        elif isinstance(err, tuple(PATH_ERRORS)):
            error = path_error(err)
    finally:  # every job's log says what the job used (read by job-costs), a failed job's too
        logging.getLogger("attnaudit").info("%s", usage_line())
    if terminated:
        print(
            f"attnaudit {args.command}: stopped by SIGTERM after {process_age():.0f} s (a scheduler's time limit, "
            "scancel or kill); nothing half-written was kept. Rerun the same command; on a cluster, raise the rule's "
            "runtime first if it was the time limit",
            file=sys.stderr,
        )
        return 128 + signal.SIGTERM  # what a shell reports for a process that SIGTERM ended
    if error is not None:
        print(f"attnaudit {args.command}: error: {error}", file=sys.stderr)  # once, last: a job's log is its stderr
        return 2
    return 0


def run() -> None:
    """``python -m attnaudit`` and the ``attnaudit`` command: :func:`main`, then leave without the interpreter's
    teardown. Freeing every module and object at exit cost a job 0.4–1 s after its work was done (torch's alone
    ~0.35 s, with spaCy's ~0.5 s; the tokenise job of a small corpus took 3.2 s wall instead of 2.1), ~130 of the
    default study's job-seconds (docs/performance.md, *Job exit*). By then every output is written, closed and
    renamed into place (``io.atomic_path``), so the atexit handlers run, the streams are flushed and the process
    exits with ``os._exit``. Not while a thread other than the main one still runs (the interpreter would wait for
    it), nor on an exception, whose traceback is printed as usual."""
    code = main()
    if any(
        thread.is_alive() and not thread.daemon
        for thread in threading.enumerate()
        if thread is not threading.main_thread()
    ):
        sys.exit(code)
    atexit._run_exitfuncs()  # logging's shutdown (it flushes the handlers) among them
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe (`attnaudit job-costs | head`) or stream
            stream.flush()
    os._exit(code)
