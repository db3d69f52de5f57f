"""The explorer's input plan, compact at any grid size: path templates (``{dataset}``, ``{model}``, ``{corpus}``)
per stage, and per model the stages whose per-instance files apply. Expanded here, both by the Snakemake helper
that declares the rule's inputs and by the build, so the two cannot disagree."""

from __future__ import annotations

from attnaudit import AttnauditError

#: what each model needs, in a list of entries and in a plan's ``templates.model`` and ``models``
ENTRY_KEYS = ("dataset", "model", "card", "predictions", "examples")
TEMPLATE_KEYS = ("card", "predictions", "examples", "manifest")
PLAN_MODEL_KEYS = ("dataset", "model", "stages")


def _require(where: str, value, keys: tuple[str, ...]) -> None:
    if not isinstance(value, dict):
        raise AttnauditError(f"explorer --models: {where} is {type(value).__name__}, expected an object")
    missing = [key for key in keys if key not in value]
    if missing:
        raise AttnauditError(f"explorer --models: {where} has no {missing[0]!r} (needs {', '.join(keys)})")


def check_models(models) -> None:
    """``explorer build --models`` is also written by hand: a list of entries or a plan, each part named when it
    is missing or of the wrong kind (instead of a KeyError deep in the build)."""
    if isinstance(models, list):
        if not models:
            raise AttnauditError("explorer --models: an empty list; give at least one model")
        for i, entry in enumerate(models):
            _require(f"entry {i}", entry, ENTRY_KEYS)
        return
    _require("the plan", models, ("templates", "models"))
    _require("templates", models["templates"], ("model",))
    _require("templates.model", models["templates"]["model"], TEMPLATE_KEYS)
    if not isinstance(models["models"], list) or not models["models"]:
        raise AttnauditError("explorer --models: the plan's models is not a non-empty list")
    for i, spec in enumerate(models["models"]):
        _require(f"models[{i}]", spec, PLAN_MODEL_KEYS)
        unknown = [stage for stage in spec["stages"] if stage not in models["templates"]]
        if unknown and "summary" not in models["templates"]:  # a stage without per-instance files has its summary
            raise AttnauditError(
                f"explorer --models: models[{i}].stages: {unknown[0]!r} has no template; the plan's templates are "
                f"{', '.join(models['templates'])}"
            )


def expand_plan(plan: dict) -> list[dict]:
    """``{templates: {"model": {card, predictions, examples, manifest, metrics?}, <stage>: [source], summary?},
    models: [{dataset, model, corpus, stages}]}`` → one entry per model: ``{dataset, model, card, predictions,
    examples, manifest, metrics?, sources, summaries?}`` (sources de-duplicated by path, first stage first;
    ``summaries``: stage → the stage's summary of the model, from the ``summary`` template with ``{stage}``)."""
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
        if "summary" in plan["templates"]:
            summary = plan["templates"]["summary"]
            entry["summaries"] = {stage: summary.format(stage=stage, **values) for stage in spec["stages"]}
        entries.append(entry | {"sources": sources})
    return entries
