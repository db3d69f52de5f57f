"""Class names in the J&W tables, figures and heatmaps and T&Š's Fig. 2: the corpus manifest's ``label_names`` (a
user corpus's ``label_names`` config, the registry's names for the built-in corpora), the class index where there are
none."""

from __future__ import annotations

from pathlib import Path

from attnaudit.io import read_json

ALL_CLASSES = -1  # predicted_class of the rows over every instance (J&W's "Overall" for bAbI, CNN)


def label_names(manifest: str | Path | None) -> list[str]:
    if not manifest:
        return []
    return [str(name) for name in read_json(manifest).get("label_names") or []]


def class_name(names: list[str], klass) -> str:
    klass = int(klass)
    if klass == ALL_CLASSES:
        return "all"
    return names[klass] if 0 <= klass < len(names) else str(klass)
