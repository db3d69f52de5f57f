"""An audit card as a self-contained HTML page (inline CSS, every text escaped) and as Markdown."""

from __future__ import annotations

from html import escape

from attnaudit.cards.summary import level
from attnaudit.tables import markdown_cell as md

#: Unicode's first-strong isolate and its pop: in plain text (markdown), a right-to-left class name between them keeps
#: its number on its own side, as ``<bdi>`` does in HTML
ISOLATE, POP_ISOLATE = "\u2068", "\u2069"

CSS = """
body{font-family:system-ui,sans-serif;max-width:60rem;margin:1.5rem auto;padding:0 1rem;color:#222}
table{border-collapse:collapse;margin:.5rem 0 1rem}td,th{border:1px solid #ccc;padding:.25rem .5rem;text-align:left}
.verdict{font-size:1.1rem;padding:.6rem;border-left:4px solid #446;background:#f2f2f8}
.pass{color:#174}.fail{color:#a22}.undetermined{color:#666}.cite{color:#666;font-size:.85rem}
"""


def fmt(value, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return f"{value:.{digits}f}"
    return str(value)


def fmt_number(n: dict) -> str:
    d = n.get("digits", 3)
    text = fmt(n["value"], d) + (f" {n['unit']}" if n.get("unit") else "")
    if n.get("ci"):
        text += f" [{fmt(n['ci'][0], d)}, {fmt(n['ci'][1], d)}]"
    return text


def value_heading(section: dict) -> str:
    """The numbers' column heading: with the level of their bootstrap CIs when any has one."""
    if section.get("confidence") is None or not any(n.get("ci") for n in section["numbers"]):
        return "value"
    return f"value [{level(section['confidence'])} CI]"


def check_state(c: dict) -> str:
    return "undetermined" if c["passed"] is None else ("pass" if c["passed"] else "fail")


def card_html(card: dict) -> str:
    e = escape
    m = card["metrics"]
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>Audit card: {e(card['dataset'])} / {e(card['model'])}</title><style>{CSS}</style></head><body>",
        f"<h1>Audit card: <code>{e(card['model'])}</code> on <code>{e(card['dataset'])}</code></h1>",
        f"<p class='verdict' id='verdict'><b>Verdict:</b> {e(card['verdict']['line'])}</p>",
        f"<p class='cite'>Verdict rule: {e(card['verdict']['rule'])}</p>",
        "<h2>Model</h2><table>",
        f"<tr><th>test macro-F1</th><td>{fmt(m['test_macro_f1'])}</td></tr>",
        f"<tr><th>test accuracy</th><td>{fmt(m['test_accuracy'])}</td></tr>",
    ]
    parts += [
        f"<tr><th>test F1 (<bdi>{e(str(k))}</bdi>)</th><td>{fmt(v)}</td></tr>" for k, v in m["per_class_f1"].items()
    ]
    parts.append("</table>")
    for s in card["sections"]:
        parts.append(f"<h2>{e(s['title'])}</h2><p class='cite'>{e(s['citation'])}</p>")
        if s["numbers"]:
            parts.append(f"<table><tr><th>measure</th><th>{e(value_heading(s))}</th><th>source</th></tr>")
            parts += [
                f"<tr><td>{e(n['label'])}</td><td>{e(fmt_number(n))}</td><td class='cite'>{e(n['citation'])}</td></tr>"
                for n in s["numbers"]
            ]
            parts.append("</table>")
        if s["checks"]:
            parts.append("<ul>")
            parts += [
                f"<li class='{check_state(c)}'><b>{check_state(c)}</b>: {e(c['text'])} "
                f"<span class='cite'>(rule: {e(c['rule'])}; {e(c['citation'])})</span></li>"
                for c in s["checks"]
            ]
            parts.append("</ul>")
    if card["missing"]:
        parts.append("<h2>Missing audits</h2><ul id='missing'>")
        parts += [f"<li>{e(x)}</li>" for x in card["missing"]]
        parts.append("</ul>")
    if card["not_run"]:
        parts.append("<h2>Audits not run for this model</h2><ul>")
        parts += [f"<li>{e(k)}: {e(v)}</li>" for k, v in card["not_run"].items()]
        parts.append("</ul>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def card_markdown(card: dict) -> str:
    m = card["metrics"]
    lines = [
        f"# Audit card: {md(card['model'])} on {md(card['dataset'])}",
        "",
        f"**Verdict:** {md(card['verdict']['line'])}",
        "",
        f"*Verdict rule:* {md(card['verdict']['rule'])}",
        "",
        f"Test macro-F1 {fmt(m['test_macro_f1'])}, accuracy {fmt(m['test_accuracy'])}; per class: "
        + ", ".join(f"{ISOLATE}{md(k)}{POP_ISOLATE} {fmt(v)}" for k, v in m["per_class_f1"].items()),
    ]
    for s in card["sections"]:
        lines += ["", f"## {md(s['title'])}", "", f"*{md(s['citation'])}*", ""]
        if s["numbers"]:
            lines += [f"| measure | {md(value_heading(s))} | source |", "|---|---|---|"]
            lines += [f"| {md(n['label'])} | {md(fmt_number(n))} | {md(n['citation'])} |" for n in s["numbers"]]
            lines.append("")
        lines += [f"- **{check_state(c)}**: {md(c['text'])} (rule: {md(c['rule'])})" for c in s["checks"]]
    if card["missing"]:
        lines += ["", "## Missing audits", ""] + [f"- {md(x)}" for x in card["missing"]]
    if card["not_run"]:
        lines += ["", "## Audits not run for this model", ""]
        lines += [f"- {md(k)}: {md(v)}" for k, v in card["not_run"].items()]
    return "\n".join(lines) + "\n"
