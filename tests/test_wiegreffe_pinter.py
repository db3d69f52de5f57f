"""W&P stage (§3.2–§4): seed-variance JSD/TVD against an independent per-instance scipy computation (markers left
out and renormalised), the adversary join, the uniform/diagnostic tables' rules on crafted numbers, the imitation
JSON schema, figures, and every subcommand through the CLI."""

import json
import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import entropy
from sklearn.metrics import f1_score

from attnaudit import AttnauditError
from attnaudit.cli import main
from attnaudit.data import BOS, EOS, SPECIALS
from attnaudit.wiegreffe_pinter import reference
from attnaudit.wiegreffe_pinter.adversary import write_adversary
from attnaudit.wiegreffe_pinter.card import table2_measure
from attnaudit.wiegreffe_pinter.figures import seed_figures
from attnaudit.wiegreffe_pinter.imitation import KEYS, imitation_summary
from attnaudit.wiegreffe_pinter.options import DEFAULTS, resolve
from attnaudit.wiegreffe_pinter.seeds import seed_variance
from attnaudit.wiegreffe_pinter.tables import (
    diagnostic_markdown,
    diagnostic_table,
    seed_table,
    uniform_markdown,
    uniform_table,
)

WORDS = [f"w{i}" for i in range(30)]
N_TEST = 50
PNG = b"\x89PNG\r\n\x1a\n"


def _examples(rng) -> pd.DataFrame:
    rows = []
    for split, n in (("train", 10), ("test", N_TEST)):
        for i in range(n):
            length = 0 if (split == "test" and i == 7) else int(rng.integers(1, 25))  # test #7: markers only
            tokens = [BOS, *rng.choice(WORDS, length), EOS]
            rows.append({"id": f"{split}-{i}", "split": split, "label": int(rng.integers(0, 2)), "tokens": tokens})
    # shuffle so the split order is not the file order and lengths are mixed
    return pd.DataFrame(rows).sample(frac=1.0, random_state=1).reset_index(drop=True)


@pytest.fixture
def dataset(tmp_path) -> Path:
    rng = np.random.default_rng(0)
    out = tmp_path / "dataset"
    out.mkdir()
    _examples(rng).to_parquet(out / "examples.parquet", index=False)
    vocab = {t: i for i, t in enumerate([*SPECIALS, *WORDS])}
    (out / "vocab.json").write_text(json.dumps(vocab))
    return out


def _attention(tokens, rng) -> np.ndarray:
    return rng.dirichlet(np.ones(len(tokens))).astype(np.float32)


def write_predictions(path: Path, examples: pd.DataFrame, attention, probs) -> Path:
    """predictions.parquet in the train stage's layout; ``attention``/``probs`` map an example row to its values."""
    rows = []
    for i, ex in examples.iterrows():
        p = np.asarray(probs(i, ex), dtype=np.float64)
        rows.append(
            {
                "id": ex["id"],
                "split": ex["split"],
                "label": ex["label"],
                "predicted": int(p.argmax()),
                "probs": list(p),
                "attention": np.asarray(attention(i, ex), dtype=np.float32),
            }
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).sample(frac=1.0, random_state=2).to_parquet(path, index=False)
    return path


@pytest.fixture
def models(dataset, tmp_path):
    """Base model + four seeds with known relations to it, and a J&W adversarial parquet of the base model."""
    rng = np.random.default_rng(1)
    examples = pd.read_parquet(dataset / "examples.parquet")
    base_att = {i: _attention(ex["tokens"], rng) for i, ex in examples.iterrows()}
    base_p = {i: (lambda p: [1 - p, p])(rng.uniform()) for i in examples.index}

    def inner_permuted(i, ex):
        a = base_att[i].copy()
        a[1:-1] = rng.permutation(a[1:-1])
        return a

    def markers_changed(i, ex):  # same weights on the words up to scale, different mass on <s>, </s>
        a = base_att[i].astype(np.float64).copy()
        a[[0, -1]] = rng.uniform(0, 5, 2)
        return a / a.sum()

    root = tmp_path / "models"
    same = lambda i, ex: base_att[i]  # noqa: E731
    base_probs = lambda i, ex: base_p[i]  # noqa: E731
    other_probs = lambda i, ex: (lambda p: [1 - p, p])(rng.uniform())  # noqa: E731
    paths = {
        "base": write_predictions(root / "base" / "predictions.parquet", examples, same, base_probs),
        "same": write_predictions(root / "same" / "predictions.parquet", examples, same, base_probs),
        "markers": write_predictions(root / "markers" / "predictions.parquet", examples, markers_changed, base_probs),
        "permuted": write_predictions(root / "permuted" / "predictions.parquet", examples, inner_permuted, other_probs),
        "random": write_predictions(
            root / "random" / "predictions.parquet", examples, lambda i, ex: _attention(ex["tokens"], rng), other_probs
        ),
    }
    test = examples[examples["split"] == "test"]
    adversarial = pd.DataFrame(
        {
            "id": test["id"],
            "row": np.arange(len(test)),
            "label": test["label"],
            "predicted_class": [int(np.argmax(base_p[i])) for i in test.index],
            "n_tokens": test["tokens"].map(len),
            "max_attention": [base_att[i].max() for i in test.index],
            "eps_max_jsd": rng.uniform(0, np.log(2), len(test)),
            "n_valid": rng.integers(0, 3, len(test)),
            "best_tvd": rng.uniform(0, 0.01, len(test)),
        }
    ).sample(frac=1.0, random_state=3)
    paths["adversarial"] = root / "jw_adversarial.parquet"
    adversarial.to_parquet(paths["adversarial"], index=False)
    return paths


def _jsd(p, q) -> float:
    """JSD in nats from scipy's KL (``entropy(p, m)``); scipy's ``jensenshannon`` is the JS *distance* (its square
    is the JSD) and turns rounding below 0 into NaN for equal inputs."""
    m = 0.5 * (p + q)
    return 0.5 * entropy(p, m) + 0.5 * entropy(q, m)


def reference_distances(dataset: Path, seed_paths, base_path):
    """Independent per-instance JSD (scipy KL, nats) and TVD, markers dropped by token string."""
    examples = pd.read_parquet(dataset / "examples.parquet").set_index("id")
    base = pd.read_parquet(base_path).query("split == 'test'").set_index("id")
    out = {}
    for iid, ex in examples[examples["split"] == "test"].iterrows():
        keep = np.array([t not in (BOS, EOS) for t in ex["tokens"]])
        jsds, tvds = [], []
        for path in seed_paths:
            seed = pd.read_parquet(path).set_index("id").loc[iid]
            p = np.asarray(seed["attention"], float)[keep]
            q = np.asarray(base.loc[iid, "attention"], float)[keep]
            jsds.append(_jsd(p / p.sum(), q / q.sum()) if keep.any() else np.nan)
            tvds.append(0.5 * np.abs(np.asarray(seed["probs"]) - np.asarray(base.loc[iid, "probs"])).sum())
        q = np.asarray(base.loc[iid, "attention"], float)[keep]
        out[iid] = (np.array(jsds), np.array(tvds), (q / q.sum()).max() if keep.any() else np.nan)
    return out


def test_seed_variance_matches_independent_computation(dataset, models):
    seeds = [models[k] for k in ("same", "markers", "permuted", "random")]
    frame = seed_variance(models["base"], seeds, dataset, models["adversarial"]).set_index("id")
    expected = reference_distances(dataset, seeds, models["base"])
    assert len(frame) == N_TEST and set(frame.index) == set(expected)
    assert (frame["n_seeds"] == 4).all()
    for iid, (jsds, tvds, top) in expected.items():
        row = frame.loc[iid]
        np.testing.assert_allclose(row["seed_jsd"], jsds, atol=1e-6, equal_nan=True)
        np.testing.assert_allclose(row["seed_tvd"], tvds, atol=1e-9)
        np.testing.assert_allclose(row["jsd_median"], np.median(jsds), atol=1e-6, equal_nan=True)
        np.testing.assert_allclose(row["tvd_median"], np.median(tvds), atol=1e-9)
        np.testing.assert_allclose(row["tvd_mean"], np.mean(tvds), atol=1e-9)  # the scatter's y (W&P's code)
        np.testing.assert_allclose(row["max_attention"], top, atol=1e-6, equal_nan=True)
    defined = frame["seed_jsd"].map(lambda v: not np.isnan(v).any())
    jsd = np.stack(frame.loc[defined, "seed_jsd"])
    # identical attention, and attention that differs only on the markers (excluded, renormalised): JSD 0
    assert np.abs(jsd[:, :2]).max() < 1e-6
    assert (jsd[:, 2:] <= np.log(2) + 1e-12).all() and jsd[:, 3].mean() > 0.01
    # the instance made only of markers has nothing to compare
    assert frame.loc["test-7", ["jsd_median", "max_attention"]].isna().all()
    assert frame.loc["test-7", "n_content"] == 0 and not frame.loc["test-7", "beyond_every_seed"]


def test_seed_variance_joins_the_adversary_and_flags_beyond_every_seed(dataset, models):
    seeds = [models["permuted"], models["random"]]
    frame = seed_variance(models["base"], seeds, dataset, models["adversarial"]).set_index("id")
    adv = pd.read_parquet(models["adversarial"]).set_index("id").loc[frame.index]
    np.testing.assert_array_equal(frame["eps_max_jsd"], adv["eps_max_jsd"])
    np.testing.assert_array_equal(frame["n_valid"], adv["n_valid"])
    expected = reference_distances(dataset, seeds, models["base"])
    beyond = [
        bool(adv.loc[i, "n_valid"] > 0 and adv.loc[i, "eps_max_jsd"] > np.max(expected[i][0])) for i in frame.index
    ]
    assert frame["beyond_every_seed"].tolist() == beyond
    assert 0 < sum(beyond) < len(beyond)  # the crafted data exercises both outcomes


def test_seed_variance_errors(dataset, models, tmp_path):
    with pytest.raises(AttnauditError, match=str(dataset)):
        seed_variance(models["base"], [models["random"]], dataset, models["adversarial"])
    partial = tmp_path / "partial.parquet"
    pd.read_parquet(models["adversarial"]).iloc[5:].to_parquet(partial)
    with pytest.raises(AttnauditError, match="no adversarial audit"):
        seed_variance(models["base"], [models["random"], models["permuted"]], dataset, partial)
    short = tmp_path / "short.parquet"
    pd.read_parquet(models["random"]).assign(attention=lambda f: f["attention"].map(lambda a: a[:-1])).to_parquet(short)
    with pytest.raises(AttnauditError, match="weights for"):
        seed_variance(models["base"], [short, models["permuted"]], dataset, models["adversarial"])


def test_seed_variance_on_a_trained_model(planted_dataset, planted_model_dir, tmp_path):
    """The real train stage's predictions: a copy of the model is 0 away; a re-weighted copy is not."""
    base = planted_model_dir / "predictions.parquet"
    frame = pd.read_parquet(base)
    copy = frame.copy()
    copy.to_parquet(tmp_path / "copy.parquet")
    flattened = frame.assign(attention=frame["attention"].map(lambda a: np.full(len(a), 1 / len(a), np.float32)))
    flattened.to_parquet(tmp_path / "flat.parquet")
    test = frame[frame["split"] == "test"]
    pd.DataFrame(
        {"id": test["id"], "predicted_class": test["predicted"], "eps_max_jsd": 0.3, "n_valid": 1, "best_tvd": 0.0}
    ).to_parquet(tmp_path / "adv.parquet")
    out = seed_variance(
        base,
        [tmp_path / "copy.parquet", tmp_path / "flat.parquet"],
        planted_dataset / "dataset",
        tmp_path / "adv.parquet",
    )
    jsd = np.stack(out["seed_jsd"])
    assert len(out) == len(test) and np.abs(jsd[:, 0]).max() < 1e-6 and jsd[:, 1].max() > 0
    assert out["max_attention"].between(0, 1).all()


def _metrics(path: Path, macro: float, pos: float) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"test": {"macro_f1": macro, "per_class_f1": [macro, pos], "n": 10}, "model": {}}))
    return str(path)


def _uniform_runs(tmp_path, base: dict, uniform: dict) -> list[dict]:
    runs = []
    for role, per_dataset in (("base", base), ("uniform", uniform)):
        for dataset, scores in per_dataset.items():
            for seed, pos in enumerate(scores):
                model = f"lstm-{role}-base-s{seed}"
                path = _metrics(tmp_path / dataset / model / "metrics.json", pos - 0.01, pos)
                runs.append({"dataset": dataset, "model": model, "role": role, "seed": seed, "metrics": path})
    return runs


def test_uniform_table_flag_rule_and_paper_numbers(tmp_path):
    base = {"sst": [0.80, 0.82, 0.84], "imdb": [0.90, 0.91, 0.92], "mine": [0.7]}
    uniform = {"sst": [0.81, 0.79], "imdb": [0.80], "mine": [0.6]}
    runs = _uniform_runs(tmp_path, base, uniform)
    for run in runs:
        run["corpus"] = {"mine": "agnews"}.get(run["dataset"], run["dataset"])
    table = uniform_table(runs, {"uniform": {"spread_k": 2.0}}).set_index("dataset")
    for dataset in ("sst", "imdb"):
        b, u = np.array(base[dataset]), np.array(uniform[dataset])
        row = table.loc[dataset]
        assert row["n_base_seeds"] == len(b) and row["n_uniform_seeds"] == len(u)
        np.testing.assert_allclose(
            row[["base_pos_f1_mean", "base_pos_f1_std"]].astype(float), [b.mean(), b.std(ddof=1)]
        )
        np.testing.assert_allclose(row["uniform_macro_f1_mean"], u.mean() - 0.01)
        assert row["uniform_within_base_spread"] == (abs(b.mean() - u.mean()) <= 2 * b.std(ddof=1))
    assert table.loc["sst", "uniform_within_base_spread"] and not table.loc["imdb", "uniform_within_base_spread"]
    assert pd.isna(table.loc["mine", "uniform_within_base_spread"])  # one base seed: no spread
    assert table.loc["sst", ["jw_reported_f1", "wp_reproduced_f1", "wp_uniform_f1"]].tolist() == list(
        reference.TABLE2["sst"]
    )
    assert table.loc["mine", "wp_uniform_f1"] == reference.TABLE2["agnews"][2]  # keyed by corpus
    # a larger k widens the spread
    assert (
        uniform_table(runs, {"uniform": {"spread_k": 20.0}})
        .set_index("dataset")
        .loc["imdb"]["uniform_within_base_spread"]
    )


@pytest.mark.parametrize("missing", ["base", "uniform"])
def test_uniform_table_dataset_missing_a_role_is_an_error(tmp_path, missing):
    runs = _uniform_runs(tmp_path, {"sst": [0.8], "imdb": [0.9]}, {"sst": [0.8], "imdb": [0.9]})
    runs = [r for r in runs if not (r["dataset"] == "imdb" and r["role"] == missing)]
    with pytest.raises(AttnauditError, match=f"'imdb' has no '{missing}'"):
        uniform_table(runs)


def test_diagnostic_ordering_reported_honestly(tmp_path):
    scores = {
        "sst": {"uniform": [0.80, 0.82], "trained": [0.83, 0.83], "base_lstm": [0.85, 0.86], "adversary": [0.6]},
        "imdb": {"uniform": [0.89], "trained": [0.88], "base_lstm": [0.90], "adversary": [0.7]},  # trained < uniform
        "other": {"uniform": [0.7], "base_lstm": [0.8]},
    }
    runs = []
    for dataset, guides in scores.items():
        for guide, values in guides.items():
            for seed, pos in enumerate(values):
                path = _metrics(tmp_path / dataset / guide / f"s{seed}.json", pos, pos)
                runs.append(
                    {"dataset": dataset, "corpus": dataset, "model": f"mlp-{guide}-s{seed}", "guide": guide,
                     "seed": seed, "metrics": path}
                )  # fmt: skip
    table = diagnostic_table(runs)
    verdict = table.drop_duplicates("dataset").set_index("dataset")["paper_ordering_holds"]
    assert verdict["sst"] is True and verdict["imdb"] is False and pd.isna(verdict["other"])
    sst = table[table["dataset"] == "sst"].set_index("guide")
    np.testing.assert_allclose(
        sst.loc["uniform", ["pos_f1_mean", "pos_f1_std"]].astype(float), [0.81, np.std([0.8, 0.82], ddof=1)]
    )
    assert sst.loc["adversary", "wp_f1"] == reference.DIAGNOSTIC["sst"]["adversary"]
    assert "trained ≥ uniform: no" in table.set_index("dataset").loc["imdb", "ordering_detail"].iat[0]
    with pytest.raises(AttnauditError, match="unknown guide"):
        diagnostic_table([{**runs[0], "guide": "frozen"}])


def _three_class_metrics(path: Path, macro: float, class1: float) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    test = {"macro_f1": macro, "per_class_f1": [macro, class1, macro], "n": 10}
    path.write_text(json.dumps({"test": test, "model": {}}))
    return str(path)


def test_a_dataset_of_three_classes_is_judged_by_macro_f1_in_the_tables_and_on_the_card(tmp_path):
    """Class 1 is no positive class among three: W&P's verdicts use macro-F1 there, as the card does, and mark it.
    Class 1's F1 is chosen so that it would give the other verdict."""
    base = [(0.80, 0.5), (0.81, 0.9), (0.82, 0.7)]  # (macro, class 1): macro spread 0.01, class 1's 0.2
    runs = [
        {"dataset": "news", "model": f"lstm-s{seed}", "role": "base", "seed": seed,
         "metrics": _three_class_metrics(tmp_path / f"base{seed}.json", macro, class1)}
        for seed, (macro, class1) in enumerate(base)
    ] + [{"dataset": "news", "model": "uniform-s0", "role": "uniform", "seed": 0,
          "metrics": _three_class_metrics(tmp_path / "uniform.json", 0.60, 0.71)}]  # fmt: skip
    table = uniform_table(runs, {"uniform": {"spread_k": 2.0}}).set_index("dataset")
    row = table.loc["news"]
    assert row["f1_measure"] == "macro" and pd.isna(row["base_pos_f1_mean"])
    np.testing.assert_allclose(row["delta_f1"], 0.81 - 0.60)
    assert not row["uniform_within_base_spread"]  # 0.21 > 2 × 0.01 (class 1 would say: 0.01 ≤ 2 × 0.2)
    markdown = uniform_markdown(table.reset_index())
    assert "0.810 ± 0.010 (macro F1)" in markdown and "no positive class" in markdown
    name, values = table2_measure([r["metrics"] for r in runs if r["role"] == "base"])
    assert name == "macro-F1" and np.allclose(values, [0.80, 0.81, 0.82])

    guides = {"uniform": (0.70, 0.9), "trained": (0.75, 0.1), "base_lstm": (0.80, 0.5), "adversary": (0.40, 0.95)}
    runs = [
        {"dataset": "news", "model": f"mlp-{guide}-s0", "guide": guide, "seed": 0,
         "metrics": _three_class_metrics(tmp_path / f"{guide}.json", macro, class1)}
        for guide, (macro, class1) in guides.items()
    ]  # fmt: skip
    table = diagnostic_table(runs)
    assert bool(table["paper_ordering_holds"].iat[0])  # by macro-F1; by class 1, two of its three checks fail
    assert "(macro F1)" in diagnostic_markdown(table)


def test_an_imitation_of_three_classes_has_no_positive_class_f1(dataset, tmp_path):
    examples = pd.read_parquet(dataset / "examples.parquet")
    rng = np.random.default_rng(3)
    attention = lambda i, ex: _attention(ex["tokens"], rng)  # noqa: E731
    probs = lambda i, ex: rng.dirichlet(np.ones(3))  # noqa: E731
    paths = [
        write_predictions(tmp_path / name / "predictions.parquet", examples, attention, probs)
        for name in ("student", "teacher")
    ]
    summary = imitation_summary(*paths, dataset, lam=1.0, student="s", teacher="t", dataset="toy")
    assert summary["student_pos_f1"] is None and summary["teacher_pos_f1"] is None
    test = pd.read_parquet(paths[0]).query("split == 'test'")
    np.testing.assert_allclose(
        summary["student_macro_f1"], f1_score(test["label"], test["predicted"], average="macro", zero_division=0)
    )


def test_imitation_schema_and_values(dataset, models):
    summary = imitation_summary(
        models["permuted"], models["base"], dataset, lam=0.5, student="s", teacher="t", dataset="toy"
    )
    assert tuple(summary) == KEYS and json.loads(json.dumps(summary)) == summary
    expected = reference_distances(dataset, [models["permuted"]], models["base"])
    jsds = np.array([v[0][0] for v in expected.values()])
    tvds = np.array([v[1][0] for v in expected.values()])
    np.testing.assert_allclose(
        [summary["jsd_mean"], summary["jsd_median"]], [np.nanmean(jsds), np.nanmedian(jsds)], atol=1e-6
    )
    np.testing.assert_allclose([summary["tvd_mean"], summary["tvd_median"]], [tvds.mean(), np.median(tvds)])
    test = pd.read_parquet(models["permuted"]).query("split == 'test'")
    tp = ((test["predicted"] == 1) & (test["label"] == 1)).sum()
    pos_f1 = 2 * tp / ((test["predicted"] == 1).sum() + (test["label"] == 1).sum())
    np.testing.assert_allclose(summary["student_pos_f1"], pos_f1)
    assert summary["n"] == N_TEST and summary["lambda"] == 0.5 and summary["split"] == "test"


def test_figures_and_seed_table(dataset, models, tmp_path):
    seeds = [models["same"], models["permuted"], models["random"]]
    frame = seed_variance(models["base"], seeds, dataset, models["adversarial"])
    path = tmp_path / "sv.parquet"
    frame.to_parquet(path)
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"label_names": ["neg", "pos"]}))
    seed_figures(path, tmp_path / "violin.png", tmp_path / "scatter.png", "toy", manifest=manifest)
    for name in ("violin.png", "scatter.png"):
        data = (tmp_path / name).read_bytes()
        assert data.startswith(PNG) and len(data) > 5000
    table = seed_table([{"dataset": "toy", "model": "m", "seed_variance": str(path), "n_seeds": 3}]).iloc[0]
    assert table["n_seeds"] == 3 and table["n_instances"] == N_TEST and table["n_undefined"] == 1
    np.testing.assert_allclose(table["seed_jsd_median_mean"], np.nanmean(frame["jsd_median"]))
    np.testing.assert_allclose(table["beyond_every_seed_fraction"], frame["beyond_every_seed"].mean())
    with pytest.raises(AttnauditError, match="inputs say 8"):
        seed_table([{"dataset": "toy", "model": "m", "seed_variance": str(path), "n_seeds": 8}])


def test_options_reject_unknown_keys_and_bad_bins():
    assert resolve(None) == DEFAULTS
    with pytest.raises(AttnauditError, match="seeds.bins"):
        resolve({"seeds": {"bins": [0, 1]}})
    with pytest.raises(AttnauditError, match="increasing"):
        resolve({"seeds": {"attention_bins": [0, 0.5, 0.5, 1]}})
    with pytest.raises(AttnauditError, match="from 0 to 1 .every max attention needs a bin"):
        resolve({"seeds": {"attention_bins": [0, 0.1, 0.2, 0.3]}})  # 0.6 would be drawn in [0.2, 0.3]


def test_cli_end_to_end(dataset, models, tmp_path, caplog):
    out = tmp_path / "out"
    seeds = [str(models[k]) for k in ("same", "permuted", "random")]
    assert main(["wp", "seed-variance", "--base-predictions", str(models["base"]), "--seed-predictions", *seeds,
                 "--dataset-dir", str(dataset), "--adversarial", str(models["adversarial"]),
                 "--out", str(out / "sv.parquet")]) == 0  # fmt: skip
    assert len(pd.read_parquet(out / "sv.parquet")) == N_TEST
    assert main(["wp", "seed-variance", "--base-predictions", str(models["base"]), "--seed-predictions", seeds[0],
                 "--dataset-dir", str(dataset), "--adversarial", str(models["adversarial"]),
                 "--out", str(out / "none.parquet")]) == 2  # fmt: skip
    assert not (out / "none.parquet").exists()
    assert main(["wiegreffe-pinter", "seed-figures", "--seed-variance", str(out / "sv.parquet"), "--out-violin",
                 str(out / "v.png"), "--out-scatter", str(out / "s.png"), "--title", "toy"]) == 0  # fmt: skip
    inputs = json.dumps([{"dataset": "toy", "model": "base", "seed_variance": str(out / "sv.parquet"), "n_seeds": 3}])
    assert main(["wp", "seed-table", "--inputs", inputs, "--out-csv", str(out / "st.csv"),
                 "--out-md", str(out / "st.md")]) == 0  # fmt: skip
    imitations = []
    for lam, student in ((0.1, "permuted"), (1.0, "random")):
        imitations.append(str(out / f"imitation-{lam}.json"))
        assert main(["wp", "imitation", "--student-predictions", str(models[student]), "--teacher-predictions",
                     str(models["base"]), "--dataset-dir", str(dataset), "--lambda", str(lam), "--student", student,
                     "--teacher", "base", "--dataset", "toy", "--out", imitations[-1]]) == 0  # fmt: skip
        assert tuple(json.loads(Path(imitations[-1]).read_text())) == tuple(sorted(KEYS))  # write_json sorts keys
    assert main(["wp", "adversary", "--imitations", *imitations[::-1], "--seed-variance", str(out / "sv.parquet"),
                 "--adversarial", str(models["adversarial"]), "--out-csv", str(out / "adv.csv"),
                 "--out-png", str(out / "adv.png")]) == 0  # fmt: skip
    adv = pd.read_csv(out / "adv.csv")
    assert adv["lambda"].tolist() == [0.1, 1.0] and adv["seed_jsd_mean"].notna().all()
    with caplog.at_level(logging.INFO):
        table = write_adversary(imitations, out / "adv2.csv", out / "adv2.png")
    assert table["jw_adversary_jsd_mean"].isna().all() and "left out" in caplog.text
    runs = tmp_path / "runs.json"
    runs.write_text(json.dumps(_uniform_runs(tmp_path, {"sst": [0.8, 0.82]}, {"sst": [0.79]})))
    assert main(["wp", "uniform", "--runs", f"@{runs}", "--out-csv", str(out / "u.csv"),
                 "--out-md", str(out / "u.md")]) == 0  # fmt: skip
    assert "positive-class" in (out / "u.md").read_text()
    diag = [
        {**r, "guide": {"base": "base_lstm", "uniform": "uniform"}[r.pop("role")]} for r in json.loads(runs.read_text())
    ]
    assert main(["wp", "diagnostic", "--runs", json.dumps(diag), "--out-csv", str(out / "d.csv"),
                 "--out-md", str(out / "d.md")]) == 0  # fmt: skip
    assert "undetermined" in (out / "d.md").read_text()
    for name in ("v.png", "s.png", "adv.png", "adv2.png"):
        assert (out / name).read_bytes().startswith(PNG)
    for name in ("st.md", "u.md", "d.md"):
        assert (out / name).read_text().count("|") > 10
