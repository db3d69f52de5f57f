"""``python -m snakemake …`` for the tests, forked from a process that has already imported Snakemake.

A dry run that stops at a config error takes ~1.8 s, of which ~1.2 s is importing Snakemake (its CLI pulls in
pandas, pyarrow and SQLAlchemy) and the workflow's modules; the suite runs some 200 Snakemake commands. One server
process per pytest worker imports them once and forks a child for each command. The child is the command from
Snakemake's ``__main__`` on: the same arguments (``sys.argv``), working directory, environment, standard streams
(stdin /dev/null, stdout and stderr captured as text, as ``subprocess.run(capture_output=True, text=True)``) and
exit status, in a process group of its own that a timeout kills whole. Only the interpreter's start-up and those
imports are shared; each child starts from the same freshly imported state, so no run sees another's.

A command whose environment would change the interpreter's start-up (a ``PYTHON*`` variable other than the server's)
runs as a subprocess, as does every command where no server can run.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

#: What every Snakemake command of the tests imports before its first line of workflow: Snakemake's command line and
#: the package modules rules/common.smk imports (the rest load in the child, as they would anyway).
PRELOADED = (
    "snakemake.cli",
    "attnaudit.cards.summary",
    "attnaudit.config_errors",
    "attnaudit.corpora.build",
    "attnaudit.corpora.readers",
    "attnaudit.embeddings.pretrained",
    "attnaudit.explorer.plan",
    "attnaudit.importance.options",
    "attnaudit.modelsheet",
    "attnaudit.tokenise.tokenisation",
    "attnaudit.wiegreffe_pinter.options",
)


def serve(requests, replies) -> None:
    """The server's loop: a JSON request per line, each answered with the child's pid, then its exit status. The
    child leaves this loop through ``SystemExit`` (or any exception) and ends as the interpreter ends a script: its
    atexit handlers run, a traceback is printed, the status is the command's."""
    import importlib
    import runpy

    for module in PRELOADED:
        importlib.import_module(module)
    for line in requests:
        request = json.loads(line)
        sys.stdout.flush()  # nothing of the server's in the child's streams
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            replies.close()
            _become(request)
            runpy.run_module("snakemake", run_name="__main__", alter_sys=True)
            sys.exit(0)
        replies.write(json.dumps({"pid": pid}) + "\n")
        replies.flush()
        _, status = os.waitpid(pid, 0)
        replies.write(json.dumps({"status": os.waitstatus_to_exitcode(status)}) + "\n")
        replies.flush()


def _become(request: dict) -> None:
    """In the child: a process group of its own, the command's directory, environment, standard streams and
    ``sys.argv``, and ``sys.path`` as ``python -m`` starts it (the working directory first)."""
    os.setpgid(0, 0)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for fd, (path, flags) in enumerate(
        [(os.devnull, os.O_RDONLY), (request["stdout"], os.O_WRONLY), (request["stderr"], os.O_WRONLY)]
    ):
        opened = os.open(path, flags)
        os.dup2(opened, fd)
        os.close(opened)
    sys.argv = ["snakemake", *request["args"]]
    sys.path.insert(0, request["cwd"])


class Server:
    """One server process (started on first use, ended when the tests' process exits)."""

    def __init__(self):
        self.env = dict(os.environ)
        self.process = subprocess.Popen(
            [sys.executable, __file__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
            cwd=Path(__file__).parent,
            env=self.env,
        )
        self.pending = b""
        atexit.register(self.close)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait(timeout=30)

    def startup_env(self) -> dict:
        return {k: v for k, v in self.env.items() if k.startswith("PYTHON")}

    def run(self, args: list[str], cwd: str, env: dict, timeout: float | None) -> subprocess.CompletedProcess:
        with tempfile.TemporaryDirectory(prefix="forked-snakemake-") as tmp:
            out, err = Path(tmp, "stdout"), Path(tmp, "stderr")
            out.touch()
            err.touch()
            request = {"args": args, "cwd": cwd, "env": env, "stdout": str(out), "stderr": str(err)}
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            pid = json.loads(self._reply(timeout=60))["pid"]
            try:
                status = json.loads(self._reply(timeout))["status"]
            except subprocess.TimeoutExpired:
                os.killpg(pid, signal.SIGKILL)
                self._reply(timeout=60)
                raise subprocess.TimeoutExpired(["snakemake", *args], timeout, _text(out), _text(err)) from None
            return subprocess.CompletedProcess(["snakemake", *args], status, _text(out), _text(err))

    def _reply(self, timeout: float | None) -> str:
        """The server's next line (read from the pipe as it comes, so a line already there is never waited for)."""
        fd = self.process.stdout.fileno()
        while b"\n" not in self.pending:
            if not select.select([fd], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired("forked snakemake", timeout)
            if not (chunk := os.read(fd, 4096)):
                raise RuntimeError(f"the forked-Snakemake server ended (exit status {self.process.wait()})")
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return line.decode()


def _text(path: Path) -> str:
    """A captured stream as ``subprocess.run(text=True)`` decodes it (the locale's encoding, universal newlines)."""
    with open(path, errors="strict") as f:
        return f.read()


_server: Server | None = None


def run_snakemake(
    args: list[str], *, cwd: str | Path | None = None, env: dict | None = None, timeout: float | None = None
) -> subprocess.CompletedProcess:
    """``subprocess.run([sys.executable, "-m", "snakemake", *args], capture_output=True, text=True, …)``, forked
    from the server where the environment allows it."""
    global _server
    env = dict(os.environ if env is None else env)
    cwd = str(cwd or os.getcwd())
    if _server is None and hasattr(os, "fork"):
        _server = Server()
    python_env = {k: v for k, v in env.items() if k.startswith("PYTHON")}
    if _server is None or _server.process.poll() is not None or python_env != _server.startup_env():
        command = [sys.executable, "-m", "snakemake", *args]
        return subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)
    return _server.run(list(args), cwd, env, timeout)


if __name__ == "__main__":
    replies = os.fdopen(os.dup(1), "w")  # the protocol's channel; fd 1 itself goes to /dev/null, so that
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # nothing an import prints can corrupt it
    del sys.path[0]  # this file's directory; a child puts its working directory there
    serve(sys.stdin, replies)
