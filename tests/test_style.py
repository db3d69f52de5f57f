"""Checks CI runs on the whole tree (ruff, ruff format, snakefmt, snakemake --lint) and a dry run of every
configuration the repository ships: a config that no longer builds its DAG fails here, not on a user's cluster."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, SHIPPED_CONFIGS, WORKFLOW
from forked_snakemake import run_snakemake

BIN = Path(sys.executable).parent


def run(cmd, **kwargs):
    return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=600, **kwargs)


@pytest.mark.parametrize(
    "command",
    [["ruff", "check", "."], ["ruff", "format", "--check", "."], ["snakefmt", "--check", "Snakefile", "rules"]],
    ids=["ruff-check", "ruff-format", "snakefmt"],
)
def test_tree_is_clean(command):
    proc = run([str(BIN / command[0]), *command[1:]])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_lint_is_clean():
    proc = run_snakemake([*WORKFLOW, "--lint"], cwd=REPO, timeout=600)
    assert proc.returncode == 0 and "Congratulations" in proc.stdout + proc.stderr, proc.stdout + proc.stderr


@pytest.mark.parametrize("config", SHIPPED_CONFIGS, ids=[str(c.relative_to(REPO)) for c in SHIPPED_CONFIGS])
def test_every_config_builds_its_dag(config, tmp_path):
    proc = run_snakemake(
        [
            *WORKFLOW,
            "-n",
            "--quiet",
            "rules",
            "--directory",
            str(tmp_path),
            "--configfile",
            str(config),
            "--replace-workflow-config",
        ],
        cwd=REPO,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


@pytest.mark.parametrize("caption", sorted((REPO / "report").rglob("*.rst")), ids=lambda p: p.name)
def test_report_captions_are_valid_rst(caption):
    """``snakemake --report`` renders each caption as reStructuredText: a stray ``|x|`` (a substitution) or a
    broken role would print as an error box in the report."""
    import io

    import docutils.core

    errors = io.StringIO()
    docutils.core.publish_doctree(
        caption.read_text(), settings_overrides={"warning_stream": errors, "report_level": 3, "halt_level": 5}
    )
    assert not errors.getvalue(), errors.getvalue()


TEXT_IO = re.compile(r"\.(read_text|write_text|open)\(|(?<![\w.])open\(")


def test_every_text_file_is_read_and_written_as_utf8():
    """Cards, tables, the explorer's data and every JSON the stages exchange hold a corpus's own text and labels: on a
    machine whose locale is not UTF-8 (Windows' cp1252) a file opened without ``encoding`` would fail on a Hebrew label
    or mangle an accented one. Every text read or write in the package names its encoding (binary ones their mode)."""
    unnamed = []
    for path in sorted((REPO / "src").rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            call = TEXT_IO.search(line.split("#")[0])
            if call and not re.search(r"encoding=|[\"'][rwax]b[\"']|(tarfile|gzip|bz2|lzma)\.open\(|urlopen", line):
                unnamed.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not unnamed, "\n".join(unnamed)
