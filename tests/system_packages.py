"""Debian packages some tests need (Chromium, strace, a CJK font): installed with apt-get where they are missing and
this process may (CI runs as root), as tests/cluster installs Slurm; elsewhere the reason they cannot be, for which
such a test skips, or fails under CI (:func:`unavailable`)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path


def apt_install(packages: list[str], installed: Callable[[], bool]) -> str | None:
    """Install ``packages`` unless ``installed()``; None once they are, else why they are not."""
    if installed():
        return None
    names = " ".join(packages)
    if shutil.which("apt-get") is None:
        return f"{names} not installed and apt-get unavailable"
    if os.geteuid() != 0:
        return f"{names} not installed and installing with apt-get needs root"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages]
    lists = [p for p in Path("/var/lib/apt/lists").glob("*") if p.name not in ("lock", "partial", "auxfiles")]
    if not lists:
        subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True)
    if subprocess.run(cmd, env=env, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True)  # stale lists: refresh once
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            return f"apt-get install {names} failed: {proc.stderr.strip()[-300:]}"
    return None if installed() else f"apt-get installed {names}, but it is still not found"


def unavailable(reason: str) -> None:
    """Skip a test whose system package this machine cannot have; under CI, which installs it as root, fail
    instead: a missing package there is never a silent skip."""
    import pytest

    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)
