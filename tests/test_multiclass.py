"""End-to-end on a user's own corpus of four classes (AG News test articles from the mirror, written as a user's
CSV): every stage runs, and where the papers compare positive-class F1 (W&P §3.2 and §4, T&Š §4.1), the tables and
cards judge by macro-F1 instead, recomputed here from the models' own metrics; J&W's Table 1 reports accuracy."""

from __future__ import annotations

import csv
import json

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import required_mirror, snakemake

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("multiclass")]  # one worker runs the pipeline once

# AG News's classes.txt, in order; the fourth as a user's label column might hold markup (shown as text, never run)
CLASSES = {"1": "world", "2": "sports", "3": "business", "4": "sci<script>window.__pwned=1</script>tech"}
PER_CLASS = 150
DATASET = "news4"
BASE = "lstm-additive-base"


def config(corpus_path: str) -> dict:
    """J&W's BiLSTM (three seeds: W&P's seed-variance baseline), W&P's roles, two T&Š models, B&F on the base."""
    return {
        "seed": 0,
        "corpora": {"user": {DATASET: {"path": corpus_path, "text_column": "text", "label_column": "topic"}}},
        "datasets": {
            DATASET: {
                "corpus": DATASET,
                "embeddings": {"dim": 32, "epochs": 10},
                "grid": {"encoders": ["lstm"], "attentions": ["additive"], "seeds": [0, 1, 2]},
                "train": {"epochs": 5, "lr": 0.005},  # the BiLSTMs reach test macro-F1 0.30–0.37 (chance 0.25)
                "models": {
                    "lstm16-additive-base": {"lstm_hidden": 16, "clip": 5},
                    "lstm16-additive-tying20": {"lstm_hidden": 16, "clip": 5, "regulariser": "tying", "delta": 20},
                    "lstm-uniform": {"attention": "uniform"},
                    "mlp-uniform": {"encoder": "mlp", "attention": "uniform"},
                    "mlp-additive": {"encoder": "mlp"},
                    "mlp-guided-base": {"encoder": "mlp", "attention": "guided", "guide": f"{BASE}-s0"},
                    "mlp-guided-adversary": {"encoder": "mlp", "attention": "guided", "guide": "lstm-adv1-s0"},
                    "lstm-adv1": {"objective": "imitate", "teacher": f"{BASE}-s0", "lambda": 1},
                },
            }
        },
        "importance": {"integrated_gradients": {"n_steps": 8}},
        "jain_wallace": {"permutation": {"n_permutations": 10}, "adversarial": {"steps": 30}},
        "saliency": {"models": [BASE], "seeds": [0]},
        "wiegreffe_pinter": {
            "datasets": [DATASET],
            "roles": {
                "base": BASE,
                "uniform": "lstm-uniform",
                "diagnostic": {
                    "uniform": "mlp-uniform",
                    "trained": "mlp-additive",
                    "base_lstm": "mlp-guided-base",
                    "adversary": "mlp-guided-adversary",
                },
                "adversaries": ["lstm-adv*"],
            },
        },
        "tutek_snajder": {
            "datasets": [DATASET],
            "models": ["lstm16-*"],
            "fragility": {"n_permutations": 5},
            "mutual_information": {"n_words": 100, "k": 20},
        },
        "cards": {"bootstrap_samples": 100},
    }


@pytest.fixture(scope="module")
def multiclass_run(tmp_path_factory):
    """The whole pipeline on ``PER_CLASS`` articles of each AG News class (title and description joined), a CSV
    outside the repository as a user would write it; nothing of the project's corpus registry is used."""
    mirror = required_mirror()
    workdir = tmp_path_factory.mktemp("multiclass")
    taken = dict.fromkeys(CLASSES, 0)
    source = mirror / "ag_news" / "ag_news_csv" / "test.csv"
    with (
        open(source, encoding="utf-8", newline="") as src,
        open(workdir / "articles.csv", "w", encoding="utf-8", newline="") as out,
    ):
        writer = csv.writer(out)
        writer.writerow(["text", "topic"])
        for label, title, description in csv.reader(src):
            if taken[label] < PER_CLASS:
                taken[label] += 1
                writer.writerow([f"{title}. {description}", CLASSES[label]])
    (workdir / "config.yaml").write_text(yaml.safe_dump(config("articles.csv"), sort_keys=False))
    snakemake(workdir, "--cores", "2", config=workdir / "config.yaml")
    return workdir


def test_every_stage_runs_on_four_classes_and_a_rerun_does_nothing(multiclass_run):
    out = snakemake(multiclass_run, "-n", config=multiclass_run / "config.yaml").stdout
    assert "Nothing to be done" in out, out[-3000:]
    stats = json.loads((multiclass_run / f"results/datasets/{DATASET}/stats.json").read_text())
    assert sum(sum(stats["counts"][s].values()) for s in ("train", "dev", "test")) == 4 * PER_CLASS, stats
    card = json.loads((multiclass_run / f"results/cards/{DATASET}/{BASE}-s0.json").read_text())
    assert card["label_names"] == sorted(CLASSES.values()), card["label_names"]
    assert sorted(card["metrics"]["per_class_f1"]) == sorted(CLASSES.values()), card["metrics"]
    assert {s["stage"] for s in card["sections"]} == {"jain_wallace", "saliency", "wiegreffe_pinter"}, card


def test_markup_in_a_users_class_name_reaches_cards_and_explorer_as_text(multiclass_run):
    """A class name holding ``<script>`` (the CSV's label column) is escaped on the cards and kept as a JSON string
    in the explorer's data files (which its page inserts with textContent; test_explorer_browser runs that part)."""
    import html

    name = CLASSES["4"]
    card = (multiclass_run / f"results/cards/{DATASET}/{BASE}-s0.html").read_text(encoding="utf-8")
    assert name not in card and html.escape(name) in card
    data = "".join(p.read_text(encoding="utf-8") for p in (multiclass_run / "results/explorer").rglob("*.js"))
    assert json.dumps(name, ensure_ascii=False) in data
    assert name not in (multiclass_run / "results/explorer/index.html").read_text(encoding="utf-8")


def test_wiegreffe_pinter_judge_four_classes_by_macro_f1(multiclass_run):
    """W&P §3.2: the base seeds' spread and the uniform twin in macro-F1 (no class is the positive one), from the
    models' metrics; the card's check and the table's verdict agree; W&P §4's imitation has no positive-class F1."""
    models = multiclass_run / f"results/models/{DATASET}"

    def macro_f1(model):
        return json.loads((models / model / "metrics.json").read_text())["test"]["macro_f1"]

    base = np.array([macro_f1(f"{BASE}-s{seed}") for seed in (0, 1, 2)])
    uniform = macro_f1("lstm-uniform-s0")
    [row] = pd.read_csv(multiclass_run / f"results/tables/wiegreffe_pinter/{DATASET}/table2_uniform.csv").to_dict(
        "records"
    )
    assert row["f1_measure"] == "macro" and np.isnan(row["base_pos_f1_mean"]), row
    assert row["base_f1_mean"] == pytest.approx(base.mean(), abs=1e-6)
    assert row["base_f1_std"] == pytest.approx(base.std(ddof=1), abs=1e-6)
    assert row["uniform_f1_mean"] == pytest.approx(uniform, abs=1e-6)
    within = abs(uniform - base.mean()) <= row["spread_k"] * base.std(ddof=1)
    assert row["uniform_within_base_spread"] == within
    table = (multiclass_run / f"results/tables/wiegreffe_pinter/{DATASET}/table2_uniform.md").read_text()
    assert "(macro F1)" in table

    card = json.loads((multiclass_run / f"results/cards/{DATASET}/{BASE}-s0.json").read_text())
    [section] = [s for s in card["sections"] if s["stage"] == "wiegreffe_pinter"]
    [check] = [c for c in section["checks"] if c["key"] == "wp_uniform"]
    beats = 100 * (base.mean() - uniform) > 100 * row["spread_k"] * base.std(ddof=1)  # the converse of the table's
    assert "macro-F1" in check["rule"] and check["passed"] == beats, check

    imitation = json.loads((multiclass_run / f"results/audits/{DATASET}/lstm-adv1-s0/wp_imitation.json").read_text())
    assert imitation["student_pos_f1"] is None and imitation["teacher_pos_f1"] is None, imitation
    assert imitation["student_macro_f1"] == pytest.approx(macro_f1("lstm-adv1-s0"), abs=1e-6)


def test_jain_wallace_and_tutek_snajder_report_what_four_classes_have(multiclass_run):
    """J&W Table 1 reports accuracy where no class is positive; T&Š's fragility (§4.1) is in macro-F1, marked."""
    tables = multiclass_run / "results/tables"
    models = multiclass_run / f"results/models/{DATASET}"
    table1 = pd.read_csv(tables / f"jain_wallace/{DATASET}/table1.csv")
    assert set(table1["metric"]) == {"accuracy"}, table1
    for row in table1.to_dict("records"):
        metrics = json.loads((models / row["model"] / "metrics.json").read_text())["test"]
        assert row["ours"] == pytest.approx(metrics["accuracy"], abs=1e-6), row
    fragility = (tables / f"tutek_snajder/{DATASET}/table1_fragility.md").read_text()
    rows = [line for line in fragility.splitlines() if line.startswith(f"| {DATASET} |")]
    assert len(rows) == 2 and all("(macro F1)" in line for line in rows), fragility
