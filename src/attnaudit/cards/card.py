"""Assemble one model's audit card from the stage summaries that exist for it, and derive its verdict.

Verdict rule (stated on every card): each stage summary carries *checks*, each computed by that stage from its own
numbers with a rule it states, and each is *pass* (evidence that attention explains the prediction), *fail*
(evidence against) or *undetermined*. With ``p`` passes among ``d`` decided checks:

- ``d == 0``: "undetermined (no decided checks)";
- ``p / d ≥ 2/3``: "attention reads as an explanation";
- ``p / d ≤ 1/3``: "attention does not read as an explanation";
- otherwise: "mixed evidence".

The verdict line is that label, ``(p of d checks pass)``, then every decided check's text, so the line can be
traced to the numbers above it; audits expected but missing are named after it. The card renders each summary's
own title, numbers and citations; it names a stage only when that stage's summary file is missing.
"""

from __future__ import annotations

from pathlib import Path

from attnaudit.io import read_json, write_json, write_text

VERDICT_RULE = (
    "Each audit contributes checks computed from its numbers by the rule it states: pass (evidence that attention "
    "explains the prediction), fail (evidence against) or undetermined. With p passes among d decided checks: "
    "p/d ≥ 2/3 → 'attention reads as an explanation'; p/d ≤ 1/3 → 'attention does not read as an explanation'; "
    "otherwise 'mixed evidence'; d = 0 → 'undetermined'. The rules' thresholds are attnaudit's (the cards options), "
    "not the papers': the papers report these quantities without pass/fail cut-offs."
)


def verdict(checks: list[dict], missing: list[str] = ()) -> dict:
    """The card's verdict from its checks (rule: module docstring, :data:`VERDICT_RULE`)."""
    decided = [c for c in checks if c.get("passed") is not None]
    passed = sum(c["passed"] for c in decided)
    if not decided:
        label = "undetermined (no decided checks)"
    elif passed / len(decided) >= 2 / 3:
        label = "attention reads as an explanation"
    elif passed / len(decided) <= 1 / 3:
        label = "attention does not read as an explanation"
    else:
        label = "mixed evidence"
    line = label if not decided else f"{label} ({passed} of {len(decided)} checks pass): "
    line += "; ".join(c["text"] for c in decided)
    if missing:
        line += f" — missing audits: {', '.join(missing)}"
    return {"label": label, "passed": passed, "decided": len(decided), "line": line, "rule": VERDICT_RULE}


def model_metrics(metrics: dict, label_names: list[str] | None) -> dict:
    test = metrics.get("test", {})
    per_class = test.get("per_class_f1") or []
    names = list(label_names or []) or [str(i) for i in range(len(per_class))]
    return {
        "test_accuracy": test.get("accuracy"),
        "test_macro_f1": test.get("macro_f1"),
        "test_n": test.get("n"),
        "per_class_f1": {names[i] if i < len(names) else str(i): f for i, f in enumerate(per_class)},
    }


def build_card(
    dataset: str,
    model: str,
    metrics_path: str,
    summaries: dict[str, str],
    not_run: dict[str, str] | None = None,
    label_names: list[str] | None = None,
    fields: dict | None = None,
) -> dict:
    """``summaries``: stage → summary path expected for this model (a missing file is a missing audit);
    ``not_run``: audit title → why it does not apply to this model."""
    sections, missing = [], []
    for stage, path in summaries.items():
        if Path(path).exists():
            section = read_json(path)
            sections.append(section)
            missing += [f"{section['title']}: {m}" for m in section.get("missing", [])]
        else:
            missing.append(f"{stage} (no summary file {path})")
    checks = [c for s in sections for c in s["checks"]]
    metrics = read_json(metrics_path) if Path(metrics_path).exists() else {}
    if not metrics:
        missing.append(f"model metrics ({metrics_path})")
    return {
        "dataset": dataset,
        "model": model,
        "fields": fields or {},
        "label_names": list(label_names or []),
        "metrics": model_metrics(metrics, label_names),
        "sections": sections,
        "missing": missing,
        "not_run": dict(not_run or {}),
        "verdict": verdict(checks, missing),
    }


def run_card(
    dataset, model, metrics, summaries, out_json, out_html, out_md, not_run=None, manifest=None, fields=None
) -> dict:
    from attnaudit.cards.render import card_html, card_markdown

    label_names = read_json(manifest).get("label_names") if manifest and Path(manifest).exists() else None
    card = build_card(dataset, model, metrics, summaries, not_run, label_names, fields)
    write_json(out_json, card)
    write_text(out_html, card_html(card))
    write_text(out_md, card_markdown(card))
    return card
