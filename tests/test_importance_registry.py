"""Contract of the whole importance registry: every registered method, on a small model of every
encoder × attention, returns a finite [B, T] tensor that is zero on padding, is deterministic on repeat, does not
depend on the other instances of the batch, and never touches parameter gradients."""

import inspect
import subprocess
import sys

import pytest
import torch
import yaml
from conftest import ENCODERS, REPO, tiny_batch, tiny_model

from attnaudit.importance import METHODS, ImportanceMethod, UnsupportedArchitecture, get_method
from attnaudit.importance.options import declared_defaults, declared_memory_options, declared_options

# J&W's grid, and every architecture the other papers add (W&P: mlp, uniform, guided; T&Š: concat, residual, layers)
VARIANTS = [(e, a, {}) for e in ENCODERS for a in ("additive", "dot")] + [
    ("mlp", "additive", {}),
    ("mlp", "uniform", {}),
    ("mlp", "guided", {}),
    ("lstm", "uniform", {}),
    ("lstm", "additive", {"hidden_mode": "concat"}),
    ("lstm", "additive", {"hidden_mode": "residual", "lstm_hidden": 4}),
    ("lstm", "dot", {"lstm_layers": 2}),
]
IDS = [f"{e}-{a}-{'-'.join(f'{k}{v}' for k, v in f.items())}" for e, a, f in VARIANTS]
EXPECTED = {
    "attention",
    "gradient",
    "loo",
    "saliency_l2",
    "grad_x_input",
    "integrated_gradients",
    "occlusion",
    "omission",
    "lrp",
    "random",
}


def test_registry_has_the_audited_methods():
    assert set(METHODS) >= EXPECTED
    for name, cls in METHODS.items():
        assert issubclass(cls, ImportanceMethod) and cls.name == name
        assert isinstance(cls.signed, bool) and cls.citation, f"{name} needs `signed` and a citation"


def test_options_read_from_source_are_the_constructors():
    """The DAG's option check (read with ast, without torch) sees what the registry's constructors take."""
    constructors = {name: inspect.signature(cls).parameters for name, cls in METHODS.items()}
    assert declared_options() == {name: tuple(params) for name, params in constructors.items()}
    defaults = {
        name: {key: param.default for key, param in params.items() if param.default is not param.empty}
        for name, params in constructors.items()
    }
    assert declared_defaults() == defaults  # the DAG leaves out an option that restates its default
    assert declared_memory_options() == {name: cls.memory_options for name, cls in METHODS.items()}
    assert any(declared_memory_options().values())  # the reading finds the classes' own tuples
    schema = yaml.safe_load((REPO / "schemas" / "config.schema.yaml").read_text())["properties"]["importance"]
    for name, memory in declared_memory_options().items():  # constructor options with a default, and config keys
        assert set(memory) <= set(defaults[name]), (name, memory)
        assert set(memory) <= set(schema["properties"].get(name, {}).get("properties", {})), (name, memory)


def test_the_dag_checks_import_neither_torch_nor_sklearn():
    """What rules/common.smk imports at every Snakemake parse stays light (each import costs ~3 s per dry run and
    twice per cluster job)."""
    modules = [
        line.split()[1]
        for line in (REPO / "rules" / "common.smk").read_text().splitlines()
        if line.startswith("from attnaudit")
    ]
    probe = f"import sys; import {', '.join(modules)}; print(sorted({{'torch', 'sklearn'}} & set(sys.modules)))"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout == "[]\n"


@pytest.mark.parametrize("encoder,attention,fields", VARIANTS, ids=IDS)
@pytest.mark.parametrize("name", sorted(METHODS))
def test_method_contract(name, encoder, attention, fields):
    model = tiny_model(encoder, attention, seed=1, **fields)
    guided = attention == "guided"
    batch = tiny_batch(lengths=(5, 9, 3, 7), seed=2, guide=guided)
    method = get_method(name)
    try:
        scores = method.attribute(model, batch)
    except UnsupportedArchitecture as err:  # said by name, never a wrong number
        assert name in str(err) and name == "lrp", err
        return
    assert scores.shape == batch.tokens.shape
    assert torch.all(scores[~batch.mask] == 0), "padding must score exactly 0"
    assert torch.isfinite(scores[batch.mask]).all()
    again = get_method(name).attribute(model, batch)
    torch.testing.assert_close(scores, again, rtol=0, atol=0)
    assert all(p.grad is None for p in model.parameters())

    # an instance's scores do not depend on its batch companions or the padded width
    alone = tiny_batch(lengths=(7,), seed=2, guide=guided)
    alone.tokens[0], alone.ids[0] = batch.tokens[3, :7], batch.ids[3]
    if guided:
        alone.guide[0] = batch.guide[3, :7]
    torch.testing.assert_close(get_method(name).attribute(model, alone)[0], scores[3, :7], rtol=1e-4, atol=1e-5)


MEMORY_BOUND = sorted(name for name, cls in METHODS.items() if cls.memory_options)


@pytest.mark.parametrize("encoder,attention,fields", VARIANTS, ids=IDS)
@pytest.mark.parametrize("name", MEMORY_BOUND)
def test_memory_options_change_no_score(name, encoder, attention, fields):
    """A method's ``memory_options`` at their smallest (one row or one position per pass) give its default scores
    up to float rounding: the pipeline passes them as resources, so changing one reruns nothing."""
    model = tiny_model(encoder, attention, seed=1, **fields)
    batch = tiny_batch(lengths=(5, 9, 3, 7), seed=2, guide=attention == "guided")
    try:
        default = get_method(name).attribute(model, batch)
    except UnsupportedArchitecture:
        return
    smallest = get_method(name, **dict.fromkeys(METHODS[name].memory_options, 1)).attribute(model, batch)
    torch.testing.assert_close(smallest, default, rtol=1e-4, atol=1e-6, equal_nan=True)


def test_methods_run_on_marker_only_instances():
    """A document reduced to <s> </s> (no words) must not crash any method."""
    model = tiny_model("lstm", "additive")
    batch = tiny_batch(lengths=(2, 6), seed=3)
    for name in sorted(METHODS):
        scores = get_method(name).attribute(model, batch)
        assert scores.shape == batch.tokens.shape and torch.isfinite(scores[batch.mask]).all(), name
