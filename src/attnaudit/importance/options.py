"""The importance methods' names and constructor options, read from the method modules' source with :mod:`ast`
instead of importing them: the DAG checks the config's ``importance:`` block at every Snakemake parse (every dry
run, and twice in every cluster job), and importing the registry would import torch (~3 s) each time.
``tests/test_importance_registry.py`` checks that this reading equals the registry's constructors."""

from __future__ import annotations

import ast
import contextlib
from functools import cache
from pathlib import Path

from attnaudit import ConfigKeyError

PACKAGE = Path(__file__).parent


def _defaults(args: ast.arguments) -> dict:
    """``{argument: default}`` of the arguments whose default is a literal."""
    positional = [*args.posonlyargs, *args.args]
    pairs = [
        *zip(positional[len(positional) - len(args.defaults) :], args.defaults),
        *zip(args.kwonlyargs, args.kw_defaults),
    ]
    defaults = {}
    for arg, default in pairs:
        with contextlib.suppress(ValueError, TypeError):  # no default, or not a literal
            defaults[arg.arg] = ast.literal_eval(default)
    return defaults


def _class_facts(node: ast.ClassDef) -> dict:
    """A class's base names, its ``name = "..."`` attribute, its ``memory_options = (...)`` (None without an own
    one), its ``__init__`` keyword arguments and their literal defaults (None without an own ``__init__``) and
    whether ``@register`` decorates it."""
    name = memory = None
    params = defaults = None
    for stmt in node.body:
        if isinstance(stmt, ast.Assign):
            targets = {target.id for target in stmt.targets if isinstance(target, ast.Name)}
            if "name" in targets and isinstance(stmt.value, ast.Constant):
                name = stmt.value.value
            if "memory_options" in targets:
                memory = tuple(ast.literal_eval(stmt.value))
        elif isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
            params = tuple(arg.arg for arg in [*stmt.args.posonlyargs, *stmt.args.args, *stmt.args.kwonlyargs][1:])
            defaults = _defaults(stmt.args)
    return {
        "bases": [base.id for base in node.bases if isinstance(base, ast.Name)],
        "name": name,
        "memory": memory,
        "params": params,
        "defaults": defaults,
        "registered": any(isinstance(d, ast.Name) and d.id == "register" for d in node.decorator_list),
    }


@cache
def _constructors() -> dict[str, dict]:
    """``{method name: {"params": constructor keyword arguments, "defaults": their literal defaults, "memory": its
    memory_options}}`` of every ``@register``-ed class in this package; a class without its own ``__init__`` (or
    ``memory_options``) takes its first base's."""
    classes = {}
    for path in sorted(PACKAGE.glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8"), filename=str(path)).body:
            if isinstance(node, ast.ClassDef):
                classes[node.name] = _class_facts(node)

    def inherited(class_name: str, fact: str, default):
        """The class's own ``fact``, else its first base's in this package, else ``default``."""
        facts = classes.get(class_name)
        if facts is None:
            return default
        if facts[fact] is not None:
            return facts[fact]
        bases = [base for base in facts["bases"] if base in classes]
        return inherited(bases[0], fact, default) if bases else default

    return {
        facts["name"]: {
            "params": inherited(cls, "params", ()),
            "defaults": inherited(cls, "defaults", {}),
            "memory": inherited(cls, "memory", ()),
        }
        for cls, facts in classes.items()
        if facts["registered"]
    }


def declared_options() -> dict[str, tuple[str, ...]]:
    """``{method name: constructor keyword arguments}`` of every registered method."""
    return {name: constructor["params"] for name, constructor in _constructors().items()}


def declared_defaults() -> dict[str, dict]:
    """``{method name: {keyword argument: its default}}`` of every registered method (literal defaults only)."""
    return {name: constructor["defaults"] for name, constructor in _constructors().items()}


def declared_memory_options() -> dict[str, tuple[str, ...]]:
    """``{method name: its memory_options}`` (:class:`~attnaudit.importance.registry.ImportanceMethod`): the options
    that bound memory or the work per pass and change no score beyond float rounding."""
    return {name: constructor["memory"] for name, constructor in _constructors().items()}


def check_options(name: str, options: dict, at: tuple = ("importance",)) -> None:
    """The method exists and takes these options (its constructor's keyword arguments); a typo names the config
    key: ``at`` (the key that names the method) or ``importance.<name>.<option>``."""
    methods = declared_options()
    if name not in methods:
        raise ConfigKeyError(at, f"unknown importance method {name!r}; registered: {', '.join(sorted(methods))}")
    accepted = methods[name]
    unknown = [key for key in options if key not in accepted]
    if unknown:
        raise ConfigKeyError(
            ("importance", name, unknown[0]), f"not an option of {name}; it takes {', '.join(accepted) or 'none'}"
        )
