"""The importance methods' names and constructor options, read from the method modules' source with :mod:`ast`
instead of importing them: the DAG checks the config's ``importance:`` block at every Snakemake parse (every dry
run, and twice in every cluster job), and importing the registry would import torch (~3 s) each time.
``tests/test_importance_registry.py`` checks that this reading equals the registry's constructors."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from attnaudit import AttnauditError

PACKAGE = Path(__file__).parent


def _class_facts(node: ast.ClassDef) -> dict:
    """A class's base names, its ``name = "..."`` attribute, its ``__init__`` keyword arguments (None without an
    own ``__init__``) and whether ``@register`` decorates it."""
    name = None
    params = None
    for stmt in node.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant):
            if any(isinstance(target, ast.Name) and target.id == "name" for target in stmt.targets):
                name = stmt.value.value
        elif isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
            params = tuple(arg.arg for arg in [*stmt.args.posonlyargs, *stmt.args.args, *stmt.args.kwonlyargs][1:])
    return {
        "bases": [base.id for base in node.bases if isinstance(base, ast.Name)],
        "name": name,
        "params": params,
        "registered": any(isinstance(d, ast.Name) and d.id == "register" for d in node.decorator_list),
    }


@cache
def declared_options() -> dict[str, tuple[str, ...]]:
    """``{method name: constructor keyword arguments}`` of every ``@register``-ed class in this package; a class
    without its own ``__init__`` takes its first base's."""
    classes = {}
    for path in sorted(PACKAGE.glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8"), filename=str(path)).body:
            if isinstance(node, ast.ClassDef):
                classes[node.name] = _class_facts(node)

    def params_of(class_name: str) -> tuple[str, ...]:
        facts = classes.get(class_name)
        if facts is None:
            return ()
        if facts["params"] is not None:
            return facts["params"]
        return next((params_of(base) for base in facts["bases"] if base in classes), ())

    return {facts["name"]: params_of(cls) for cls, facts in classes.items() if facts["registered"]}


def check_options(name: str, options: dict, where: str = "importance") -> None:
    """The method exists and takes these options (its constructor's keyword arguments); a typo names the key."""
    methods = declared_options()
    if name not in methods:
        raise AttnauditError(f"{where}: unknown importance method {name!r}; registered: {', '.join(sorted(methods))}")
    accepted = methods[name]
    unknown = [key for key in options if key not in accepted]
    if unknown:
        raise AttnauditError(
            f"{where}.{name}.{unknown[0]}: not an option of {name}; it takes {', '.join(accepted) or 'none'}"
        )
