"""Config errors a user can act on: a JSON-schema violation as the config key, what was found and what was expected.

Snakemake's own message for a failed ``validate`` prints the whole sub-schema (thousands of lines for an unknown
top-level key); :func:`schema_error_message` says the same in one line. :func:`check_section` validates one part of
the config against its part of the schema, for overrides the schema cannot type without filling in defaults (a
dataset's ``jain_wallace`` block). :func:`check_config` is the schema check with integers that are integers (JSON
Schema lets ``1.0`` pass for one: a seed or an epoch count written so would stop a job much later, inside a library),
and then fills in the schema's defaults, naming the file and line the offending key is written at
(:class:`ConfigSources`); :func:`check_config_files` stops on a YAML syntax error with its file, line
and column (Snakemake's own message names neither) and on a key given twice in one mapping of a config file, which
YAML would otherwise settle silently by keeping the last. :func:`read_command_line_values` reads the numbers,
booleans and nulls nested in ``--config``, which Snakemake hands over as text, as what they are."""

from __future__ import annotations

import ast
import contextlib
import copy
import json
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path

import yaml
from jsonschema import Draft202012Validator, ValidationError, validators
from jsonschema.exceptions import best_match

from attnaudit import AttnauditError, ConfigKeyError, key_path

_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_MAX_MESSAGE = 300

#: Draft 2020-12, but ``1.0`` is a number and not an integer (nor is ``true``)
StrictValidator = validators.extend(
    Draft202012Validator,
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _checker, value: isinstance(value, int) and not isinstance(value, bool)
    ),
)


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


#: LibYAML's parser where PyYAML was built with it: the schema (32 kB) takes it 0.02 s against PyYAML's 0.13 s, in
#: every Snakemake process (each dry run, each cluster job's)
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@cache
def load_schema(schema_file: str | Path) -> dict:
    """The config schema, read once per process (every dataset's overrides are checked against a part of it)."""
    return yaml.load(Path(schema_file).read_text(encoding="utf-8"), Loader=_SAFE_LOADER)


def section_schema(schema_file: str | Path, keys: tuple[str, ...]) -> dict:
    """The schema of ``config[keys[0]][keys[1]]…`` (through ``properties``), with the schema's definitions."""
    schema = load_schema(schema_file)
    part = schema
    for key in keys:
        part = part["properties"][key]
    return {"$schema": schema["$schema"], "definitions": schema.get("definitions", {}), **part}


def check_section(
    data, schema_file: str | Path, keys: tuple[str, ...], at: tuple, sources: ConfigSources | None = None
) -> None:
    """Stop if ``data`` does not satisfy the schema of config ``keys``; the message names the key ``data`` is at
    (``at``), and with the config's ``sources`` the file and line it is written at."""
    errors = list(StrictValidator(section_schema(schema_file, keys)).iter_errors(data))
    if errors:
        raise _schema_error(errors, data, at, sources)


def _text_leaves(given, path=()):
    """``(path, text)`` of every string inside the mappings and lists of ``given``."""
    if isinstance(given, Mapping):
        for key, value in given.items():
            yield from _text_leaves(value, (*path, key))
    elif isinstance(given, list):
        for index, value in enumerate(given):
            yield from _text_leaves(value, (*path, index))
    elif isinstance(given, str):
        yield path, given


def _type_errors(errors):
    """Every ``type`` error, those inside ``anyOf``/``oneOf`` alternatives too."""
    for error in errors:
        if error.validator == "type":
            yield error
        yield from _type_errors(error.context or ())


def _accepts_text(schema_type) -> bool:
    return schema_type == "string" or (isinstance(schema_type, list) and "string" in schema_type)


def read_command_line_values(config: dict, given: Mapping, schema_file: str | Path) -> None:
    """Read the numbers, booleans and nulls of ``--config`` (``given``, as Snakemake parsed it) as what they are.

    Snakemake reads a value nested in ``--config`` — its documented form, ``--config "train={'epochs': 4}"`` — with
    YAML's base loader, so every leaf arrives as text: ``'4'``, ``'None'``, ``'true'``, and the schema check would
    stop on ``'4'`` where the number 4 was meant. Each such text in ``config`` that is a number, boolean or null
    written as a Python literal (Snakemake's "Python dict format": 4, 1e-3, True, None) or as YAML (true, null, as
    in ``config.yaml``) becomes that value, and stays text where the schema asks for text (a language ``no``, a
    name ``2020``); what still does not fit is left to the schema check, which names it. The same ``--config``
    gives the same config in every process (a cluster job's Snakemake receives it again), so planning and jobs
    agree."""
    read_again = {}
    for path, text in _text_leaves(given):
        try:
            parent = config
            for part in path[:-1]:
                parent = parent[part]
            if parent[path[-1]] != text:
                continue
        except (LookupError, TypeError):
            continue
        for read in (ast.literal_eval, yaml.safe_load):
            try:
                value = read(text)
            except (ValueError, SyntaxError, MemoryError, RecursionError, yaml.YAMLError):
                continue
            if value is None or isinstance(value, (bool, int, float)):  # a scalar; not a date, list or mapping
                parent[path[-1]] = value
                read_again[path] = (parent, text)
                break
    if not read_again:  # no --config text was read: the schema check that follows is the only one needed
        return
    for error in _type_errors(StrictValidator(load_schema(schema_file)).iter_errors(config)):
        key = tuple(error.absolute_path)
        if key in read_again and _accepts_text(error.validator_value):
            parent, text = read_again.pop(key)
            parent[key[-1]] = text


def _filling_defaults(validator_class):
    """``validator_class`` that, validating an object, first sets each of its properties the schema gives a default
    and the object lacks (python-jsonschema's FAQ recipe, the one ``snakemake.utils.validate`` applies); a default is
    copied, so the config never shares an object with the cached schema, and a list where the schema allows an
    object or a list (a dataset's ``grid``) is left alone."""
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if validator.is_type(instance, "object"):
            for name, subschema in properties.items():
                if "default" in subschema:
                    instance.setdefault(name, copy.deepcopy(subschema["default"]))
        yield from validate_properties(validator, properties, instance, schema)

    return validators.extend(validator_class, {"properties": set_defaults})


#: the strict check that fills in the defaults as it goes
DefaultFillingValidator = _filling_defaults(StrictValidator)


def check_config(config: dict, schema_file: str | Path, sources: ConfigSources | None = None) -> None:
    """Fill in the schema's defaults, in place, as Snakemake's ``validate(config, schema)`` does, and stop on the first
    (most relevant) violation of the whole config's schema, integers checked strictly; in one pass over the schema
    this process has read already (Snakemake's would open and parse the file again, in every Snakemake process).
    With the config's ``sources``, the message starts with the file and line the offending key is written at."""
    errors = list(DefaultFillingValidator(load_schema(schema_file)).iter_errors(config))
    if errors:
        raise _schema_error(errors, config, sources=sources)


def _schema_error(errors, data, at: tuple = (), sources: ConfigSources | None = None) -> AttnauditError:
    """The most relevant of ``errors`` of ``data`` (the config at key ``at``) in one line, starting with where its key
    is written when the config's ``sources`` are given."""
    error = best_match(errors)
    message = schema_error_message(error, root=key_path(at))
    return AttnauditError(sources.located(offending_key(error, data, at), message) if sources else message)


def offending_key(error: ValidationError, data, root: tuple = ()) -> tuple:
    """The config key a schema error is about (``root`` + the path inside ``data``): its ``absolute_path``, or for an
    unknown key (``additionalProperties``) or a key's name that breaks a pattern (``propertyNames``), that key,
    which jsonschema reports by its parent's path."""
    path = tuple(error.absolute_path)
    parent = data
    for part in path:
        try:
            parent = parent[part]
        except (LookupError, TypeError):
            return (*root, *path)
    if isinstance(parent, Mapping):
        if error.validator == "additionalProperties":
            named = error.schema.get("properties", {})
            patterns = error.schema.get("patternProperties", {})
            extra = [k for k in parent if k not in named and not any(re.search(p, str(k)) for p in patterns)]
            return (*root, *path, *extra[:1])
        if isinstance(error.instance, str) and error.instance in parent:
            return (*root, *path, error.instance)  # propertyNames: the instance is the key itself
    return (*root, *path)


class ConfigSources:
    """Where each config key is written, to name its file and line in an error: the config files in the order
    Snakemake merges them (``configfile: config.yaml`` unless replaced, then each ``--configfile``), and the values
    of ``--config``, which override them all. A key is looked up in the last source that sets it; a value reached
    through a YAML merge key (``<<: *anchor``) is named where the anchored block writes it."""

    def __init__(self, files, command_line: Mapping | None = None):
        self.files = [Path(f) for f in files]
        self.command_line = command_line or {}
        self._documents: dict[Path, yaml.Node | None] = {}

    def _document(self, path: Path) -> yaml.Node | None:
        """The file's YAML node tree (an empty file: an empty mapping), read on first use; None if YAML cannot read
        it."""
        if path not in self._documents:
            try:
                with path.open(encoding="utf-8") as stream:
                    node = yaml.compose(stream, Loader=yaml.SafeLoader)
                self._documents[path] = node or yaml.MappingNode("tag:yaml.org,2002:map", [])
            except (OSError, UnicodeDecodeError, yaml.YAMLError):
                self._documents[path] = None
        return self._documents[path]

    def where(self, key: tuple) -> str | None:
        """``file:line`` of ``key`` (a path of mapping keys and list positions) or ``--config``; where no source
        writes the key itself (a field a model leaves to its default), the nearest key above it that one writes (the
        model's entry); None if no source writes any, or if a file that could write it has no lines to name (a JSON
        file YAML cannot read: a file before it would be named for a value the JSON file replaced)."""
        for depth in range(len(key), 0, -1):
            if _lookup(self.command_line, key[:depth]):
                return "--config"
            for path in reversed(self.files):
                document = self._document(path)
                if document is None:
                    return None
                node = _node_at(document, key[:depth])
                if node is not None:
                    return f"{path}:{node.start_mark.line + 1}"
        return None

    def located(self, key: tuple, message: str) -> str:
        """``message`` prefixed with where ``key`` is written, when a source writes it."""
        where = self.where(key)
        return f"{where}: {message}" if where else message

    def locate(self, err: ConfigKeyError) -> AttnauditError:
        """``err`` with the file and line its key is written at."""
        return AttnauditError(self.located(err.key, str(err)))


def _lookup(data, key: tuple) -> bool:
    for part in key:
        if isinstance(data, Mapping) and part in data or isinstance(data, list) and isinstance(part, int):
            try:
                data = data[part]
            except IndexError:
                return False
        else:
            return False
    return True


def _node_at(node, key: tuple):
    """The node of ``key`` in a composed YAML document: for a mapping entry its key's node (the line a user looks
    for), for a list item the item's; explicit keys first, then the blocks merged in with ``<<``."""
    named = None
    for part in key:
        found = _child(node, part)
        if found is None:
            return None
        node, named = found
    return named


def _child(node, part):
    """``(value node, node to name)`` of ``part`` in ``node``, or None."""
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int):
        return (node.value[part], node.value[part]) if 0 <= part < len(node.value) else None
    if not isinstance(node, yaml.MappingNode):
        return None
    merged = []
    for key_node, value_node in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            merged += value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
        elif isinstance(key_node, yaml.ScalarNode) and key_node.value == str(part):
            return value_node, key_node
    for block in merged:
        found = _child(block, part)
        if found is not None:
            return found
    return None


class _UniqueKeyLoader(yaml.SafeLoader):
    """A YAML loader that stops on a mapping key given twice (PyYAML keeps the last one without a word)."""

    def construct_mapping(self, node, deep=False):
        first_line = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if key in first_line:
                raise AttnauditError(
                    f"{self.name}:{line}: key {key!r} is given twice in one mapping (first at line "
                    f"{first_line[key]}); YAML would keep only the second and drop the first without a word: merge "
                    "the two into one"
                )
            first_line[key] = line
        return super().construct_mapping(node, deep=deep)


def _syntax_error(path: Path, err: yaml.YAMLError) -> str:
    """A YAML syntax error as ``file:line:column: what`` with what was open (a bracket, a quote) and where."""
    mark = getattr(err, "problem_mark", None)
    if mark is None:
        return f"{path}: not valid YAML: {err}"
    message = f"{path}:{mark.line + 1}:{mark.column + 1}: not valid YAML: {err.problem}"
    context_mark = getattr(err, "context_mark", None)
    if err.context and context_mark is not None:
        message += f" ({err.context} opened at line {context_mark.line + 1})"
    lines = path.read_text(encoding="utf-8").splitlines()
    if mark.line < len(lines) and "\t" in lines[mark.line]:
        message += "; YAML indents and separates with spaces, never tabs"
    elif err.problem == "mapping values are not allowed here":
        message += "; a key indented unlike the keys beside it, or ': ' inside a value that needs quotes"
    return message


@contextlib.contextmanager
def config_errors_end_the_run():
    """Inside, an error meant for the user (:class:`AttnauditError`: a config key or file, with its line) ends
    Snakemake with its message alone and exit status 1, where Snakemake would head it "AttnauditError in file
    rules/common.smk, line N:" and follow it with the workflow's traceback; any other exception keeps Snakemake's."""
    try:
        yield
    except AttnauditError as err:
        raise SystemExit(str(err)) from None


def check_config_files(paths) -> None:
    """Stop on a config file YAML cannot parse, naming the file, line and column (Snakemake says only that some
    config file is not valid JSON or YAML), or that gives a key twice in one mapping (two ``datasets.mine`` blocks,
    a model-sheet variant pasted twice): the first one's settings would be dropped silently. A file that is not
    UTF-8 (Snakemake's reading) stops with the line of its first undecodable byte. A missing or unreadable file is
    left to Snakemake, and so is a JSON file (JSON allows tabs, YAML does not)."""
    for path in map(Path, paths):
        try:
            with path.open(encoding="utf-8") as stream:  # the loader names the stream's file in its message
                yaml.load(stream, Loader=_UniqueKeyLoader)
        except OSError:
            continue
        except UnicodeDecodeError:
            data = path.read_bytes()
            try:
                data.decode("utf-8")  # the loader's error counts from the start of its last chunk: decode the whole
            except UnicodeDecodeError as err:
                line = data[: err.start].count(b"\n") + 1
                raise AttnauditError(
                    f"{path}:{line}: not UTF-8 (byte {data[err.start]:#04x}, e.g. an accent saved as latin-1); "
                    "save the file as UTF-8"
                ) from None
        except yaml.YAMLError as err:
            try:
                json.loads(path.read_text(encoding="utf-8"))
            except ValueError:
                raise AttnauditError(_syntax_error(path, err)) from None
