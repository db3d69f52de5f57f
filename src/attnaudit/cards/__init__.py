"""Audit cards (one per model): what each audit stage found, with bootstrap CIs, and a verdict derived by a stated
rule (:mod:`attnaudit.cards.card`). Stages contribute through summary files (:mod:`attnaudit.cards.summary`).

``python -m attnaudit cards summary --stage STAGE --inputs JSON ...`` runs ``attnaudit.<stage>.card.summary``;
``python -m attnaudit cards card ...`` assembles the card (JSON, HTML, Markdown) from whatever summaries exist.
"""

from __future__ import annotations

from attnaudit.io import json_arg


def summary(stage: str, inputs: dict, dataset: str, model: str, options: dict | None, out: str) -> dict:
    from attnaudit.cards.summary import run_summary

    return run_summary(stage, inputs, dataset, model, options, out)


def card(dataset, model, metrics, summaries, out_json, out_html, out_md, not_run=None, manifest=None, fields=None):
    from attnaudit.cards.card import run_card

    return run_card(dataset, model, metrics, summaries, out_json, out_html, out_md, not_run, manifest, fields)


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("cards", help="audit cards: per-stage summaries and the card per model")
    sub = p.add_subparsers(dest="cards_command", required=True)

    s = sub.add_parser("summary", help="one stage's summary of one model (attnaudit.<stage>.card.summary) → JSON")
    s.add_argument("--stage", required=True, help="package name of the stage, e.g. jain_wallace")
    s.add_argument("--inputs", required=True, help="JSON {name: path}, inline or @file")
    s.add_argument("--dataset", required=True)
    s.add_argument("--model", required=True)
    s.add_argument("--options", default="", help="JSON: the cards config block")
    s.add_argument("--out", required=True)
    s.set_defaults(func=lambda a: summary(a.stage, json_arg(a.inputs), a.dataset, a.model, json_arg(a.options), a.out))

    c = sub.add_parser("card", help="assemble one model's card from its summaries → JSON, HTML, Markdown")
    c.add_argument("--dataset", required=True)
    c.add_argument("--model", required=True)
    c.add_argument("--metrics", required=True, help="the model's metrics.json")
    c.add_argument("--manifest", default=None, help="the corpus manifest.json (label names)")
    c.add_argument("--summaries", required=True, help="JSON {stage: summary path}; a missing file is reported")
    c.add_argument("--not-run", default="", help="JSON {audit: why it does not apply to this model}")
    c.add_argument("--fields", default="", help="JSON: the model's sheet fields")
    c.add_argument("--out-json", required=True)
    c.add_argument("--out-html", required=True)
    c.add_argument("--out-md", required=True)
    c.set_defaults(
        func=lambda a: card(
            a.dataset,
            a.model,
            a.metrics,
            json_arg(a.summaries),
            a.out_json,
            a.out_html,
            a.out_md,
            json_arg(a.not_run),
            a.manifest,
            json_arg(a.fields),
        )
    )
