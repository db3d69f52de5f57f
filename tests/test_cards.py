"""Audit cards: the stage summaries (J&W, B&F, W&P, T&Š) on synthetic audit files, the bootstrap CIs, the verdict
rule, a card with a missing audit, HTML escaping of cards and explorer data, and the explorer's paging."""

from __future__ import annotations

import json
import re
from html import escape
from pathlib import Path

import markdown_it
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from synthetic_results import make_results, read_js

from attnaudit.cards.card import build_card, run_card, verdict
from attnaudit.cards.render import card_markdown
from attnaudit.cards.summary import DEFAULTS, bootstrap_ci, run_summary
from attnaudit.explorer.build import build_site, overlay_scores, rounded


# -- bootstrap -----------------------------------------------------------------------------------------------------
def test_bootstrap_ci_is_seeded_and_covers_the_mean():
    x = np.random.default_rng(1).normal(0.3, 0.2, size=400)
    a = bootstrap_ci(x, n_resamples=500, confidence=0.95, seed=7)
    assert a == bootstrap_ci(x, n_resamples=500, confidence=0.95, seed=7)
    assert a != bootstrap_ci(x, n_resamples=500, confidence=0.95, seed=8)
    assert a[0] < x.mean() < a[1]
    se = x.std(ddof=1) / np.sqrt(len(x))  # the percentile interval is close to mean ± 1.96 SE here
    assert a[1] - a[0] == pytest.approx(2 * 1.96 * se, rel=0.2)
    narrow = bootstrap_ci(x, n_resamples=500, confidence=0.5, seed=7)
    assert narrow[1] - narrow[0] < a[1] - a[0]


def test_bootstrap_ci_drops_nan_and_needs_two_values():
    x = np.array([0.1, np.nan, 0.5, 0.3, np.nan])
    lo, hi = bootstrap_ci(x, n_resamples=200, confidence=0.95, seed=0)
    assert 0.1 <= lo <= hi <= 0.5
    assert bootstrap_ci([np.nan, 0.2], n_resamples=200, confidence=0.95, seed=0) is None


# -- verdict rule --------------------------------------------------------------------------------------------------
def _checks(*states):
    return [{"text": f"check {i}", "passed": s, "rule": "r"} for i, s in enumerate(states)]


@pytest.mark.parametrize(
    ("states", "label"),
    [
        ((True, True, False), "attention reads as an explanation"),
        ((True, False, False), "attention does not read as an explanation"),
        ((True, False), "mixed evidence"),
        ((True, True, False, False, None), "mixed evidence"),
        ((None, None), "undetermined (no decided checks)"),
        ((), "undetermined (no decided checks)"),
    ],
)
def test_verdict_rule(states, label):
    v = verdict(_checks(*states))
    assert v["label"] == label
    decided = [s for s in states if s is not None]
    assert (v["passed"], v["decided"]) == (sum(decided), len(decided))
    for i, s in enumerate(states):  # the line names every decided check, none of the undetermined
        assert (f"check {i}" in v["line"]) == (s is not None)


# -- stage summaries on synthetic audit files ----------------------------------------------------------------------
def _options(**kw):
    return {**DEFAULTS, "bootstrap_samples": 200, **kw}


def test_jain_wallace_summary(tmp_path):
    rng = np.random.default_rng(0)
    n = 300
    corr = pd.DataFrame(
        {
            "tau_attention_gradient": rng.normal(0.2, 0.1, n),
            "tau_attention_loo": rng.normal(0.1, 0.1, n),
            "tau_gradient_loo": rng.normal(0.6, 0.1, n),
        }
    )
    perm = pd.DataFrame({"delta_median": rng.uniform(0, 0.1, n)})
    n_valid = rng.integers(0, 3, n)
    adv = pd.DataFrame({"eps_max_jsd": np.where(n_valid > 0, rng.uniform(0, 0.69, n), 0.0), "n_valid": n_valid})
    paths = {}
    for name, frame in (("correlation", corr), ("permutation", perm), ("adversarial", adv)):
        paths[name] = str(tmp_path / f"{name}.parquet")
        frame.to_parquet(paths[name])
    s = run_summary("jain_wallace", paths, "d", "m", _options(), str(tmp_path / "s.json"))
    numbers = {x["key"]: x for x in s["numbers"]}
    for key in ("tau_attention_gradient", "tau_attention_loo", "tau_gradient_loo"):
        lo, hi = numbers[key]["ci"]
        assert lo < corr[key].mean() < hi and numbers[key]["value"] == pytest.approx(corr[key].mean())
    checks = {c["key"]: c for c in s["checks"]}
    assert checks["jw_tau"]["passed"] is False  # τ(att, LOO) ≈ 0.1 is far below τ(grad, LOO) ≈ 0.6
    share = (perm["delta_median"] < 0.05).mean()
    assert numbers["permutation_insensitive"]["value"] == pytest.approx(100 * share)
    assert checks["jw_permutation"]["passed"] == (share < 0.5)
    found = ((adv["eps_max_jsd"] > 0.5) & (adv["n_valid"] > 0)).mean()
    assert numbers["adversary_found"]["value"] == pytest.approx(100 * found)
    # Alg. 3: an instance without a valid adversary counts with ε-max JSD 0, as in the J&W adversarial table
    assert numbers["eps_max_jsd"]["value"] == pytest.approx(adv["eps_max_jsd"].mean())
    assert s["missing"] == [] and json.loads((tmp_path / "s.json").read_text()) == json.loads(json.dumps(s))


@pytest.mark.parametrize("confidence", [0.9, 0.95])
def test_the_cards_state_the_confidence_level_of_their_intervals(tmp_path, confidence):
    """``cards.confidence`` sets the bootstrap level; the rule that uses it and the cards' column say that level,
    and a section without intervals has no CI column."""
    rng = np.random.default_rng(1)
    corr = pd.DataFrame({k: rng.normal(0.3, 0.1, 50) for k in ("tau_attention_loo", "tau_gradient_loo")})
    corr.to_parquet(tmp_path / "correlation.parquet")
    inputs = {"correlation": str(tmp_path / "correlation.parquet")}
    summary = run_summary("jain_wallace", inputs, "d", "m", _options(confidence=confidence), str(tmp_path / "s.json"))
    x = corr["tau_attention_loo"]
    assert summary["numbers"][0]["ci"] == list(bootstrap_ci(x, n_resamples=200, confidence=confidence, seed=0))
    assert f"upper {100 * confidence:g} % CI bound" in summary["checks"][0]["rule"]
    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps({"test": {"accuracy": 0.8, "macro_f1": 0.79, "per_class_f1": [0.7, 0.88]}}))
    plain = Path(_summary_file(tmp_path, "b", "B", True))  # a section whose numbers have no interval
    no_ci = json.loads(plain.read_text())
    no_ci["numbers"][0]["ci"] = None
    plain.write_text(json.dumps(no_ci))
    summaries = {"jain_wallace": str(tmp_path / "s.json"), "b": str(plain)}
    run_card("d", "m", str(metrics), summaries, tmp_path / "c.json", tmp_path / "c.html", tmp_path / "c.md")
    heading = f"value [{100 * confidence:g} % CI]"
    html, md = (tmp_path / "c.html").read_text(), (tmp_path / "c.md").read_text()
    for rendered, shown in ((html, heading), (md, heading.replace("[", "\\[").replace("]", "\\]"))):
        assert rendered.count(shown) == 1  # the J&W section's column; section b's reads "value"
        assert confidence == 0.95 or "95 %" not in rendered


def test_saliency_summary_ranks_attention(tmp_path):
    rows = []
    comp = {"attention": 0.3, "gradient": 0.5, "loo": 0.1, "random": 0.05}  # attention 2nd of 4
    suff = {"attention": 0.4, "gradient": 0.1, "loo": 0.2, "random": 0.3}  # attention 4th of 4 (lower is better)
    for row in range(20):
        for method in comp:
            for k in (0.1, 0.5):
                for variant in ("deletion", "unk"):
                    shift = 0 if variant == "deletion" else (1 if method == "loo" else 0)  # unk ranks loo first
                    rows.append(
                        {
                            "row": row,
                            "method": method,
                            "ranking": "signed",
                            "variant": variant,
                            "k": f"{k:.0%}",
                            "comprehensiveness": comp[method] + shift + 0.01 * k,
                            "sufficiency": suff[method],
                        }
                    )
    path = tmp_path / "faithfulness.parquet"
    pd.DataFrame(rows).to_parquet(path)
    s = run_summary("saliency", {"faithfulness": str(path)}, "d", "m", _options(), str(tmp_path / "s.json"))
    numbers = {x["key"]: x["value"] for x in s["numbers"]}
    assert (numbers["comprehensiveness_rank"], numbers["sufficiency_rank"]) == (2, 4)
    checks = {c["key"]: c["passed"] for c in s["checks"]}
    assert checks == {"bf_comprehensiveness": True, "bf_sufficiency": False}


def test_wiegreffe_pinter_and_tutek_snajder_summaries(tmp_path):
    def metrics(name, f1):  # positive-class F1 f1 (W&P's measure); the macro-F1 would not tell the models apart
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"test": {"macro_f1": 0.8, "per_class_f1": [0.8, f1]}}))
        return str(path)

    base = [metrics(f"b{i}", f) for i, f in enumerate((0.80, 0.82, 0.81))]
    seeds = tmp_path / "seeds.parquet"
    pd.DataFrame({"beyond_every_seed": [True] * 7 + [False] * 3, "jsd_median": np.linspace(0, 0.2, 10)}).to_parquet(
        seeds
    )
    inputs = {"base_metrics": base, "uniform_metrics": [metrics("u", 0.70)], "seed_variance": str(seeds)}
    s = run_summary("wiegreffe_pinter", inputs, "d", "m", _options(), str(tmp_path / "wp.json"))
    checks = {c["key"]: c for c in s["checks"]}
    assert checks["wp_uniform"]["passed"] is True  # 11 points ≫ 2 × std (1 point)
    assert checks["wp_seed_variance"]["passed"] is False and "70.0 %" in checks["wp_seed_variance"]["text"]
    inputs["uniform_metrics"] = [metrics("u2", 0.805)]
    s = run_summary("wiegreffe_pinter", inputs, "d", "m", _options(), str(tmp_path / "wp.json"))
    assert {c["key"]: c["passed"] for c in s["checks"]}["wp_uniform"] is False
    assert "positive-class F1" in {x["key"]: x["label"] for x in s["numbers"]}["uniform_f1"]

    fragility = tmp_path / "fragility.json"
    deltas = {"permutation_macro_f1_mean": -0.4, "uniform_macro_f1": -0.1}
    deltas |= {"permutation_positive_f1_mean": -1.3, "uniform_positive_f1": -0.2}
    fragility.write_text(json.dumps({"trained": {"macro_f1": 0.8, "positive_f1": 0.81}, "delta": deltas}))
    tokens = tmp_path / "tokens.parquet"
    pd.DataFrame(
        {"correct": [True, True, False], "mean_token_prob": [0.6, 0.8, 0.1], "prediction_prob": [0.9, 0.9, 0.5]}
    ).to_parquet(tokens)
    inputs = {"fragility": str(fragility), "token_probability": str(tokens)}
    s = run_summary("tutek_snajder", inputs, "d", "m", _options(fragility_points=1.0), str(tmp_path / "ts.json"))
    assert [c["passed"] for c in s["checks"]] == [True]  # T&Š Table 1's F1, the positive class: −1.3 points
    assert "positive F1" in {x["key"]: x["label"] for x in s["numbers"]}["pm_delta_f1"]
    assert {x["key"]: x["value"] for x in s["numbers"]}["token_probability"] == pytest.approx(0.7)
    options = _options(fragility_points=1.0, fragility_f1="macro")  # tutek_snajder.tables.f1: macro
    s = run_summary("tutek_snajder", inputs, "d", "m", options, str(tmp_path / "ts.json"))
    assert [c["passed"] for c in s["checks"]] == [False]  # the table's macro-F1: −0.4 points
    assert "macro F1" in {x["key"]: x["label"] for x in s["numbers"]}["pm_delta_f1"]
    fragility.write_text(json.dumps({"trained": {"macro_f1": 0.8, "positive_f1": None}, "delta": deltas}))
    s = run_summary("tutek_snajder", inputs, "d", "m", _options(fragility_points=1.0), str(tmp_path / "ts.json"))
    assert [c["passed"] for c in s["checks"]] == [False]  # three classes, macro-F1: −0.4 points, barely matters
    assert s["missing"] == []  # no mutual information declared (a concat or dot-attention model): nothing missing
    with_mi = {**inputs, "mutual_information": str(tmp_path / "absent_mi.json")}
    s = run_summary("tutek_snajder", with_mi, "d", "m", _options(fragility_points=1.0), str(tmp_path / "ts.json"))
    assert s["missing"] == ["mutual information"]


def test_an_adversarys_summary_holds_its_imitation_numbers(tmp_path):
    imitation = {"teacher": "t-s0", "lambda": 0.1, "n": 5, "jsd_mean": 0.6, "jsd_median": 0.65, "tvd_mean": 0.2}
    imitation |= {"tvd_median": 0.03, "student_macro_f1": 0.78, "teacher_macro_f1": 0.81}
    path = tmp_path / "wp_imitation.json"
    path.write_text(json.dumps(imitation))
    s = run_summary("wiegreffe_pinter", {"imitation": str(path)}, "d", "a-s0", _options(), str(tmp_path / "s.json"))
    assert "t-s0" in s["title"] and "λ = 0.1" in s["title"] and s["checks"] == [] and s["n_instances"] == 5
    numbers = {n["key"]: n for n in s["numbers"]}
    assert numbers["adversary_delta_f1"]["value"] == pytest.approx(-3.0)  # the F1 points the adversary gave up
    assert {k for k, n in numbers.items() if n["headline"]} == {"adversary_jsd_mean", "adversary_tvd_mean"}
    path.unlink()
    s = run_summary("wiegreffe_pinter", {"imitation": str(path)}, "d", "a-s0", _options(), str(tmp_path / "s.json"))
    assert s["numbers"] == [] and s["missing"] == ["imitation"]


# -- cards: missing audits, escaping ------------------------------------------------------------------------------
def _summary_file(tmp_path, name, title, passed):
    path = tmp_path / f"{name}.json"
    summary = {
        "stage": name,
        "title": title,
        "citation": "c",
        "numbers": [{"key": "x", "label": "x <i>", "value": 0.5, "ci": [0.4, 0.6], "unit": "", "citation": ""}],
        "checks": [{"key": "k", "text": f"{name} check", "rule": "r", "passed": passed, "citation": ""}],
        "missing": [],
    }
    path.write_text(json.dumps(summary))
    return str(path)


def test_card_names_missing_audits(tmp_path):
    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps({"test": {"accuracy": 0.8, "macro_f1": 0.79, "per_class_f1": [0.7, 0.88]}}))
    summaries = {"a": _summary_file(tmp_path, "a", "Audit A", True), "b": str(tmp_path / "absent.json")}
    card = build_card("d", "m", str(metrics), summaries, label_names=["neg", "pos"])
    assert [s["title"] for s in card["sections"]] == ["Audit A"]
    assert len(card["missing"]) == 1 and "b" in card["missing"][0] and "absent.json" in card["missing"][0]
    assert "missing audits" in card["verdict"]["line"]
    assert card["metrics"]["per_class_f1"] == {"neg": 0.7, "pos": 0.88}
    html = tmp_path / "card.html"
    run_card("d", "m", str(metrics), summaries, tmp_path / "c.json", html, tmp_path / "c.md")
    assert "Missing audits" in html.read_text() and "absent.json" in html.read_text()


def test_a_right_to_left_class_name_keeps_its_number_beside_it(tmp_path):
    """ "per class: שלום 0.700, pos 0.880" laid out by the bidi algorithm would put 0.700 before שלום: each class name
    is isolated, by ``<bdi>`` in the HTML card and by Unicode's FSI … PDI in the markdown card."""
    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps({"test": {"accuracy": 0.8, "macro_f1": 0.79, "per_class_f1": [0.7, 0.88]}}))
    summaries = {"a": _summary_file(tmp_path, "a", "Audit A", True)}
    names = ["\u05e9\u05dc\u05d5\u05dd", "pos"]
    paths = [tmp_path / f"c.{ext}" for ext in ("json", "html", "md")]
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"label_names": names}), encoding="utf-8")
    run_card("d", "m", str(metrics), summaries, *paths, manifest=str(manifest))
    html, markdown = paths[1].read_text(encoding="utf-8"), paths[2].read_text(encoding="utf-8")
    assert all(f"test F1 (<bdi>{name}</bdi>)" in html for name in names)
    assert f"per class: \u2068{names[0]}\u2069 0.700, \u2068pos\u2069 0.880" in markdown


def test_card_html_escapes_text(tmp_path):
    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps({"test": {"macro_f1": 0.5}}))
    evil = "<script>alert('x')</script>"
    summaries = {"a": _summary_file(tmp_path, "a", evil, False)}
    run_card("d", "m", str(metrics), summaries, tmp_path / "c.json", tmp_path / "c.html", tmp_path / "c.md")
    for name in ("c.html", "c.md"):
        text = (tmp_path / name).read_text()
        assert "<script>" not in text and "&lt;script&gt;" in text
        assert "<i>" not in text


# -- explorer data -------------------------------------------------------------------------------------------------
def test_explorer_pages_and_escapes(tmp_path):
    token = "<script>window.__pwned=1</script>"
    entry = make_results(tmp_path, n_instances=23, n_tokens=9, special=token)
    index = build_site([entry], tmp_path / "explorer", options={"page_size": 10, "digits": 4})
    model = index["models"][0]
    assert (model["n_instances"], model["n_pages"]) == (23, 3)
    assert any("audit card" in m for m in model["missing"])  # no card for the synthetic model: listed, not fatal
    pages = sorted((tmp_path / "explorer/data/synth/m-s0").glob("page-*.js"))
    assert len(pages) == 3
    first = read_js(pages[0])
    assert first[0]["tokens"][1] == token  # kept as data (JSON string), rendered with textContent by the page
    assert not re.search(
        r"<script", (tmp_path / "explorer/index.html").read_text().split("<body>")[1].split("<script src")[0]
    )
    scores = pd.read_parquet(entry["sources"][0]["path"]).set_index("id")["scores"]
    inst = read_js(pages[1])[3]
    np.testing.assert_allclose(inst["scores"]["gradient"], scores[inst["id"]], rtol=1e-3, atol=1e-7)
    listing = read_js(tmp_path / "explorer/data/synth/m-s0/list.js")
    assert listing["ids"][13] == inst["id"] and set(listing["values"]) == {"ε-max JSD", "Δŷ adversary (TVD)"}


def printf_rounded(values, digits):
    """The reference: ``float("%.{digits}g" % x)`` one value at a time (NaN/inf → None)."""
    return [float(f"%.{digits}g" % v) if np.isfinite(v) else None for v in np.asarray(values, dtype=float)]


def same_floats(a: list, b: list) -> bool:
    return len(a) == len(b) and all(x == y and str(x) == str(y) for x, y in zip(a, b))  # str: -0.0, None


@pytest.mark.parametrize("digits", range(1, 9))
def test_explorer_scores_are_rounded_as_printf_writes_them(digits):
    """The explorer's vectorised rounding gives what printf's ``%.{digits}g`` gives, also where x·10^k lies on a
    tie (decimals ending in 5, and their neighbouring doubles), next to powers of ten, at the ends of the double
    range and for scores of float32 models."""
    rng = np.random.default_rng(digits)
    ties = np.array([float(f"{m}5e{e}") for m in range(1, 1000) for e in range(-25, 25, 3)])
    powers = 10.0 ** np.arange(-320, 309, dtype=float)
    edges = [0.0, -0.0, np.nan, np.inf, -np.inf, 5e-324, -2.2250738585072014e-308, 1.7976931348623157e308]
    for values in (
        rng.random(20_000).astype(np.float32),
        rng.standard_normal(20_000) * 10.0 ** rng.integers(-40, 40, 20_000),
        np.concatenate([ties, -ties, np.nextafter(ties, np.inf), np.nextafter(ties, -np.inf)]),
        np.concatenate([powers, np.nextafter(powers, 0), np.nextafter(powers, np.inf)]),
        np.array(edges),
    ):
        assert same_floats(rounded(values, digits), printf_rounded(values, digits))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(width=64), max_size=20), st.integers(1, 8))
def test_explorer_rounding_of_any_doubles(values, digits):
    assert same_floats(rounded(values, digits), printf_rounded(values, digits))


def test_explorer_leaves_out_an_overlay_where_an_instance_has_no_scores_of_its_length():
    rows = [np.array([0.123456, 2.0]), None, np.nan, np.array([]), np.array([1.0, 2.0, 3.0]), [7.654321, -0.5]]
    scores, mismatched = overlay_scores(rows, [2, 2, 2, 2, 2, 2], 3)
    assert scores == [[0.123, 2.0], None, None, None, None, [7.65, -0.5]] and mismatched == 1


def test_explorer_plan_expands_templates():
    from attnaudit.explorer.plan import expand_plan

    scores = {"path": "imp/{dataset}/{model}/gradient.parquet", "overlays": {"gradient": "scores"}, "values": {}}
    plan = {
        "templates": {
            "model": {"card": "cards/{dataset}/{model}.json", "manifest": "corpora/{corpus}/manifest.json"},
            "a": [scores, {"path": "adv/{dataset}/{model}.parquet", "overlays": {}, "values": {"x": "x"}}],
            "b": [scores],  # the same file from a second stage is read once
        },
        "models": [
            {"dataset": "d", "model": "m-s0", "corpus": "c", "stages": ["a", "b"]},
            {"dataset": "d", "model": "u-s0", "corpus": "c", "stages": []},
        ],
    }
    first, second = expand_plan(plan)
    assert first["card"] == "cards/d/m-s0.json" and first["manifest"] == "corpora/c/manifest.json"
    assert [s["path"] for s in first["sources"]] == ["imp/d/m-s0/gradient.parquet", "adv/d/m-s0.parquet"]
    assert second["sources"] == [] and plan["templates"]["b"][0]["path"].startswith("imp/{dataset}")
    assert "summaries" not in first  # no summary template: no partial cards
    plan["templates"]["summary"] = "summaries/{stage}/{dataset}/{model}.json"
    plan["models"][1]["stages"] = ["c"]  # a stage with a summary and no per-instance files
    first, second = expand_plan(plan)
    assert first["summaries"] == {"a": "summaries/a/d/m-s0.json", "b": "summaries/b/d/m-s0.json"}
    assert second["summaries"] == {"c": "summaries/c/d/u-s0.json"} and second["sources"] == []


def test_card_markdown_keeps_hostile_text_literal(tmp_path):
    """A class name or label like ``neg|[x](javascript:…)`` + newline + ``*b*`` stays literal text in the card's
    Markdown (rendered by a CommonMark parser with GFM tables): the page has the elements (links, emphasis, code,
    table cells, paragraphs) that a plain name gives, and the text where the plain name is."""
    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps({"test": {"accuracy": 0.8, "macro_f1": 0.79, "per_class_f1": [0.7, 0.88]}}))

    def rendered(name):
        path = _summary_file(tmp_path, "a", "Audit A", True)
        summary = json.loads(Path(path).read_text())
        summary["numbers"][0]["label"] = summary["checks"][0]["text"] = name
        Path(path).write_text(json.dumps(summary))
        card = build_card("d", "m", str(metrics), {"a": path}, label_names=[name, "pos"])
        return markdown_it.MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(card_markdown(card))

    evil = "neg|[x](javascript:alert(1))\n*b* `c` _d_ ~~e~~ \\[f](g) <h> #i !j"
    page, plain = rendered(evil), rendered("plain")
    assert "<a " not in page and "<em>b</em>" not in page and "<code>" not in page
    assert page.replace(escape(evil.replace("\n", " "), quote=False), "plain") == plain  # text where "plain" is


def test_a_check_does_not_round_a_share_onto_its_bound(tmp_path):
    """249 of 250 instances with an adversary is 99.6 %, not "100 %" (a share shown as the whole would hide
    the instance that is not)."""
    adv = pd.DataFrame({"eps_max_jsd": [0.6] * 249 + [0.0], "n_valid": [3] * 249 + [0]})
    adv.to_parquet(tmp_path / "adversarial.parquet")
    paths = {"adversarial": str(tmp_path / "adversarial.parquet")}
    s = run_summary("jain_wallace", paths, "d", "m", _options(), str(tmp_path / "s.json"))
    text = {c["key"]: c["text"] for c in s["checks"]}["jw_adversarial"]
    assert "99.6 % of instances" in text and "100 %" not in text
