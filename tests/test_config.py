"""Config validation: a typo or an invalid value stops the workflow with the key named."""

import copy
import re
import subprocess

import pytest
import yaml
from conftest import REPO, SHIPPED_CONFIGS, WORKFLOW
from forked_snakemake import run_snakemake

from attnaudit import ConfigKeyError
from attnaudit.config_errors import (
    DefaultFillingValidator,
    check_config,
    config_errors_end_the_run,
    read_command_line_values,
)
from attnaudit.modelsheet import sheet


def dry_run(tmp_path, cfg: dict, *flags: str) -> subprocess.CompletedProcess:
    """``snakemake -n`` of ``cfg`` alone (``-p`` among ``flags`` also prints each job's shell command)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return run_snakemake(
        [*WORKFLOW, "-n", *flags, "--directory", str(tmp_path), "--configfile", str(path), "--replace-workflow-config"],
        timeout=300,
    )


def shell_commands(tmp_path, cfg: dict, command: str, *flags: str) -> list[str]:
    """The shell commands of the planned jobs that run ``python -m attnaudit <command>``."""
    proc = dry_run(tmp_path, cfg, "-p", *flags)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [line for line in proc.stdout.splitlines() if f"python -m attnaudit {command} " in line]


BASE = {"datasets": {"planted": {"corpus": "planted"}}}


def _sheet(models: dict) -> dict:
    return {"datasets": {"planted": {"corpus": "planted", "grid": {"encoders": ["lstm"]}, "models": models}}}


def _wp_roles(models: dict, **roles) -> dict:
    """W&P on the planted corpus with the average encoder's seeds 0-2 as the base, ``models`` in the sheet."""
    return {
        "datasets": {
            "planted": {"corpus": "planted", "grid": {"encoders": ["average"], "seeds": [0, 1, 2]}, "models": models}
        },
        "wiegreffe_pinter": {"datasets": ["planted"], "roles": {"base": "average-additive-base", **roles}},
    }


def test_valid_minimal_config_dry_runs(tmp_path):
    proc = dry_run(tmp_path, BASE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "train" in proc.stdout


def test_a_config_without_audits_chunks_shards_the_audits_as_config_yaml_does(tmp_path):
    """A user's own experiment file (``--replace-workflow-config``) gets the schema's defaults: its audits run in as
    many chunks as the shipped config.yaml's laptop setting (README, *Fan-out*), a per-dataset count still wins."""
    shipped = yaml.safe_load((REPO / "config.yaml").read_text())["audits"]["chunks"]

    def chunk_counts(cfg):
        commands = shell_commands(tmp_path, cfg, "importance")
        assert commands, "no importance job planned"
        return {int(n) for command in commands for n in re.findall(r"/chunk-\d+-of-(\d+)\.parquet", command)}

    assert chunk_counts(BASE) == {shipped}
    assert chunk_counts({**BASE, "audits": {"chunks_per_dataset": {"planted": shipped + 2}}}) == {shipped + 2}


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
        # a split fraction for a corpus that has the split (SST's official dev) would be ignored
        (
            {"datasets": {"sst": {"corpus": "sst", "tokenise": {"dev_fraction": 0.1}}}},
            "datasets.sst.tokenise.dev_fraction: corpus sst has a dev split of its own",
        ),
        ({"datasets": {"planted": {"corpus": "planted"}}, "corpora": {"mirorr": "/x"}}, "'mirorr' was unexpected"),
        # the model sheet: the schema (types, signs, unknown keys) and then the sheet's own checks
        (_sheet({"x": {"regulariser": "tying", "delta": -5}}), "-5 is less than the minimum of 0"),
        (_sheet({"x": {"regulariser": "tying", "deltaa": 5}}), "'deltaa' was unexpected"),
        (_sheet({"x": {"dropout": 1}}), "dropout: 1 is greater than or equal to the maximum of 1"),
        ({**BASE, "train": {"dropout": 1.0}}, "train.dropout: 1.0 is greater than or equal to the maximum of 1"),
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
        # a W&P dataset whose sheet lacks a role stops before the DAG is built, naming both
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
        # W&P: Fig. 3's bins cover every max attention; the uniform twin is a uniform-attention model
        (
            {**BASE, "wiegreffe_pinter": {"seeds": {"attention_bins": [0, 0.1, 0.2, 0.3]}}},
            "config wiegreffe_pinter.seeds.attention_bins: [0, 0.1, 0.2, 0.3] must be increasing edges from 0 to 1",
        ),
        (
            {
                "datasets": {"planted": {"corpus": "planted", "grid": {"encoders": ["average"], "seeds": [0, 1, 2]}}},
                "wiegreffe_pinter": {
                    "datasets": ["planted"],
                    "roles": {"base": "average-additive-base", "uniform": "average-additive-base"},
                },
            },
            "wiegreffe_pinter.roles.uniform: 'average-additive-base' has attention 'additive' on 'planted'; the "
            "uniform role needs attention uniform",
        ),
        # W&P §3.2: the uniform twin is the base model with its attention frozen to uniform, nothing else changed
        (
            _wp_roles({"lstm-uniform": {"attention": "uniform", "lstm_hidden": 64}}, uniform="lstm-uniform"),
            "wiegreffe_pinter.roles.uniform: 'lstm-uniform' is not 'average-additive-base' with uniform attention on "
            "'planted' (encoder: 'average' against 'lstm', lstm_hidden: – against 64); W&P §3.2's uniform variant",
        ),
        # W&P §4: the adversary is the base model's architecture, trained to imitate it
        (
            _wp_roles(
                {
                    "average-uniform": {"encoder": "average", "attention": "uniform"},
                    "mlp-uniform": {"encoder": "mlp", "attention": "uniform"},
                    "mlp-additive": {"encoder": "mlp"},
                    "mlp-guided": {"encoder": "mlp", "attention": "guided", "guide": "average-additive-base"},
                    "average-adv1": {
                        "encoder": "average",
                        "attention": "dot",
                        "objective": "imitate",
                        "teacher": "average-additive-base",
                    },
                },
                uniform="average-uniform",
                diagnostic={
                    "uniform": "mlp-uniform",
                    "trained": "mlp-additive",
                    "base_lstm": "mlp-guided",
                    "adversary": "mlp-guided",
                },
                adversaries=["average-adv*"],
            ),
            "wiegreffe_pinter.roles.adversaries: 'average-adv1' imitates average-additive-base-s0 with another "
            "architecture on 'planted' (attention: 'additive' against 'dot'); W&P §4's adversary",
        ),
        # W&P §3.4: the diagnostic models are non-contextual
        (
            _wp_roles(
                {
                    "average-uniform": {"encoder": "average", "attention": "uniform"},
                    "lstm-uniform": {"attention": "uniform"},
                },
                uniform="average-uniform",
                diagnostic={"uniform": "lstm-uniform"},
            ),
            "wiegreffe_pinter.roles.diagnostic.uniform: 'lstm-uniform' has encoder 'lstm' on 'planted'; W&P's "
            "diagnostic model sees no neighbouring token",
        ),
        # QA/NLI datasets: the stages and training objectives that need the classifier's linear decoder
        (
            {"datasets": {"babi": {"corpus": "babi1"}}, "tutek_snajder": {"datasets": ["babi"]}},
            "config tutek_snajder.datasets: ['babi'] are QA/NLI datasets; T&Š's regularisers",
        ),
        (
            {
                "datasets": {
                    "babi": {
                        "corpus": "babi1",
                        "models": {"x": {"regulariser": "tying", "delta": 5, "lstm_hidden": 150}},
                    }
                }
            },
            "config datasets.babi.models.x: model x-s0 has regulariser 'tying' and objective 'classify'; babi is a",
        ),
        # a stage's selection that selects nothing would leave its tables empty and the run "successful"
        (
            {**BASE, "tutek_snajder": {"datasets": ["planted"], "models": ["lstm200-*"]}},
            "config tutek_snajder.models: ['lstm200-*'] select no model with learned attention trained to classify",
        ),
        # an imitating model has learned attention, but its audits are W&P's and T&Š's adversary tables
        (
            {
                **_sheet({"adv": {"objective": "imitate", "teacher": "lstm-additive-base-s0"}}),
                "saliency": {"models": ["adv"]},
            },
            "config saliency.models: ['adv'] select no model with learned attention trained to classify (attention "
            "additive or dot, objective classify) on ['planted']",
        ),
        (
            {**BASE, "saliency": {"models": ["lstm-additiv-base"]}},
            "config saliency.models: ['lstm-additiv-base'] select no",
        ),
        ({**BASE, "saliency": {"seeds": [7]}}, "config saliency.seeds: [7] select no model"),
        ({**BASE, "tutek_snajder": {"datasets": ["planed"]}}, "tutek_snajder.datasets: ['planed'] not under datasets"),
        ({**BASE, "wiegreffe_pinter": {"datasets": ["sst"]}}, "wiegreffe_pinter.datasets: ['sst'] not under"),
        ({**BASE, "audits": {"chunks_per_dataset": {"Planted": 2}}}, "chunks_per_dataset: ['Planted'] not under"),
        ({"datasets": {"planted": {"corpus": "planted", "grid": {"seeds": [1, 1]}}}}, "[1, 1] has non-unique"),
        # corpus options, before the corpus job (which would fail only after the whole study was planned)
        (
            {**BASE, "corpora": {"options": {"planted": {"n_exampls": 5}}}},
            "corpora.options.planted.n_exampls: unknown option",
        ),
        ({**BASE, "corpora": {"options": {"plantd": {}}}}, "corpora.options.plantd: unknown corpus 'plantd'"),
        ({"datasets": {"mine": {"corpus": "mine"}}}, "config datasets.mine.corpus: unknown corpus 'mine'; valid names"),
        # a dataset's J&W overrides are checked like the global block
        (
            {"datasets": {"planted": {"corpus": "planted", "jain_wallace": {"adversarial": {"epsilon": -3}}}}},
            "config datasets.planted.jain_wallace.adversarial.epsilon: -3 is less than or equal to the minimum",
        ),
        (
            {"datasets": {"planted": {"corpus": "planted", "jain_wallace": {"permutation": {"n_perm": 5}}}}},
            "datasets.planted.jain_wallace.permutation: Additional properties are not allowed ('n_perm'",
        ),
        # schema errors: the key and what is allowed in one line, YAML's 1e-3-is-text trap explained
        ({**BASE, "seeds": [1]}, "config (top level): Additional properties are not allowed ('seeds' was unexpected)"),
        ({**BASE, "train": {"lr": "1e-3"}}, "YAML reads 1e-3 as text: write 1.0e-3"),
        # an integer is an integer (JSON Schema would let 1.0 pass), and seeds stay in numpy's range: each of these
        # used to pass the dry run and stop a job later inside numpy, scikit-learn or gensim, naming no key
        ({**BASE, "seed": 1.0}, "config seed: 1.0 is not of type 'integer'"),
        ({**BASE, "seed": -1}, "config seed: -1 is less than the minimum of 0"),
        ({**BASE, "seed": 2**32 - 2}, "config seed: 4294967294 is greater than the maximum of 4294967293"),
        ({**BASE, "cards": {"seed": -3}}, "config cards.seed: -3 is less than the minimum of 0"),
        ({**BASE, "train": {"epochs": 1.0}}, "config train.epochs: 1.0 is not of type 'integer'"),
        (
            {"datasets": {"planted": {"corpus": "planted", "embeddings": {"dim": 16.0}}}},
            "config datasets.planted.embeddings.dim: 16.0 is not of type 'integer'",
        ),
        (
            {"datasets": {"planted": {"corpus": "planted", "grid": {"seeds": [2**32]}}}},
            "config datasets.planted.grid.seeds[0]: 4294967296 is greater than the maximum of 4294967295",
        ),
        (_sheet({"x": {"seeds": [2.0]}}), "config datasets.planted.models.x.seeds[0]: 2.0 is not of type 'integer'"),
        # a name's pattern is said in words too
        (_sheet({"LSTM-U": {}}), "'LSTM-U' does not match '^[a-z0-9][a-z0-9_.]*(-[a-z0-9_.]+)*$'; expected: a variant"),
        ({**BASE, "corpora": {"user": {"my-c": {}}}}, "'my-c' does not match '^[A-Za-z0-9_]+$'; expected: letters"),
    ],
)
def test_invalid_config_names_the_key(tmp_path, cfg, expected):
    proc = dry_run(tmp_path, cfg)
    assert proc.returncode != 0
    assert expected in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-3000:]
    assert "Failed validating" not in proc.stdout + proc.stderr  # not Snakemake's dump of the schema
    # nor under an InputFunctionException and its traceback: the W&P roles are checked before the DAG is built
    assert "Traceback" not in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-3000:]


def test_a_config_error_ends_the_run_with_its_message_alone(tmp_path):
    """The message and exit status 1, not under Snakemake's "AttnauditError in file rules/common.smk, line N:" and
    the workflow's traceback; an exception that is no config error (a bug) keeps Snakemake's traceback."""
    proc = dry_run(tmp_path, {**BASE, "seed": -1})
    said = (proc.stdout + proc.stderr).strip().splitlines()
    assert proc.returncode == 1, said
    assert re.fullmatch(rf"{re.escape(str(tmp_path / 'config.yaml'))}:\d+: config seed: -1 is less than .*", said[-1])
    assert not [line for line in said if "Error" in line or 'File "' in line], said
    with pytest.raises(SystemExit) as stop, config_errors_end_the_run():
        raise ConfigKeyError(("seed",), "-1 is less than the minimum of 0")
    assert stop.value.code == "config seed: -1 is less than the minimum of 0"
    with pytest.raises(ZeroDivisionError), config_errors_end_the_run():
        raise ZeroDivisionError("a bug keeps its traceback")


def test_values_nested_in_command_line_config_mean_what_they_mean_in_a_config_file(tmp_path):
    """Snakemake hands a value nested in ``--config`` (its documented "Python dict format") over as text, so
    ``train={'epochs': 2}`` met the schema as ``'2'`` and stopped. It now plans the same jobs, with the same
    commands, as the same values in the config file; text stays text where the schema asks for it (Norwegian's
    ``no``, which YAML would read as false), and what is not a number is still named."""
    training = {"epochs": 2, "lr": 0.01, "attend_to_markers": True}
    expected = shell_commands(tmp_path / "file", {**BASE, "train": training, "cards": {"seed": None}}, "train")
    assert expected
    given = "train={'epochs': 2, 'lr': 1e-2, 'attend_to_markers': True}", "cards={'seed': None}"
    assert shell_commands(tmp_path / "command_line", BASE, "train", "--config", *given) == [
        line.replace(str(tmp_path / "file"), str(tmp_path / "command_line")) for line in expected
    ]
    language = "datasets={'planted': {'corpus': 'planted', 'tokenise': {'language': 'no'}}}"
    proc = dry_run(tmp_path / "text", BASE, "--config", language)
    assert "datasets.planted.tokenise.language: spaCy has no tokenizer of 'no'" in proc.stdout + proc.stderr
    proc = dry_run(tmp_path / "word", BASE, "--config", "explorer={'page_size': 'many'}")
    assert "config explorer.page_size: 'many' is not of type 'integer'" in proc.stdout + proc.stderr


def test_command_line_text_is_read_where_the_schema_takes_no_text():
    """The leaves of a ``--config`` value as Snakemake's base loader leaves them: numbers, booleans and nulls in a
    list or a mapping become values; dates, text the schema takes as text, and a leaf a config file set after the
    command line (not the command line's) stay as they are."""
    given = {
        "train": {"epochs": "4", "lr": "1e-3", "attend_to_markers": "True", "selection": "last"},
        "cards": {"seed": "None", "bootstrap_samples": "1_000"},
        "saliency": {"seeds": ["0", "1"], "models": ["2020"]},
        "datasets": {"mine": {"corpus": "2021-01-01", "tokenise": {"language": "no"}}},
        "explorer": {"page_size": "many"},
        "seed": "null",
    }
    config = yaml.safe_load(yaml.safe_dump(given))
    config["train"]["epochs"] = "8"  # not the command line's text
    read_command_line_values(config, given, REPO / "schemas" / "config.schema.yaml")
    assert config == {
        "train": {"epochs": "8", "lr": 0.001, "attend_to_markers": True, "selection": "last"},
        "cards": {"seed": None, "bootstrap_samples": 1000},
        "saliency": {"seeds": [0, 1], "models": ["2020"]},
        "datasets": {"mine": {"corpus": "2021-01-01", "tokenise": {"language": "no"}}},
        "explorer": {"page_size": "many"},
        "seed": None,
    }
    assert type(config["saliency"]["seeds"][0]) is int and type(config["train"]["lr"]) is float


@pytest.mark.parametrize(
    "path", [None, *SHIPPED_CONFIGS], ids=lambda path: "minimal" if path is None else str(path.relative_to(REPO))
)
def test_the_defaults_filled_in_are_snakemakes(path):
    """check_config fills in the schema's defaults from the schema it has read, in place of Snakemake's
    ``validate(config, schema)``, which parses the schema file again: every shipped config (and a minimal one)
    comes out as Snakemake's validation leaves it, and a default changed in one config is not changed in the
    schema the next config gets its defaults from."""
    from snakemake.utils import validate

    schema_file = REPO / "schemas" / "config.schema.yaml"
    given = BASE if path is None else yaml.safe_load(path.read_text())
    ours, snakemakes = copy.deepcopy(given), copy.deepcopy(given)
    check_config(ours, schema_file)
    validate(snakemakes, str(schema_file))
    assert ours == snakemakes
    ours["audits"]["max_batch_tokens"]["cpu"] = -1
    again = copy.deepcopy(given)
    check_config(again, schema_file)
    assert again == snakemakes


def test_defaults_are_filled_into_objects_only():
    """A key that takes an object or a list (a dataset's ``grid``) given as a list gets no defaults, and no error."""
    schema = {"type": ["object", "array"], "properties": {"seeds": {"type": "array", "default": [0]}}}
    as_list, as_object = [{"seeds": [1]}], {}
    DefaultFillingValidator(schema).validate(as_list)
    DefaultFillingValidator(schema).validate(as_object)
    assert as_list == [{"seeds": [1]}] and as_object == {"seeds": [0]}


def test_a_key_given_twice_in_a_config_file_is_named(tmp_path):
    """YAML keeps the second of two equal keys and drops the first without a word: two ``datasets.planted`` blocks
    would train on the defaults the first block was written to change. The dry run stops with the file and both
    lines, for ``config.yaml`` and for a file given with ``--configfile``."""
    twice = "datasets:\n  planted:\n    corpus: planted\n    train: {epochs: 1}\n  planted:\n    corpus: planted\n"
    command = [*WORKFLOW, "-n", "--directory", str(tmp_path)]
    (tmp_path / "config.yaml").write_text(twice)
    proc = run_snakemake(command, timeout=300)
    assert proc.returncode != 0
    assert "config.yaml:5: key 'planted' is given twice in one mapping (first at line 2)" in proc.stdout + proc.stderr
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(BASE))
    path = tmp_path / "experiment.yaml"
    path.write_text(twice)
    command += ["--configfile", str(path), "--replace-workflow-config"]
    proc = run_snakemake(command, timeout=300)
    assert proc.returncode != 0
    assert f"{path}:5: key 'planted' is given twice in one mapping (first at line 2)" in proc.stdout + proc.stderr
    path.write_text("datasets:\n  planted:\n    corpus: planted\n    train: {epochs: 1}\n")
    assert run_snakemake(command, timeout=300).returncode == 0


@pytest.mark.parametrize(
    "text, expected",
    [
        (b"datasets:\n\tplanted: {corpus: planted}\n", "2:1: not valid YAML: found character .* never tabs"),
        (b"datasets:\n  planted: {corpus: planted\n", "3:1: not valid YAML: expected ',' or '}'.* opened at line 2"),
        (b"datasets:\n  planted:\n    corpus: planted\n     seed: 1\n", "4:10: not valid YAML: .*a key indented"),
        (b"datasets:\n  planted: {corpus: planted}\n# caf\xe9\n", "3: not UTF-8 \\(byte 0xe9"),
    ],
    ids=["a tab", "an unclosed brace", "a key indented differently", "latin-1"],
)
def test_a_config_yaml_that_cannot_be_read_names_its_line(tmp_path, text, expected):
    """Snakemake says only "Config file is not valid JSON or YAML" (or gives a decoding error's byte offset); the
    workflow reads ``config.yaml`` first and says where. A JSON config.yaml (JSON allows the tabs YAML forbids)
    still runs."""
    (tmp_path / "config.yaml").write_bytes(text)
    command = [*WORKFLOW, "-n", "--directory", str(tmp_path)]
    proc = run_snakemake(command, timeout=300)
    assert proc.returncode != 0
    assert re.search(rf"config\.yaml:{expected}", proc.stdout + proc.stderr), proc.stderr[-2000:]
    (tmp_path / "config.yaml").write_text('{\n\t"datasets": {\n\t\t"planted": {"corpus": "planted"}\n\t}\n}\n')
    proc = run_snakemake(command, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]


# two config files as a study is layered: the second (a --configfile) overrides the first key by key
LAYERED_BASE = """seed: 0
datasets:
  sst: &classification
    corpus: sst
    train: {epochs: 4}
    grid: {encoders: [lstm, cnn]}
  imdb:
    <<: *classification
    corpus: imdb
train:
  lr: 0.001
"""
LAYERED_EXPERIMENT = """train:
  epochs: 3
  lr: 0.01
"""


def layered_error(tmp_path, base: str, experiment: str, command_line: dict | None = None) -> str:
    """The schema error of two config files (and ``--config`` values) merged as Snakemake merges them."""
    from snakemake.utils import update_config

    from attnaudit import AttnauditError
    from attnaudit.config_errors import ConfigSources

    paths = [tmp_path / "base.yaml", tmp_path / "experiment.yaml"]
    config: dict = {}
    for path, text in zip(paths, (base, experiment), strict=True):
        path.write_text(text)
        update_config(config, yaml.safe_load(text))
    update_config(config, command_line or {})
    with pytest.raises(AttnauditError) as raised:
        check_config(config, REPO / "schemas" / "config.schema.yaml", ConfigSources(paths, command_line))
    return str(raised.value)


@pytest.mark.parametrize(
    "base, experiment, command_line, expected",
    [
        # the file whose value is used: the later file where both set it, else the one that sets it
        (LAYERED_BASE, LAYERED_EXPERIMENT.replace("0.01", "-1"), None, "experiment.yaml:3: config train.lr: -1"),
        (LAYERED_BASE.replace("seed: 0", "seed: 1.0"), LAYERED_EXPERIMENT, None, "base.yaml:1: config seed: 1.0"),
        (LAYERED_BASE, LAYERED_EXPERIMENT, {"train": {"lr": -2}}, "--config: config train.lr: -2"),
        # a list item on its line
        (LAYERED_BASE.replace("cnn]", "rnn]"), "{}", None, "base.yaml:6: config datasets.sst.grid.encoders[1]"),
        # reached through a YAML merge key: named where the anchored block writes it
        (
            "seed: 0\ntrain: &fast {epochs: 3, lr: 0.01}\ndatasets:\n  sst:\n    corpus: sst\n"
            "    embeddings: {<<: *fast, dim: 50}\n",
            "{}",
            None,
            "base.yaml:2: config datasets.sst.embeddings: Additional properties are not allowed ('lr' was",
        ),
        # an unknown key and a key's name are named on their own line, not their parent's
        (LAYERED_BASE, LAYERED_EXPERIMENT + "  epoch: 3\n", None, "experiment.yaml:4: config train: Additional"),
        (LAYERED_BASE + "  ok_name: {corpus: sst}\n".replace("ok_name", "bad-name"), "{}", None, "base.yaml:12:"),
    ],
    ids=["later file", "earlier file", "--config", "list item", "merge key", "unknown key", "key name"],
)
def test_a_schema_error_names_the_file_and_line_of_its_key(tmp_path, base, experiment, command_line, expected):
    """A study's config is often several files and ``--config`` values: the error names the one whose value the
    run uses, at the line of the key (YAML anchors followed), before the key and what was expected."""
    message = layered_error(tmp_path, base, experiment, command_line)
    assert message.replace(f"{tmp_path}/", "").startswith(expected), message


def test_a_key_no_file_writes_is_named_at_the_nearest_key_written(tmp_path):
    """A key the config files do not write (a field a model leaves to its default) is named at the nearest key above
    it that they do write; with none written (a default the schema fills in), no file or line is named."""
    from attnaudit.config_errors import ConfigSources

    (tmp_path / "base.yaml").write_text(LAYERED_BASE)
    sources = ConfigSources([tmp_path / "base.yaml"], {"seed": 3})
    assert sources.where(("audits", "chunks")) is None
    assert sources.where(("datasets", "sst", "train", "lr")) == f"{tmp_path / 'base.yaml'}:5"
    assert sources.where(("datasets", "imdb", "grid", "encoders", 2)) == f"{tmp_path / 'base.yaml'}:6"  # merged
    assert sources.where(("seed",)) == "--config"
    assert sources.located(("audits", "chunks"), "config audits.chunks: …") == "config audits.chunks: …"
    # a JSON file YAML cannot read (a tab) may set any key: no earlier file is named for what it replaced
    (tmp_path / "experiment.json").write_text('{\n\t"train": {"lr": -1}\n}\n')
    assert ConfigSources([tmp_path / "base.yaml", tmp_path / "experiment.json"]).where(("train", "lr")) is None
    (tmp_path / "empty.yaml").write_text("# nothing set yet\n")  # an empty file writes nothing, and hides nothing
    assert (
        ConfigSources([tmp_path / "base.yaml", tmp_path / "empty.yaml"]).where(("seed",)) == f"{tmp_path}/base.yaml:1"
    )


def test_the_workflow_names_where_a_config_error_is_written(tmp_path):
    """The Snakefile's ``config.yaml``, a ``--configfile`` layered on it and ``--config``, in Snakemake's order of
    precedence; the schema's errors and the workflow's own checks of a key (a stage's datasets, a dataset's J&W
    overrides) alike."""
    command = [*WORKFLOW, "-n", "--directory", str(tmp_path)]
    workflow_config = tmp_path / "config.yaml"
    experiment = tmp_path / "experiment.yaml"

    def said(*flags: str) -> str:
        proc = run_snakemake(command + list(flags), timeout=300)
        assert proc.returncode != 0, proc.stdout[-2000:]
        return proc.stdout + proc.stderr

    good = "datasets:\n  planted:\n    corpus: planted\ntrain:\n  epochs: 1\n"
    workflow_config.write_text(good.replace("epochs: 1", "epochs: 0"))
    assert "config.yaml:5: config train.epochs: 0 is less than the minimum" in said()
    experiment.write_text("train: {lr: 0.01}\n")  # layered on config.yaml, which still gives the epochs
    assert "config.yaml:5: config train.epochs: 0" in said("--configfile", str(experiment))
    workflow_config.write_text(good)
    experiment.write_text("train: {lr: 0.01}\ntutek_snajder:\n  datasets: [planed]\n")
    assert f"{experiment}:3: config tutek_snajder.datasets: ['planed'] not under datasets" in said(
        "--configfile", str(experiment)
    )
    experiment.write_text(
        good.replace("corpus: planted", "corpus: planted\n    jain_wallace:\n      adversarial: {epsilon: -3}")
    )
    assert f"{experiment}:5: config datasets.planted.jain_wallace.adversarial.epsilon: -3" in said(
        "--configfile", str(experiment), "--replace-workflow-config"
    )
    assert "--config: config train.lr: -1 is less than" in said("--config", "train={'lr': -1}")
    # the model sheet's checks: a teacher on its line; a field left to its default at its variant's entry
    sheet = "datasets:\n  planted:\n    corpus: planted\n    models:\n      mine:\n"
    experiment.write_text(sheet + "        objective: imitate\n        teacher: nobody\n")
    assert f"{experiment}:7: config datasets.planted.models.mine.teacher: 'nobody' names no model" in said(
        "--configfile", str(experiment), "--replace-workflow-config"
    )
    experiment.write_text(sheet + "        regulariser: tying\n        delta: 5\n")
    assert f"{experiment}:5: config datasets.planted.models.mine.lstm_hidden: tying compares h_t" in said(
        "--configfile", str(experiment), "--replace-workflow-config"
    )
    # an importance method named in a list, a tokeniser's language, a pretrained vectors file, a corpus's options,
    # a user corpus's file
    planted = "datasets:\n  planted:\n    corpus: planted\n"
    mine = "corpora:\n  user:\n    mine:\n      path: none.csv\n      text_column: text\n      label_column: label\n"
    for written, expected in [
        (planted + "saliency:\n  methods:\n    - attention\n    - gradients\n", "7: config saliency.methods[1]"),
        (planted + "    tokenise: {language: qq}\n", "4: config datasets.planted.tokenise.language: spaCy has no"),
        (planted + "    embeddings:\n      pretrained: none.txt\n", "5: config datasets.planted.embeddings.pretrained"),
        (planted + "corpora:\n  options:\n    planted:\n      n_exampels: 9\n", "7: config corpora.options.planted."),
        (mine + "datasets:\n  mine: {corpus: mine}\n", "4: config corpora.user.mine.path: file"),
    ]:
        experiment.write_text(written)
        assert f"{experiment}:{expected}" in said("--configfile", str(experiment), "--replace-workflow-config")


def test_a_pattern_that_selects_nothing_is_said(tmp_path):
    """One stray pattern among others that select models: the run goes on and stderr names it (a second
    experiment on fewer datasets keeps its patterns)."""
    proc = dry_run(tmp_path, {**BASE, "saliency": {"models": ["average-additive-base", "lstm-additiv-*"]}})
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "warning: config saliency: ['lstm-additiv-*'] select no model of ['planted']" in proc.stderr
    assert "corpora.user" not in proc.stderr


def test_a_user_corpus_no_dataset_names_is_said(tmp_path):
    """A ``corpora.user`` entry that no dataset names is not read (its file may not exist): the run goes on and
    stderr says so, since the dataset meant to use it may name another."""
    unread = {"path": str(tmp_path / "nowhere.csv"), "text_column": "text", "label_column": "label"}
    proc = dry_run(tmp_path, {**BASE, "corpora": {"user": {"mine": unread}}})
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "warning: config corpora.user: ['mine'] named by no dataset" in proc.stderr, proc.stderr[-3000:]


def test_a_stage_can_be_switched_off_and_overrides_reach_every_rule(tmp_path):
    """``saliency.datasets: []`` runs no B&F audit; a dataset's ε override reaches its audits, tables and heatmaps
    alike, and the tables' thresholds are not options of the audit jobs (changing them reruns only the tables), nor
    the heatmaps' options the tables'."""
    cfg = {
        "datasets": {
            "planted": {
                "corpus": "planted",
                "grid": {"encoders": ["average"], "attentions": ["additive"]},
                "jain_wallace": {"adversarial": {"epsilon": 0.05, "high_jsd": 0.3}},
            }
        },
        "jain_wallace": {"correlation": {"significance": 0.01}},
        "saliency": {"datasets": []},
    }
    proc = dry_run(tmp_path, cfg, "-p")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "rule saliency" not in proc.stdout
    shell = "Shell command: python -m attnaudit jain-wallace"
    commands = [line for line in proc.stdout.splitlines() if line.startswith(shell)]
    by_stage = {
        stage: [c for c in commands if f"jain-wallace {stage} " in c]
        for stage in ("audit", "correlation", "tables", "heatmaps")
    }
    adversarial = [c for c in by_stage["audit"] if '"adversarial"' in c]
    assert adversarial and by_stage["tables"] and by_stage["heatmaps"], commands
    for command in adversarial + by_stage["tables"] + by_stage["heatmaps"]:
        assert '"epsilon": 0.05' in command and '"epsilon": 0.01' not in command, command
    assert all('"high_jsd"' not in c and '"small_change"' not in c for c in by_stage["audit"]), by_stage["audit"]
    assert '"high_jsd": 0.3' in by_stage["tables"][0]
    # nor are the heatmaps' options the tables' (changing n_per_model reran J&W's tables and the combined ones), nor
    # the tables' thresholds the heatmaps' or the correlation audit's (Table 2's significance level)
    assert '"n_per_model"' in by_stage["heatmaps"][0] and '"n_per_model"' not in by_stage["tables"][0], commands
    assert all('"high_jsd"' not in c for c in by_stage["heatmaps"]), by_stage["heatmaps"]
    assert by_stage["correlation"] and all('"significance"' not in c for c in by_stage["correlation"]), commands
    assert '"significance": 0.01' in by_stage["tables"][0]


def test_each_wp_job_gets_only_the_option_it_reads(tmp_path):
    """W&P's thresholds of a table or figure are not options of the seed-variance audit: changing spread_k or the
    bins reruns that table or figure only."""
    cfg = yaml.safe_load((REPO / "tests" / "config.yaml").read_text())
    commands = shell_commands(tmp_path, cfg, "wiegreffe-pinter")
    options = {
        stage: next(c for c in commands if f"wiegreffe-pinter {stage} " in c).split("--options ")[1].split(" --")[0]
        for stage in ("uniform", "seed-variance", "seed-figures")
    }
    assert "spread_k" in options["uniform"] and "min_seeds" in options["seed-variance"], options
    assert "attention_bins" in options["seed-figures"], options
    assert not any(key in options["seed-variance"] for key in ("spread_k", "attention_bins")), options
    # an imitating model's card summary reads no cards option: the base model's thresholds do not rerun it
    summaries = [c for c in shell_commands(tmp_path, cfg, "cards summary") if "--stage wiegreffe_pinter " in c]
    imitating = [c for c in summaries if "-adv" in c.split("--model ")[1].split()[0]]
    assert imitating and all("--options '{}'" in c for c in imitating), summaries
    assert any('"seed_spread"' in c for c in summaries if c not in imitating), summaries


def test_cards_apply_the_thresholds_of_the_papers_tables(tmp_path):
    """A card's check left at null uses the threshold its paper's table uses on that dataset (a dataset's J&W
    override included), so card and table cannot reach opposite verdicts by a second setting; one set wins."""
    cfg = yaml.safe_load((REPO / "tests" / "config.yaml").read_text())
    cfg["datasets"]["planted"]["jain_wallace"] = {"permutation": {"small_change": 0.1}}
    cfg["wiegreffe_pinter"]["uniform"] = {"spread_k": 3.0}
    cfg["cards"]["eps_max_jsd"] = 0.4
    summaries = shell_commands(tmp_path, cfg, "cards summary")
    jw = [c for c in summaries if "--stage jain_wallace " in c]
    wp = [c for c in summaries if "--stage wiegreffe_pinter " in c]
    planted = [c for c in jw if "--dataset planted " in c]
    sst = [c for c in jw if "--dataset sst_small " in c]
    assert planted and sst and wp, summaries
    assert all('"delta_median": 0.1' in c for c in planted), planted
    base = [c for c in wp if "--options '{}'" not in c]  # an imitating model's summary reads no option
    assert base and all('"seed_spread": 3.0' in c for c in base), wp
    assert all('"delta_median": 0.05' in c for c in sst), sst  # the override is planted's alone
    assert all('"eps_max_jsd": 0.4' in c for c in jw)  # set in cards: the card's own
    # each stage's summaries carry only the options it reads (a threshold reruns only its stage)
    assert not any("delta_median" in c or "eps_max_jsd" in c for c in summaries if c not in jw)
    assert not any("seed_spread" in c for c in summaries if c not in wp)


def test_a_training_field_is_a_parameter_of_the_models_that_read_it(tmp_path):
    """``train.average_hidden`` is read by the average encoder alone: it is not in the BiLSTM's train job, so
    setting it retrains the average models only (it used to retrain every model); ``attention_weight_decay``
    likewise retrains the models whose attention has parameters."""
    cfg = {
        "datasets": {"planted": {"corpus": "planted", "grid": {"encoders": ["lstm", "average"]}}},
        "train": {"average_hidden": 64, "decoder_hidden": 16},
    }
    train = shell_commands(tmp_path, cfg, "train")
    average = [c for c in train if "--out-dir results/models/planted/average-" in c]
    lstm = [c for c in train if "--out-dir results/models/planted/lstm-" in c]
    assert average and lstm, train
    assert all('"average_hidden": 64' in c for c in average) and not any("average_hidden" in c for c in lstm)
    assert not any("decoder_hidden" in c for c in train)  # the QA decoder's width: no classifier reads it
    # the attention's weight decay: read where attention has parameters, not by uniform attention
    cfg = {**_sheet({"lstm-uniform": {"attention": "uniform"}}), "train": {"attention_weight_decay": 0}}
    train = shell_commands(tmp_path / "decay", cfg, "train")
    uniform = [c for c in train if "-uniform-" in c.split("--out-dir ")[1].split()[0]]
    additive = [c for c in train if "-additive-" in c.split("--out-dir ")[1].split()[0]]
    assert uniform and additive, train
    assert all('"attention_weight_decay": 0' in c for c in additive), additive
    assert not any("attention_weight_decay" in c for c in uniform), uniform


def test_every_train_job_names_its_attention_support(tmp_path):
    """``attend_to_markers`` is a parameter of every train job even where the config leaves it out, so a study
    trained when attention weighed <s>, </s> retrains; a variant can turn it on."""
    cfg = _sheet({"lstm-markers": {"attend_to_markers": True}})
    train = shell_commands(tmp_path, cfg, "train")
    markers = [c for c in train if "--out-dir results/models/planted/lstm-markers-" in c]
    others = [c for c in train if c not in markers]
    assert markers and others, train
    assert all('"attend_to_markers": true' in c for c in markers)
    assert all('"attend_to_markers": false' in c for c in others)


def test_unknown_corpus_lists_valid_names(tmp_path):
    proc = dry_run(tmp_path, {"datasets": {"mine": {"corpus": "sst2"}}})
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "sst2" in out and all(name in out for name in ("sst", "imdb", "20news", "agnews", "adr", "planted"))


@pytest.mark.parametrize(
    "flags,expected",
    [
        (
            ["--set-resources", "jw_adversarail:mem_mb=100"],
            "set-resources: ['jw_adversarail'] name none of this workflow's rules",
        ),
        (["--set-threads", "trian=2"], "set-threads: ['trian'] name none of this workflow's rules"),
    ],
)
def test_a_misspelt_rule_in_the_resources_is_named(tmp_path, flags, expected):
    """Snakemake ignores a set-resources/set-threads entry that names no rule: on a cluster that job would get the
    default memory and time and be killed hours later."""
    proc = dry_run(tmp_path, BASE, *flags)
    assert proc.returncode != 0 and expected in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-2000:]


@pytest.mark.parametrize(
    "flags,expected",
    [
        ([], "default-resources: slurm_partition is '<your-partition>', the placeholder"),
        (
            ["--default-resources", "slurm_partition=gpu", "slurm_account=<your-account>"],
            "default-resources: slurm_account is '<your-account>', the placeholder",
        ),
        (
            ["--default-resources", "slurm_partition=gpu", "slurm_account=lab"]
            + ["--set-resources", "train:slurm_partition=<your-partition>"],
            "set-resources.train: slurm_partition is '<your-partition>', the placeholder",
        ),
        (["--default-resources", "slurm_partition=gpu", "slurm_account=lab"], None),
    ],
)
def test_the_slurm_profiles_placeholders_stop_the_dry_run(tmp_path, flags, expected):
    """profiles/slurm ships a partition and an account to fill in; left as they are, every job would fail at
    sbatch. The planning run names the key and where to find the value; real values plan the run."""
    proc = dry_run(tmp_path, BASE, "--profile", str(REPO / "profiles" / "slurm"), *flags)
    said = proc.stdout + proc.stderr
    if expected is None:
        assert proc.returncode == 0 and "placeholder" not in said, said[-2000:]
    else:
        hint = "`sinfo -s` lists" if "partition" in expected else "`sacctmgr -n -s list user $USER"
        assert proc.returncode != 0 and expected in said and hint in said, said[-2000:]


def planned_rules(stdout: str) -> set[str]:
    """The rules of the jobs a dry run plans."""
    return set(re.findall(r"^(?:local)?rule (\w+):", stdout, re.MULTILINE))


def test_the_quick_study_is_the_default_study_with_fewer_models(tmp_path):
    """``configs/sst_quick.yaml`` (README, *A shorter study*) runs every stage of ``config.yaml`` on a subset of its
    models, each with the default's fields and every other option the default's, so a model's numbers are the ones
    the default study gives for it."""
    default = yaml.safe_load((REPO / "config.yaml").read_text())
    quick = yaml.safe_load((REPO / "configs" / "sst_quick.yaml").read_text())

    def without(d: dict, *keys: str) -> dict:
        return {k: v for k, v in d.items() if k not in keys}

    assert without(quick, "datasets", "saliency") == without(default, "datasets", "saliency")
    assert without(quick["saliency"], "models") == without(default["saliency"], "models")
    assert set(quick["saliency"]["models"]) < set(default["saliency"]["models"])
    assert quick["datasets"].keys() == default["datasets"].keys()
    for name, entry in quick["datasets"].items():
        assert without(entry, "grid", "models") == without(default["datasets"][name], "grid", "models")
        fewer, every = sheet(name, entry), sheet(name, default["datasets"][name])
        assert fewer.keys() < every.keys()
        assert fewer == {model: every[model] for model in fewer}
    rules = {}
    for label, cfg in (("default", default), ("quick", quick)):
        (tmp_path / label).mkdir()
        proc = dry_run(tmp_path / label, cfg)
        assert proc.returncode == 0, proc.stderr[-3000:]
        rules[label] = planned_rules(proc.stdout)
    assert rules["quick"] == rules["default"]
