"""The offline explorer: a static site over every model's audit card and its test instances
(:mod:`attnaudit.explorer.build`; the page logic is ``static/explorer.js``, vendored, nothing fetched).

``python -m attnaudit explorer build --models JSON --out-dir results/explorer`` writes ``index.html``; open it from
disk (``file://``), no server needed.
"""

from __future__ import annotations

from attnaudit.io import json_arg


def build(models: list[dict] | dict, out_dir: str, split: str = "test", options: dict | None = None) -> dict:
    """``models``: a list of model entries, or a plan (:func:`attnaudit.explorer.plan.expand_plan`)."""
    from attnaudit.explorer.build import build_site
    from attnaudit.explorer.plan import check_models, expand_plan

    check_models(models)
    entries = expand_plan(models) if isinstance(models, dict) else models
    return build_site(entries, out_dir, split=split, options=options)


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("explorer", help="the offline explorer (static site over the cards and instances)")
    sub = p.add_subparsers(dest="explorer_command", required=True)
    b = sub.add_parser("build", help="write results/explorer: index.html, assets, paged instance data")
    b.add_argument(
        "--models",
        required=True,
        help="JSON list of {dataset, model, card, predictions, examples, manifest, sources}, or a plan of path"
        " templates (attnaudit.explorer.plan), inline or @file",
    )
    b.add_argument("--split", default="test")
    b.add_argument("--options", default="", help="JSON: the explorer config block (page_size, digits)")
    b.add_argument("--out-dir", required=True)
    b.set_defaults(func=lambda a: build(json_arg(a.models), a.out_dir, a.split, json_arg(a.options)))
