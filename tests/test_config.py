"""Config validation: a typo or an invalid value stops the workflow with the key named."""

import subprocess
import sys

import pytest
import yaml
from conftest import REPO


def dry_run(tmp_path, cfg: dict) -> subprocess.CompletedProcess:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "--snakefile",
            str(REPO / "Snakefile"),
            "-n",
            "--directory",
            str(tmp_path),
            "--configfile",
            str(path),
            "--replace-workflow-config",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


BASE = {"datasets": {"planted": {"corpus": "planted"}}}


def _sheet(models: dict) -> dict:
    return {"datasets": {"planted": {"corpus": "planted", "grid": {"encoders": ["lstm"]}, "models": models}}}


def test_valid_minimal_config_dry_runs(tmp_path):
    proc = dry_run(tmp_path, BASE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "train" in proc.stdout


def planned_models(stdout: str) -> dict[str, set[str]]:
    """``{rule: {dataset/model}}`` of the model jobs a dry run plans."""
    planned: dict[str, set[str]] = {}
    for block in stdout.split("\nrule ")[1:]:
        rule, _, rest = block.partition(":")
        outputs = next((line for line in rest.splitlines() if line.strip().startswith("output:")), "")
        if "results/models/" in outputs and "/model.pt" in outputs:
            planned.setdefault(rule, set()).add(outputs.split("results/models/")[1].split("/model.pt")[0])
    return planned


def test_a_last_epoch_model_is_read_off_its_best_epoch_twins_run(tmp_path):
    """``lstm-additive-last-s0`` differs from J&W's ``lstm-additive-base-s0`` only in the selection rule: one job
    trains the run and keeps its final epoch, another reads the model off it. In a dataset where the base model
    stops early (patience), the same id is a run of its own, so it is trained in every dataset."""
    last = {"lstm-additive-last": {"selection": "last"}}
    planted = {"corpus": "planted", "grid": {"encoders": ["lstm"], "attentions": ["additive"]}, "models": last}
    proc = dry_run(tmp_path, {"datasets": {"planted": planted}})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert planned_models(proc.stdout) == {
        "train_keeping_final_epoch": {"planted/lstm-additive-base-s0"},
        "read_off_final_epoch": {"planted/lstm-additive-last-s0"},
    }
    patient = {**planted, "train": {"patience": 2}}
    proc = dry_run(tmp_path, {"datasets": {"planted": planted, "patient": patient}})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert planned_models(proc.stdout) == {
        "train": {f"{d}/lstm-additive-{v}-s0" for d in ("planted", "patient") for v in ("base", "last")}
    }


def test_grid_blocks_are_united(tmp_path):
    """A list of grid blocks trains the union of their products, each model once."""
    grid = [
        {"encoders": ["average", "cnn"], "attentions": ["dot"]},
        {"encoders": ["average"], "attentions": ["dot"], "seeds": [0, 1]},
    ]
    proc = dry_run(tmp_path, {"datasets": {"planted": {"corpus": "planted", "grid": grid}}})
    assert proc.returncode == 0, proc.stderr[-3000:]
    planned = {
        line.split("results/models/planted/")[1].split("/")[0]
        for line in proc.stdout.splitlines()
        if "results/models/planted/" in line
    }
    assert planned == {"average-dot-base-s0", "cnn-dot-base-s0", "average-dot-base-s1"}, proc.stdout[-3000:]


@pytest.mark.parametrize(
    "cfg,expected",
    [
        ({**BASE, "train": {"epoch": 3}}, "'epoch' was unexpected"),
        ({**BASE, "train": {"lr": -1}}, "-1"),
        ({"datasets": {"planted": {"corpus": "planted", "grid": {"encoders": ["rnn"]}}}}, "'rnn' is not one of"),
        ({"datasets": {"planted": {"corpus": "planted", "tokenise": {"min_cout": 2}}}}, "'min_cout' was unexpected"),
        ({"datasets": {"planted": {"corpus": "planted"}}, "corpora": {"mirorr": "/x"}}, "'mirorr' was unexpected"),
        # the model sheet: the schema (types, signs, unknown keys) and then the sheet's own checks
        (_sheet({"x": {"regulariser": "tying", "delta": -5}}), "-5 is less than the minimum of 0"),
        (_sheet({"x": {"regulariser": "tying", "deltaa": 5}}), "'deltaa' was unexpected"),
        (_sheet({"x": {"regulariser": "tying", "delta": 5}}), "datasets.planted.models.x.lstm_hidden"),
        (_sheet({"x": {"objective": "imitate", "teacher": "nobody-s0"}}), "'nobody-s0' names no model"),
        ({"datasets": {"bad-name": {"corpus": "planted"}}}, "'bad-name' does not match"),
        # importance methods and their options are checked against the registry before any job runs
        (
            {**BASE, "importance": {"integrated_gradient": {"n_steps": 8}}},
            "unknown importance method 'integrated_gradient'",
        ),
        ({**BASE, "importance": {"occlusion": {"window": 3}}}, "'window' was unexpected"),
        ({**BASE, "importance": {"random": {"sed": 3}}}, "importance.random.sed: not an option of random"),
        ({**BASE, "saliency": {"methods": ["attention", "gradients"]}}, "unknown importance method 'gradients'"),
        # a W&P output for a dataset whose sheet lacks a role stops at DAG construction, naming both
        (
            {
                "datasets": {"planted": {"corpus": "planted", "grid": {"encoders": ["lstm"], "seeds": [0, 1, 2]}}},
                "wiegreffe_pinter": {"datasets": ["planted"]},
            },
            "wiegreffe_pinter.roles.uniform: dataset 'planted' has no variant 'lstm-uniform'",
        ),
        (
            {
                "datasets": {
                    "planted": {"corpus": "planted", "grid": {"encoders": ["lstm"], "attentions": ["additive"]}}
                },
                "wiegreffe_pinter": {"datasets": ["planted"]},
            },
            "needs 2 more seeds of lstm-additive-base",
        ),
    ],
)
def test_invalid_config_names_the_key(tmp_path, cfg, expected):
    proc = dry_run(tmp_path, cfg)
    assert proc.returncode != 0
    assert expected in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-3000:]


def test_unknown_corpus_lists_valid_names(tmp_path):
    proc = dry_run(tmp_path, {"datasets": {"mine": {"corpus": "sst2"}}})
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "sst2" in out and all(name in out for name in ("sst", "imdb", "20news", "agnews", "adr", "planted"))
