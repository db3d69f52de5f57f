"""Corpora stage: raw corpus → one verified ``documents.parquet`` + ``manifest.json``.

``documents.parquet``: ``id`` (str, stable), ``split`` (train/dev/test, or "all" without an official split),
``label`` (int64, 0..C-1), ``text`` (raw; empty documents kept) and, for ``planted`` only, ``important``
(whitespace-word positions of the planted markers); its pandas ``attrs`` hold ``label_names`` (label i's class
name), so that the tokenise job names classes without reading the manifest. ``manifest.json``: corpus,
label_names, source, every verified file with its sha256, counts per split × label, the tokeniser ``defaults``
(J&W §3), options, seed.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pandas as pd

from attnaudit import AttnauditError, ConfigKeyError, __version__
from attnaudit.corpora.fetch import fetch_corpus
from attnaudit.corpora.registry import CorpusSpec, get_spec
from attnaudit.io import home_expanded, write_json, write_parquet

log = logging.getLogger(__name__)
SPLIT_ORDER = ("train", "dev", "test", "all")


def resolved_options(spec: CorpusSpec, options: dict | None) -> dict:
    """The spec's option defaults updated with ``options`` (``corpora.options.<name>``); unknown keys are rejected
    (the workflow calls this before any job runs)."""
    options = dict(options or {})
    unknown = sorted(set(options) - set(spec.options))
    if unknown:
        expected = (
            f"expected one of {', '.join(sorted(spec.options))}" if spec.options else f"corpus {spec.name} takes none"
        )
        raise ConfigKeyError(("corpora", "options", spec.name, unknown[0]), f"unknown option; {expected}")
    return {**spec.options, **options}


def _check(frame: pd.DataFrame, label_names: list[str], name: str) -> None:
    """The output contract, so a reader bug cannot reach the tokeniser."""
    bad_split = set(frame["split"]) - set(SPLIT_ORDER)
    if bad_split:
        raise AttnauditError(f"corpus {name!r}: unexpected split values {sorted(bad_split)}")
    if len(frame) and not frame["label"].between(0, len(label_names) - 1).all():
        raise AttnauditError(f"corpus {name!r}: labels outside 0..{len(label_names) - 1} ({label_names})")
    if frame["id"].duplicated().any():
        raise AttnauditError(f"corpus {name!r}: duplicate ids, e.g. {frame['id'][frame['id'].duplicated()].iloc[0]}")


def counts(frame: pd.DataFrame, label_names: list[str]) -> dict[str, dict[str, int]]:
    """{split: {label name: documents}} in the order train, dev, test, all."""
    table = frame.groupby(["split", "label"]).size()
    return {
        split: {label_names[i]: int(table.get((split, i), 0)) for i in range(len(label_names))}
        for split in SPLIT_ORDER
        if split in set(frame["split"])
    }


def build_corpus(
    name: str,
    *,
    mirror: str | Path | None = None,
    raw_dir: str | Path,
    options: dict | None = None,
    user_corpora: dict | None = None,
    seed: int = 0,
) -> tuple[pd.DataFrame, dict]:
    """Read corpus ``name`` (registry or ``user_corpora``) into (documents, manifest); writes nothing except
    verified raw files in ``raw_dir`` when the mirror does not hold the corpus."""
    spec = get_spec(name, user_corpora)
    opts = resolved_options(spec, options)
    if spec.files:
        located = fetch_corpus(spec, Path(mirror) if mirror else None, home_expanded(raw_dir))
        root, source, files = located.root, located.source, located.files
    else:
        root, files = None, []
        source = (
            {"kind": "generated", "generator": "numpy.random.default_rng(seed)"}
            if name == "planted"
            else {"kind": "user_data", "path": str(opts.get("path"))}  # MIMIC: the user's credentialed folder
            if spec.user_data
            else {"kind": "user", "path": str((user_corpora or {}).get(name, {}).get("path"))}
        )
    log.info("%s: reading documents", name)
    frame, info = spec.reader(root, opts, seed)
    label_names = list(info.pop("label_names", None) or spec.label_names)
    files = info.pop("files", None) or files
    _check(frame, label_names, name)
    frame.attrs["label_names"] = label_names  # stored in the parquet file (pandas' PANDAS_ATTRS metadata)
    if spec.query and "query" not in frame.columns:
        raise AttnauditError(f"corpus {name!r}: a QA/NLI reader must give every document a query")
    manifest: dict[str, Any] = {
        "corpus": name,
        "description": spec.description,
        "citation": spec.citation,
        "label_names": label_names,
        "source": source,
        "files": files,
        "counts": counts(frame, label_names),
        "n_documents": int(len(frame)),
        "reader": info,
        "defaults": spec.defaults,
        "options": opts,
        "seed": seed,
        "attnaudit_version": __version__,
    }
    log.info("%s: %d documents %s", name, len(frame), manifest["counts"])
    return frame, manifest


def run(
    name: str,
    *,
    out: str | Path,
    manifest: str | Path,
    raw_dir: str | Path,
    mirror: str | Path | None = None,
    options: dict | None = None,
    user_corpora: dict | None = None,
    seed: int = 0,
) -> dict:
    """Build the corpus, then write ``out`` (documents.parquet) and ``manifest`` (JSON), each atomically."""
    frame, meta = build_corpus(
        name, mirror=mirror, raw_dir=raw_dir, options=options, user_corpora=user_corpora, seed=seed
    )
    write_parquet(out, frame)
    write_json(manifest, meta)
    log.info("%s: wrote %s and %s", name, out, manifest)
    return meta
