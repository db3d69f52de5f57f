"""Config errors a user can act on: a JSON-schema violation as the config key, what was found and what was expected.

Snakemake's own message for a failed ``validate`` prints the whole sub-schema (thousands of lines for an unknown
top-level key); :func:`schema_error_message` says the same in one line. :func:`check_section` validates one part of
the config against its part of the schema, for overrides the schema cannot type without filling in defaults (a
dataset's ``jain_wallace`` block)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from jsonschema import Draft202012Validator, ValidationError
from jsonschema.exceptions import best_match

from attnaudit import AttnauditError

_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_MAX_MESSAGE = 300


def key_path(path, root: str = "") -> str:
    """``('datasets', 'sst', 'train', 'lr')`` → ``datasets.sst.train.lr`` (list positions as ``[i]``)."""
    key = root
    for part in path:
        key += f"[{part}]" if isinstance(part, int) else f"{'.' if key else ''}{part}"
    return key


def schema_error_message(error: ValidationError, root: str = "") -> str:
    """One line: ``config <key>: <what is wrong>; <what is allowed>``."""
    where = key_path(error.absolute_path, root) or "(top level)"
    message = error.message
    if len(message) > _MAX_MESSAGE:
        message = f"{message[:_MAX_MESSAGE]}…"
    hints = []
    if error.validator == "additionalProperties" and error.schema.get("properties"):
        hints.append(f"allowed keys: {', '.join(sorted(error.schema['properties']))}")
    if error.validator == "type" and isinstance(error.instance, str) and _NUMBER.match(error.instance.strip()):
        mantissa, _, exponent = error.instance.strip().lower().partition("e")
        if exponent:  # YAML 1.1 (PyYAML): a float has a point and a signed exponent (1.0e-3; 1e-3 is text)
            point = mantissa if "." in mantissa else f"{mantissa}.0"
            sign = "" if exponent[0] in "+-" else "+"
            hints.append(f"YAML reads {error.instance} as text: write {point}e{sign}{exponent}")
        else:
            hints.append("write the number without quotes")
    if error.schema.get("description") and error.validator != "additionalProperties":
        hints.append(f"expected: {error.schema['description']}")
    return f"config {where}: {message}" + "".join(f"; {hint}" for hint in hints)


def section_schema(schema_file: str | Path, keys: tuple[str, ...]) -> dict:
    """The schema of ``config[keys[0]][keys[1]]…`` (through ``properties``), with the schema's definitions."""
    schema = yaml.safe_load(Path(schema_file).read_text())
    part = schema
    for key in keys:
        part = part["properties"][key]
    return {"$schema": schema["$schema"], "definitions": schema.get("definitions", {}), **part}


def check_section(data, schema_file: str | Path, keys: tuple[str, ...], where: str) -> None:
    """Stop if ``data`` does not satisfy the schema of config ``keys``; the message names ``where`` (its key)."""
    errors = list(Draft202012Validator(section_schema(schema_file, keys)).iter_errors(data))
    if errors:
        raise AttnauditError(schema_error_message(best_match(errors), root=where))
