"""``python -m attnaudit tables combine``: one paper's tables over every dataset of a run, built from the
per-dataset tables its stage wrote (``results/tables/<paper>/<dataset>/<file>``).

The per-dataset files are the record a run keeps: a second experiment with other datasets writes its own and
never erases the first's. The combined file (``results/tables/<paper>/<file>``) covers the datasets of the run
that built it, for the report and the README. A ``.csv`` is the concatenation (every table has a ``dataset``
column); a ``.md`` from one generator (the same text and table headers for every dataset) keeps its text once with
the rows of every dataset in its tables, and any other ``.md`` gets one section per dataset.
"""

from __future__ import annotations

import argparse
import json
import re
from html import escape
from pathlib import Path

import pandas as pd

from attnaudit import AttnauditError
from attnaudit.io import unreadable, write_text

# CommonMark/GFM inline syntax; "_" inside a word (tau_g, sst_small) can neither open nor close emphasis
_MARKDOWN_SYNTAX = re.compile(r"[\\`*\[\]()#~|]|(?<![^\W_])_|_(?![^\W_])")


def markdown_cell(text) -> str:
    """``text`` as literal inline Markdown (a table cell, a list item): ``& < >`` as HTML entities, a backslash
    before every character of CommonMark/GFM link, emphasis, code, heading, strikethrough or table syntax (no
    ``[x](javascript:…)`` link or ``*emphasis*`` comes alive) and line breaks as spaces (the text stays on its row)."""
    text = _MARKDOWN_SYNTAX.sub(lambda m: "\\" + m.group(), escape(str(text), quote=False))
    return re.sub(r"\r\n?|\n", " ", text)


def combined_csv(paths: dict[str, Path]) -> str:
    frames = []
    for path in paths.values():
        try:
            frame = pd.read_csv(path)
        except (pd.errors.EmptyDataError, pd.errors.ParserError) as err:
            raise unreadable(path, err) from err
        if len(frame) and "dataset" not in frame.columns:
            raise AttnauditError(f"{path}: a per-dataset table needs a 'dataset' column to be combined")
        frames.append(frame)
    frames = [f for f in frames if len(f)] or frames[:1]
    return pd.concat(frames, ignore_index=True).to_csv(index=False, float_format="%.6g")


def blocks(text: str) -> list[tuple[str, list[str]]]:
    """A markdown document as ("text", lines) and ("table", [header, separator]) + ("rows", lines) blocks."""
    lines = text.rstrip("\n").split("\n")
    header = lambda i: lines[i].startswith("|") and i + 1 < len(lines) and lines[i + 1].startswith("|---")  # noqa: E731
    out: list[tuple[str, list[str]]] = []
    i = 0
    while i < len(lines):
        j = i + 2 if header(i) else i
        if header(i):
            out.append(("table", lines[i:j]))
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            out.append(("rows", lines[i + 2 : j]))
        else:
            while j < len(lines) and not header(j):
                j += 1
            out.append(("text", lines[i:j]))
        i = j
    return out


def combined_markdown(paths: dict[str, Path]) -> str:
    """One document: when every dataset's document has the same text and table headers (a table generator's
    output), its tables with the rows of every dataset; otherwise one section per dataset."""
    texts = {dataset: path.read_text(encoding="utf-8") for dataset, path in paths.items()}
    if len(texts) == 1:
        return next(iter(texts.values()))
    parsed = [blocks(text) for text in texts.values()]
    shapes = {tuple((kind, tuple(lines) if kind != "rows" else None) for kind, lines in doc) for doc in parsed}
    if len(shapes) == 1:
        merged = [
            lines if kind != "rows" else [row for doc in parsed for row in doc[k][1]]
            for k, (kind, lines) in enumerate(parsed[0])
        ]
        return "\n".join(line for lines in merged for line in lines) + "\n"
    sections = [f"## {dataset}\n\n" + re.sub(r"(?m)^(#+) ", r"##\1 ", text.rstrip()) for dataset, text in texts.items()]
    return "\n\n".join(sections) + "\n"


def combine(out_dir: str | Path, tables: dict[str, list[str]]) -> list[Path]:
    """``tables``: file name → datasets; reads ``out_dir/<dataset>/<name>`` and writes ``out_dir/<name>``."""
    out_dir, written = Path(out_dir), []
    for name, datasets in tables.items():
        paths = {d: out_dir / d / name for d in datasets}
        missing = [str(p) for p in paths.values() if not p.exists()]
        if missing:
            raise AttnauditError(f"cannot combine {name}: missing per-dataset tables {missing}")
        text = combined_csv(paths) if name.endswith(".csv") else combined_markdown(paths)
        write_text(out_dir / name, text)
        written.append(out_dir / name)
    return written


def _run(args: argparse.Namespace) -> None:
    combine(args.out_dir, json.loads(args.tables))


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("tables", help="tables over every dataset of a run, from the per-dataset tables")
    sub = p.add_subparsers(dest="tables_command", required=True)
    c = sub.add_parser("combine", help="concatenate results/tables/<paper>/<dataset>/<file> into <paper>/<file>")
    c.add_argument("--out-dir", required=True, help="results/tables/<paper>")
    c.add_argument("--tables", required=True, help='JSON {"file name": [datasets]}')
    c.set_defaults(func=_run)
