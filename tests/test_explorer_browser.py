"""The offline explorer in a real headless Chromium (Debian's ``chromium``, driven by Playwright; installed with
apt-get when missing, as tests/cluster installs Slurm): on the end-to-end run's outputs, the index lists every
model, a click opens a model's card and its instances, another an instance, and the colouring switches between
attention, two saliency methods and the adversarial attention, whose token values must equal the parquet files'.
A synthetic model with a ``<script>`` token checks escaping. Screenshots go to ``tests/output/explorer/``."""

from __future__ import annotations

import json
import shutil
import time

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import REPO
from synthetic_results import make_results
from system_packages import apt_install, unavailable

from attnaudit.modelsheet import sheet

SHOTS = REPO / "tests" / "output" / "explorer"  # ignored by git (tests/output/.gitignore)
CHROMIUM = ("chromium", "chromium-browser")


def find_chromium() -> str | None:
    return next((p for name in CHROMIUM if (p := shutil.which(name))), None)


def install_chromium() -> str | None:
    """Debian's chromium via apt-get when missing (root only); the reason it cannot be installed otherwise."""
    return apt_install(["chromium"], lambda: find_chromium() is not None)


@pytest.fixture(scope="session")
def browser():
    reason = install_chromium()
    if reason:
        unavailable(f"no headless Chromium: {reason}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=find_chromium(), args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda err: page.errors.append(str(err)))
    page.on("request", lambda req: req.url.startswith("file://") or page.errors.append(f"network: {req.url}"))
    yield page
    context.close()


def shot(page, name, full_page=True):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=full_page)


def token_values(page) -> tuple[list[str], np.ndarray]:
    spans = page.locator("#tokens .tok")
    texts = spans.all_text_contents()
    values = spans.evaluate_all("els => els.map(e => e.dataset.value === '' ? NaN : Number(e.dataset.value))")
    return texts, np.asarray(values, dtype=float)


def colour_by(page, name):
    page.select_option("#colour-by", name)
    page.wait_for_selector(f"#tokens[data-colour-by='{name}']")


@pytest.mark.e2e
def test_explorer_in_chromium(page, local_pipeline):
    workdir = local_pipeline
    cfg = yaml.safe_load((REPO / "tests" / "config.yaml").read_text())
    index = workdir / "results" / "explorer" / "index.html"
    start = time.perf_counter()
    page.goto(index.as_uri())
    page.wait_for_selector("#index tr.model-row")
    load_seconds = time.perf_counter() - start
    listed = {
        (r.get_attribute("data-dataset"), r.get_attribute("data-model")) for r in page.locator("tr.model-row").all()
    }
    expected = {(d, m) for d, entry in cfg["datasets"].items() for m in sheet(d, entry)}
    assert listed == expected
    assert "no audit card" not in page.text_content("#index")  # every model has its card
    for d, m in expected:
        cards = [workdir / f"results/cards/{d}/{m}.{x}" for x in ("json", "html", "md")]  # m may hold a dot
        assert all(card.stat().st_size > 0 for card in cards), (d, m)
    shot(page, "index")

    # a model with every saliency method: its card, then its instances filtered to the correct ones
    dataset, model = "sst_small", "lstm-additive-base-s0"
    page.click(f"tr.model-row[data-dataset='{dataset}'][data-model='{model}'] a.model-link")
    page.wait_for_selector("#verdict")
    assert "checks pass" in page.text_content("#verdict")
    page.wait_for_selector("#instances tr.instance-row")
    shot(page, "card", full_page=False)
    page.select_option("#f-correct", "correct")
    page.wait_for_selector("#list-count")
    rows = page.locator("#instances tr.instance-row")
    cells = page.locator("#instances tr.instance-row td:nth-child(2), #instances tr.instance-row td:nth-child(3)")
    labels = cells.all_text_contents()
    assert rows.count() > 0 and labels[0::2] == labels[1::2]  # label == predicted on every listed row
    # an instance on a later data page (loaded on demand)
    page.fill("#instance-list input[data-name='ε-max JSD'][data-bound='min']", "0.001")  # a valid adversary
    page.locator("#instance-list input[data-name='ε-max JSD'][data-bound='min']").dispatch_event("change")
    page_size = cfg["explorer"]["page_size"]
    listed_rows = page.locator("#instances tr.instance-row").evaluate_all("rs => rs.map(r => Number(r.dataset.index))")
    later = [i for i in listed_rows if i >= page_size]
    assert later, f"no listed instance beyond the first data page of {page_size}: {listed_rows}"
    row = later[0]
    page.locator(f"#instances tr.instance-row[data-index='{row}'] a.instance-link").click()
    page.wait_for_selector("#tokens .tok")
    instance_id = page.text_content("#instance-id")

    examples = pd.read_parquet(workdir / f"results/datasets/{dataset}/examples.parquet").set_index("id")
    importance = workdir / f"results/importance/{dataset}/{model}"
    methods = [m for m in cfg["saliency"].get("methods") or ["integrated_gradients", "occlusion"] if m != "attention"]
    if not methods:
        methods = ["gradient", "loo"]
    for name, path, column in [
        ("attention", importance / "attention.parquet", "scores"),
        (methods[0], importance / f"{methods[0]}.parquet", "scores"),
        (methods[-1], importance / f"{methods[-1]}.parquet", "scores"),
        (
            "adversarial attention",
            workdir / f"results/audits/{dataset}/{model}/jw_adversarial.parquet",
            "adversarial_attention",
        ),
    ]:
        colour_by(page, name)
        texts, values = token_values(page)
        expected_scores = pd.read_parquet(path).set_index("id").loc[instance_id, column]
        assert texts == list(examples.loc[instance_id, "tokens"])
        np.testing.assert_allclose(values, np.asarray(expected_scores, dtype=float), rtol=2e-3, atol=1e-7, err_msg=name)
        strongest = int(np.nanargmax(np.abs(values)))
        background = page.locator("#tokens .tok").nth(strongest).evaluate("e => getComputedStyle(e).backgroundColor")
        assert background not in ("rgba(0, 0, 0, 0)", "transparent"), (name, background)
        if name == methods[0]:
            shot(page, "instance")
    adversarial = pd.read_parquet(workdir / f"results/audits/{dataset}/{model}/jw_adversarial.parquet").set_index("id")
    shown = float(page.text_content("#instance-facts td[data-name='ε-max JSD']"))
    assert shown == pytest.approx(adversarial.loc[instance_id, "eps_max_jsd"], abs=1e-3)
    scripts = page.locator("script[src]").evaluate_all("ss => ss.map(s => s.getAttribute('src'))")
    assert any(src.endswith(f"page-{row // page_size:05d}.js") for src in scripts), scripts  # loaded on demand

    # an adversary: its own W&P §4 section, and why the other audits leave it out
    page.goto(index.as_uri() + "#/model/planted/average-adv1-s0")
    page.wait_for_selector("#not-run li")
    assert "imitating average-additive-base-s0" in page.text_content(".card-section h3")
    reasons = page.locator("#not-run li").all_text_contents()
    assert any(r.startswith("Jain & Wallace (2019): ") and "imitating average-additive-base-s0" in r for r in reasons)
    assert not page.errors, page.errors
    print(f"\n[explorer] index loaded in {load_seconds:.2f} s")


def test_explorer_escapes_text(page, tmp_path):
    from attnaudit.explorer.build import build_site

    evil = "<script>window.__pwned=1</script><img src=x onerror='window.__pwned=2'>"
    entry = make_results(tmp_path, n_instances=12, n_tokens=8, special=evil)
    build_site([entry], tmp_path / "explorer", options={"page_size": 5})
    page.goto((tmp_path / "explorer" / "index.html").as_uri() + "#/instance/synth/m-s0/0")
    page.wait_for_selector("#tokens .tok")
    assert page.locator("#tokens .tok").nth(1).text_content() == evil
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#tokens img, #tokens script").count() == 0
    assert page.locator("#instance-facts td").first.text_content() in ("neg<b>", "pos")  # label names, as text
    page.goto((tmp_path / "explorer" / "index.html").as_uri())
    page.wait_for_selector("tr.model-row")
    assert "no audit card" in page.text_content("#index")  # no card: the index says what is missing
    assert not [e for e in page.errors if not e.startswith("network: file")], page.errors


def test_a_qa_instance_shows_its_query(page, tmp_path):
    """A QA/NLI instance shows its question or hypothesis (without the tokeniser's markers) above the passage,
    whose tokens alone carry the scores; a classification instance shows none."""
    from attnaudit.explorer.build import build_site

    entry = make_results(tmp_path, n_instances=12, n_tokens=8, queries=True)
    build_site([entry], tmp_path / "explorer", options={"page_size": 5})
    examples = pd.read_parquet(tmp_path / "results/datasets/synth/examples.parquet")
    for i in (0, 7):
        page.goto((tmp_path / "explorer" / "index.html").as_uri() + f"#/instance/synth/m-s0/{i}")
        page.wait_for_selector("#tokens .tok")
        assert page.text_content("#instance-query") == "query: " + " ".join(examples["query_tokens"][i][1:-1])
        assert page.locator("#tokens .tok").count() == len(examples["tokens"][i])
    plain = make_results(tmp_path / "plain", n_instances=12, n_tokens=8)
    build_site([plain], tmp_path / "plain" / "explorer", options={"page_size": 5})
    page.goto((tmp_path / "plain" / "explorer" / "index.html").as_uri() + "#/instance/synth/m-s0/0")
    page.wait_for_selector("#tokens .tok")
    assert page.locator("#instance-query").count() == 0
    assert not [e for e in page.errors if not e.startswith("network: file")], page.errors


WORD_LEFTS = """(el, words) => words.map(word => {
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let node; (node = walker.nextNode()); ) {
        const at = node.data.indexOf(word);
        if (at >= 0) {
            const range = document.createRange();
            range.setStart(node, at);
            range.setEnd(node, at + word.length);
            return range.getBoundingClientRect().left;
        }
    }
    return null;
})"""


def words_in_reading_order(page, selector, words) -> bool:
    """Whether ``words`` (each found in the first element matching ``selector``) are laid out left to right."""
    lefts = page.locator(selector).first.evaluate(WORD_LEFTS, words)
    return None not in lefts and lefts == sorted(lefts)


def test_tokens_with_bidi_controls_stay_in_order(page, tmp_path):
    """A token holding U+202E (right-to-left override) reverses only itself: the tokens after it keep their
    left-to-right order, in the explorer and in the J&W heatmap page (every token is bidi-isolated); a class name
    holding one leaves the rest of its line in order."""
    from attnaudit.explorer.build import build_site
    from attnaudit.jain_wallace.heatmaps import render

    def in_reading_order(selector):
        boxes = page.locator(selector).evaluate_all(
            "els => els.map(e => { const r = e.getBoundingClientRect(); return [Math.round(r.top), r.left]; })"
        )
        return len(boxes) == 8 and boxes == sorted(boxes)

    tokens = ["<s>", "rtl\u202eoverride", "after", "the", "override", "comes", "this", "</s>"]
    entry = make_results(tmp_path, n_instances=12, n_tokens=8, special=tokens[1])
    manifest = tmp_path / "results/corpora/synth/manifest.json"
    manifest.write_text(json.dumps({"label_names": ["neg\u202e", "pos\u202e"]}))
    build_site([entry], tmp_path / "explorer", options={"page_size": 5})
    page.goto((tmp_path / "explorer" / "index.html").as_uri() + "#/instance/synth/m-s0/0")
    page.wait_for_selector("#tokens .tok")
    assert page.locator("#tokens .tok").nth(1).text_content() == tokens[1]
    assert in_reading_order("#tokens .tok")
    assert words_in_reading_order(page, "#instance-facts tr:nth-child(2) td", ["(p", "="])

    weights = np.linspace(0.05, 0.2, 8)
    chosen = pd.DataFrame(
        {"id": ["i0"], "label": [0], "predicted_class": [0], "eps_max_jsd": [0.3], "max_attention": [0.2]}
        | {"n_valid": [2], "attention": [weights], "adversarial_attention": [weights[::-1]], "best_tvd": [0.01]}
    )
    page.set_content(render("synth", "m-s0", chosen, {"i0": tokens}, 0.01, ["neg\u202e", "pos"]))
    assert in_reading_order(".orig .tok") and in_reading_order(".adv .tok")
    # the class name's override stays inside it: the line's own words keep their order
    assert words_in_reading_order(page, ".instance .meta", ["label", "predicted", "JSD", "valid"])
    assert not page.errors, page.errors


def test_a_very_long_token_wraps_inside_the_page(page, tmp_path):
    """A 300-character token (a URL, a run of one letter) wraps inside its box: the explorer's instance view and the
    J&W heatmap page stay as wide as the window instead of scrolling sideways."""
    from attnaudit.explorer.build import build_site
    from attnaudit.jain_wallace.heatmaps import render

    page.set_viewport_size({"width": 1280, "height": 800})
    long = "X" * 300
    entry = make_results(tmp_path, n_instances=12, n_tokens=8, special=long)
    build_site([entry], tmp_path / "explorer", options={"page_size": 5})
    page.goto((tmp_path / "explorer" / "index.html").as_uri() + "#/instance/synth/m-s0/0")
    page.wait_for_selector("#tokens .tok")
    assert page.locator("#tokens .tok").nth(1).text_content() == long
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    weights = np.linspace(0.05, 0.2, 8)
    chosen = pd.DataFrame(
        {"id": ["i0"], "label": [0], "predicted_class": [0], "eps_max_jsd": [0.3], "max_attention": [0.2]}
        | {"n_valid": [2], "attention": [weights], "adversarial_attention": [weights[::-1]], "best_tvd": [0.01]}
    )
    tokens = ["<s>", long, "a", "long", "token", "in", "here", "</s>"]
    page.set_content(render("synth", "m-s0", chosen, {"i0": tokens}, 0.01, ["neg", "pos"]))
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    assert not [e for e in page.errors if not e.startswith("network: file")], page.errors


# the text of a heatmap row's tokens and the spaces between them (not its label or Δŷ)
TOKENS_TEXT = """e => Array.from(e.childNodes)
    .filter(n => n.nodeType === Node.TEXT_NODE || n.classList.contains('tok'))
    .map(n => n.textContent).join('').trim()"""


def test_chinese_tokens_are_shown_without_spaces(page, tmp_path):
    """Tokens of a script written without spaces (here Chinese words and punctuation) are shown side by side, as the
    text writes them, in the explorer and the J&W heatmap page; a Latin word among them, and an English instance,
    keep their spaces."""
    from attnaudit.explorer.build import build_site
    from attnaudit.jain_wallace.heatmaps import render

    words = ["这部", "电影", "很", "好", "。", "iphone", "也", "很", "好", "！"]
    shown = "<s> 这部电影很好。 iphone 也很好！ </s>"
    entry = make_results(tmp_path, n_instances=12, n_tokens=8, first_tokens=words)
    build_site([entry], tmp_path / "explorer", options={"page_size": 5})

    def explorer_tokens(instance):
        page.goto((tmp_path / "explorer" / "index.html").as_uri() + f"#/instance/synth/m-s0/{instance}")
        page.wait_for_selector("#tokens .tok")
        return page.locator("#tokens .tok").all_text_contents(), page.text_content("#tokens")

    tokens, text = explorer_tokens(0)
    assert tokens == ["<s>", *words, "</s>"] and text == shown
    tokens, text = explorer_tokens(1)  # words w1, w2, ...: spaced
    assert len(tokens) > 2 and text == " ".join(tokens)
    weights = np.linspace(0.05, 0.2, len(words) + 2)
    chosen = pd.DataFrame(
        {"id": ["i0"], "label": [0], "predicted_class": [0], "eps_max_jsd": [0.3], "max_attention": [0.2]}
        | {"n_valid": [2], "attention": [weights], "adversarial_attention": [weights[::-1]], "best_tvd": [0.01]}
    )
    page.set_content(render("synth", "m-s0", chosen, {"i0": ["<s>", *words, "</s>"]}, 0.01, ["neg", "pos"]))
    for row in (".orig", ".adv"):
        assert page.locator(f"{row} .tok").count() == len(words) + 2
        assert page.locator(row).evaluate(TOKENS_TEXT) == shown
    assert not [e for e in page.errors if not e.startswith("network: file")], page.errors
