"""The explorer's input plan, compact at any grid size: path templates (``{dataset}``, ``{model}``, ``{corpus}``)
per stage, and per model the stages whose per-instance files apply. Expanded here, both by the Snakemake helper
that declares the rule's inputs and by the build, so the two cannot disagree."""

from __future__ import annotations


def expand_plan(plan: dict) -> list[dict]:
    """``{templates: {"model": {card, predictions, examples, manifest}, <stage>: [source]}, models: [{dataset,
    model, corpus, stages}]}`` → one entry per model: ``{dataset, model, card, predictions, examples, manifest,
    sources}`` (sources de-duplicated by path, first stage first)."""
    entries = []
    for spec in plan["models"]:
        values = {"dataset": spec["dataset"], "model": spec["model"], "corpus": spec.get("corpus", "")}
        entry = {"dataset": spec["dataset"], "model": spec["model"]}
        entry |= {key: path.format(**values) for key, path in plan["templates"]["model"].items()}
        sources, seen = [], set()
        for stage in spec["stages"]:
            for source in plan["templates"].get(stage, []):
                path = source["path"].format(**values)
                if path not in seen:
                    seen.add(path)
                    sources.append({**source, "path": path})
        entries.append(entry | {"sources": sources})
    return entries
