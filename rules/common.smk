# Helpers for the rules: config validation, the model sheet, target lists, per-branch parameters. Every helper is a
# named function here; the stage files only wire rules.
import contextlib
import fnmatch
import functools
import json
import os
import re
import shlex
import sys
import threading
from pathlib import Path

from attnaudit import AttnauditError, ConfigKeyError
from attnaudit.cards.summary import stage_options
from attnaudit.config_errors import (
    ConfigSources,
    check_config,
    check_config_files,
    check_section,
    load_schema,
    read_command_line_values,
)
from attnaudit.corpora.build import resolved_options
from attnaudit.corpora.fetch import mirror_path
from attnaudit.corpora.readers import content_sha256, without_restated_options
from attnaudit.corpora.registry import get_spec
from attnaudit.embeddings.vectors import DEFAULTS as VECTOR_DEFAULTS
from attnaudit.embeddings.pretrained import check_pretrained
from attnaudit.explorer.plan import expand_plan
from attnaudit.io import sha256_file, without_defaults
from attnaudit.importance.options import check_options, declared_defaults, declared_memory_options
from attnaudit.jain_wallace.options import validity_epsilon
from attnaudit.modelsheet import (
    ENCODER_FIELDS,
    EXPLICIT_DEFAULTS,
    LEARNED_ATTENTION_FIELDS,
    MODEL_WILDCARD,
    fields_read,
    final_epoch_sources,
    sheet,
    without_restated_defaults,
)
from attnaudit.tokenise.tokenisation import DEFAULTS as TOKENISE_DEFAULTS, check_user_dataset, make_tokenizer
from attnaudit.wiegreffe_pinter.options import resolve as resolve_wp_options

SCHEMA_FILE = Path(workflow.basedir) / "schemas" / "config.schema.yaml"


def validated_config():
    """The config files (the command line's too) checked for a key given twice, the numbers, booleans and nulls
    nested in ``--config`` (Snakemake passes them on as text) read as such, then the config against the schema
    (integers strictly, so ``seed: 1.0`` stops here) with its defaults filled in; an error names the file and line
    (of a syntax error, or of the key it is about: CONFIG_SOURCES), the key and what was expected, without the
    schema dump Snakemake's message carries."""
    check_config_files(workflow.configfiles)
    read_command_line_values(config, workflow.config_settings.config, SCHEMA_FILE)
    check_config(config, SCHEMA_FILE, CONFIG_SOURCES)


def config_sources():
    """The config's sources in Snakemake's merge order: ``config.yaml`` (the Snakefile's ``configfile:``, unless the
    command line's config replaces it), each ``--configfile``, then ``--config``."""
    settings = workflow.config_settings
    given = list(settings.configfiles)
    workflow_files = [f for f in workflow.configfiles if f not in given]
    replaced = settings.replace_workflow_config and settings.overwrite_config
    return ConfigSources([*([] if replaced else workflow_files), *given], settings.config)


CONFIG_SOURCES = config_sources()
validated_config()


@contextlib.contextmanager
def keys_located(root=()):
    """A :class:`ConfigKeyError` raised inside (by the model sheet's checks, ...) names the file and line its key is
    written at; a key relative to a block (``tokenise.language``) is taken under ``root`` (``datasets.<name>``)."""
    try:
        yield
    except ConfigKeyError as err:
        raise config_error((*root, *err.key), err.problem) from None


def config_error(key, message):
    """An error in config ``key`` (a tuple of keys and list positions; dotted where no part has a dot, as names of
    datasets, corpora and stages) as ``file:line: config <key>: message``, with where the key is written."""
    return CONFIG_SOURCES.locate(ConfigKeyError(tuple(key.split(".")) if isinstance(key, str) else key, message))


def workdir_path(path):
    """A file the config names, as the workflow names it: ``~`` expanded, and relative to the working directory when
    inside it, so that ``data.csv``, ``./data.csv`` and its absolute path are one input and one parameter."""
    full = os.path.abspath(os.path.expanduser(path))
    relative = os.path.relpath(full)
    return full if relative == os.pardir or relative.startswith(os.pardir + os.sep) else relative


USER_CORPORA = {
    name: {**entry, "path": workdir_path(entry["path"])} if "path" in entry else entry
    for name, entry in config["corpora"].get("user", {}).items()
}


def dataset_corpus(dataset, entry):
    """The corpus spec ``datasets.<dataset>.corpus`` names; an unknown name stops the dry run naming the key (a
    faulty ``corpora.user`` entry names its own key)."""
    try:
        with keys_located():
            return get_spec(entry["corpus"], USER_CORPORA)
    except AttnauditError as err:
        if entry["corpus"] in USER_CORPORA:
            raise
        raise config_error(
            f"datasets.{dataset}.corpus", f"{err} (or a corpus of your own, declared under corpora.user)"
        ) from None


def needs_user_data(dataset, entry):
    """A dataset whose corpus is read from a folder the user supplies (MIMIC-III) and whose path is not given."""
    path = config["corpora"].get("options", {}).get(entry["corpus"], {}).get("path")
    return dataset_corpus(dataset, entry).user_data and not path


# MIMIC datasets run only when corpora.options.<corpus>.path names the user's MIMIC-III folder
SKIPPED_DATASETS = [name for name, entry in config["datasets"].items() if needs_user_data(name, entry)]
if SKIPPED_DATASETS:
    print(
        f"attnaudit: skipping datasets {SKIPPED_DATASETS}: their corpus needs corpora.options.<corpus>.path "
        "(a MIMIC-III folder; credentialed access, never downloaded)",
        file=sys.stderr,
    )
DATASETS = {name: entry for name, entry in config["datasets"].items() if name not in SKIPPED_DATASETS}


def warn_unread_user_corpora():
    """A ``corpora.user`` entry no dataset names is neither read nor checked: say so, since a dataset pointed at
    the wrong entry would otherwise go unnoticed."""
    unread = sorted(set(USER_CORPORA) - {entry["corpus"] for entry in config["datasets"].values()})
    if unread:
        print(
            f"attnaudit: warning: config corpora.user: {unread} named by no dataset (datasets.<name>.corpus), "
            "so not read nor checked",
            file=sys.stderr,
        )


warn_unread_user_corpora()
AUDITS = config["audits"]
IMPORTANCE = config["importance"]
# the model sheet of every dataset, expanded and checked (unknown teachers, cycles, sizes) before any job runs
with keys_located():
    SHEETS = {dataset: sheet(dataset, entry) for dataset, entry in DATASETS.items()}


def check_importance_methods():
    """Every importance method the config names (``importance.<method>``, ``saliency.methods``, J&W's correlation
    methods) is registered and takes its options; an error names where the method is named."""
    named = [(("importance", method), method) for method in IMPORTANCE]
    named += [(("saliency", "methods", i), m) for i, m in enumerate(config["saliency"]["methods"])]
    correlated = config["jain_wallace"]["correlation"]["methods"]
    named += [(("jain_wallace", "correlation", "methods", i), m) for i, m in enumerate(correlated)]
    for at, method in named:
        with keys_located():
            check_options(method, IMPORTANCE.get(method, {}), at)


check_importance_methods()

# corpora.mirror goes to the corpus stage as --mirror; without it ("") the stage falls back to env ATTNAUDIT_MIRROR
# (read by the package, so CI and clusters can point at a mirror without editing config), then the official URLs.
# Either one, if set, must be a directory (checked now, before any job).
mirror_path(config["corpora"].get("mirror"))
MIRROR = str(Path(config["corpora"]["mirror"]).resolve()) if config["corpora"].get("mirror") else ""


wildcard_constraints:
    dataset="|".join(DATASETS),
    corpus="[A-Za-z0-9_]+",
    model=MODEL_WILDCARD,
    method="[a-z0-9_]+",
    chunk=r"\d+",
    n_chunks=r"\d+",


def as_json(obj):
    return json.dumps(obj, sort_keys=True)


def dataset_subset(key, names):
    """The datasets a stage audits: ``names`` from config key ``key`` (all datasets if null), each checked; a
    dataset skipped for want of its corpus's folder (MIMIC) is left out."""
    if names is None:
        return list(DATASETS)
    unknown = [n for n in names if n not in config["datasets"]]
    if unknown:
        raise config_error(key, f"{unknown} not under datasets: (expected some of {list(config['datasets'])})")
    return [n for n in names if n in DATASETS]


def warn_unselected(key, patterns, seeds, datasets):
    """A stage's model selection: a glob pattern (over variant names) or a seed that selects no model of the stage's
    datasets is likely a typo, which would leave those models out of its tables and cards without a word. Said on
    stderr (a pattern may be meant for a dataset this run leaves out); :func:`check_stage_selects` stops a
    selection that selects nothing at all."""
    fields = [variant(d, m) for d in datasets for m in model_ids(d)]
    variants = {f["variant"] for f in fields}
    unmatched = [p for p in patterns or [] if not fnmatch.filter(variants, p)]
    unmatched += [f"seed {seed}" for seed in seeds or [] if seed not in {f["seed"] for f in fields}]
    if datasets and unmatched:
        print(f"attnaudit: warning: config {key}: {unmatched} select no model of {datasets}", file=sys.stderr)


def check_stage_selects(stage, selection, datasets, models_of):
    """Every dataset a stage is asked to run on has models for it: else its tables would be empty. Named by the
    selection's key when one is given (``saliency.seeds: [7]``), else by the stage's."""
    empty = [d for d in datasets if not models_of(d)]
    if empty:
        variants = sorted({variant(d, m)["variant"] for d in empty for m in model_ids(d)})
        found = (
            "no model with learned attention trained to classify (attention additive or dot, objective classify) "
            f"on {empty} (variants: {variants})"
        )
        given = {key: value for key, value in selection.items() if value is not None}
        if len(given) == 1:
            [(key, value)] = given.items()
            raise config_error((stage, key), f"{value} select {found}")
        chosen = " and ".join(f"{key} {value}" for key, value in given.items())
        raise config_error((stage,), f"{chosen} select {found}" if chosen else f"selects {found}")


# -- data ---------------------------------------------------------------------------------------------------------
def corpus_of(dataset):
    return DATASETS[dataset]["corpus"]


def corpus_spec(corpus):
    """Registry entry (name, URLs, checksums, J&W defaults) of a built-in or user corpus."""
    return get_spec(corpus, USER_CORPORA)


def corpus_options(corpus):
    return config["corpora"].get("options", {}).get(corpus, {})


def check_corpus_options():
    """corpora.options: every name a corpus, every key one of its options (a typo would plan the whole study and
    fail in its first job)."""
    for name, options in config["corpora"].get("options", {}).items():
        with keys_located():
            try:
                spec = corpus_spec(name)
            except ConfigKeyError:  # a faulty corpora.user entry: its own key
                raise
            except AttnauditError as err:  # no such corpus
                raise ConfigKeyError(("corpora", "options", name), str(err)) from None
            resolved_options(spec, options)


check_corpus_options()


def is_qa(dataset):
    """A QA/NLI dataset (J&W §3): query-conditioned attention and a non-linear decoder (attnaudit.models.qa)."""
    return corpus_spec(corpus_of(dataset)).query


def check_qa_sheets():
    """A QA/NLI model is trained with the classification loss alone (regulariser base, objective classify): the
    train job would stop on anything else, after the corpus, tokenising and embeddings have run."""
    for dataset in filter(is_qa, DATASETS):
        for model, fields in SHEETS[dataset].items():
            if fields["regulariser"] != "base" or fields["objective"] != "classify":
                raise config_error(
                    ("datasets", dataset, "models", fields["variant"]),
                    f"model {model} has regulariser {fields['regulariser']!r} and objective {fields['objective']!r}; "
                    f"{dataset} is a QA/NLI dataset, whose models support regulariser base and objective classify only",
                )


def reject_qa(key, datasets, reason):
    """A stage that does not apply to QA/NLI datasets names them before any job (they would fail after training)."""
    qa = [d for d in datasets if is_qa(d)]
    if qa:
        raise config_error(key, f"{qa} are QA/NLI datasets; {reason}. Leave them out of {key}")


check_qa_sheets()


def tokenise_options(dataset):
    """The corpus registry's J&W defaults, overridden by datasets.<name>.tokenise, whose options that restate
    their default (``lowercase: true``, ``language: en``) are left out: writing them out reruns nothing."""
    defaults = corpus_spec(corpus_of(dataset)).defaults
    keys = ("min_count", "max_tokens", "dev_fraction", "test_fraction", "test_sample")
    registry = {k: defaults[k] for k in keys if k in defaults}
    given = without_defaults(DATASETS[dataset].get("tokenise", {}), {**TOKENISE_DEFAULTS, **registry})
    return {**registry, **given}


def pretrained_vectors(dataset):
    """datasets.<name>.embeddings.pretrained (:func:`workdir_path`); None when the embeddings are trained."""
    path = DATASETS[dataset].get("embeddings", {}).get("pretrained")
    return workdir_path(path) if path else None


# the embeddings options a job's parameters carry as the config writes them (the shipped configs write them out)
EMBEDDING_OPTIONS_AS_WRITTEN = ("method", "dim", "sg", "epochs")


def embedding_options(dataset):
    """The embeddings options, those that restate their default left out (``window: 5``, ``pretrained: null``)
    but :data:`EMBEDDING_OPTIONS_AS_WRITTEN`; a pretrained vectors file is named with its sha256, so replacing the
    file reruns what depends on it."""
    given = DATASETS[dataset].get("embeddings", {})
    options = without_defaults(given, VECTOR_DEFAULTS, kept=EMBEDDING_OPTIONS_AS_WRITTEN)
    path = pretrained_vectors(dataset)
    return {**options, "pretrained": path, "pretrained_sha256": file_sha256(path)} if path else options


def pretrained_vectors_file(wildcards):
    """A pretrained vectors file is an input of the embeddings job; its sha256 is a parameter (:func:`ancient`: the
    content decides, not the modification time, which Snakemake alone goes by for a file over 1 MB)."""
    path = pretrained_vectors(wildcards.dataset)
    return [ancient(path)] if path else []


def user_corpus_file(wildcards):
    """A user corpus's own file is an input of its corpus job and its sha256 a parameter: an edited CSV reruns
    exactly what depends on it, and a copy or ``touch`` of the same content nothing (:func:`ancient`: Snakemake
    records no checksum of a file over 1 MB, and would go by its modification time)."""
    entry = USER_CORPORA.get(wildcards.corpus)
    return [ancient(entry["path"])] if entry else []


def user_corpus_entry(corpus):
    """``{corpus: corpora.user.<corpus>}`` for a user corpus (its checksum included, so an edit that keeps the
    modification time still reruns it; keys that restate a default left out, so writing them reruns nothing), else
    ``{}``: one corpus's entry never reruns another corpus."""
    if corpus not in USER_CORPORA:
        return {}
    entry = USER_CORPORA[corpus]
    return {corpus: {**without_restated_options(entry), "sha256": corpus_sha256(entry["path"])}}


@functools.cache
def file_sha256(path):
    """A vectors file's sha256 (a parameter of its embeddings job), hashed once per Snakemake when the DAG first
    needs it; a file no dataset uses is never read."""
    return sha256_file(path)


@functools.cache
def corpus_sha256(path):
    """The sha256 of what a user corpus's file holds (decompressed: the same CSV compressed again reruns nothing), a
    parameter of its corpus job; hashed as :func:`file_sha256` is."""
    return content_sha256(Path(path))


def check_datasets():
    """Before any job runs, each dataset's inputs and tokenise options:
    - a split fraction is not given for a corpus that has that split of its own (SST's dev, AG News's test), which
      would ignore it;
    - its tokenise.language is a language spaCy has a tokenizer of, and that tokenizer's own package (Japanese,
      Thai, jieba, ...) is installed;
    - a user corpus is read, split and checked for two classes (the counts name the problem);
    - pretrained vectors exist and are vectors of embeddings.dim (binary if it says so).
    Once, by the Snakemake that plans the run: a cluster job, which parses the workflow again, would pay for reading
    the whole corpus (seconds, and memory beyond a small job's request for a large corpus)."""
    if workflow.remote_exec or workflow.subprocess_exec:
        return
    for dataset in DATASETS:
        corpus = corpus_of(dataset)
        registry = corpus_spec(corpus).defaults  # a fraction of None: the corpus has that split of its own
        for key, split in (("dev_fraction", "dev"), ("test_fraction", "test")):
            given = DATASETS[dataset].get("tokenise", {}).get(key)
            if given is not None and key in registry and registry[key] is None:
                raise config_error(
                    f"datasets.{dataset}.tokenise.{key}",
                    f"corpus {corpus} has a {split} split of its own, which the papers use, so {key} would not be "
                    f"read; it applies to a corpus without a {split} split: leave it out",
                )
        options = {**TOKENISE_DEFAULTS, **tokenise_options(dataset)}
        if (options["language"], options["segmenter"]) != ("en", "char"):
            with keys_located(("datasets", dataset)):
                make_tokenizer(options["language"], options["segmenter"])
        if corpus in USER_CORPORA:
            with keys_located():
                check_user_dataset(dataset, corpus, USER_CORPORA[corpus], tokenise_options(dataset), config["seed"])
        vectors = pretrained_vectors(dataset)
        if vectors:
            options = {**VECTOR_DEFAULTS, **DATASETS[dataset].get("embeddings", {})}
            with keys_located(("datasets", dataset)):
                check_pretrained(vectors, options["dim"], options["binary"])


check_datasets()


def dataset_files(dataset):
    """What a model-level job reads of its dataset."""
    return {
        "examples": f"results/datasets/{dataset}/examples.parquet",
        "vocab": f"results/datasets/{dataset}/vocab.json",
    }


# -- the model sheet ----------------------------------------------------------------------------------------------
def model_ids(dataset):
    """Every model of a dataset: J&W's grid, then the model sheet's variants, one model per seed."""
    return list(SHEETS[dataset])


def variant(dataset, model):
    """The sheet fields of one model (variant, seed, encoder, attention, regulariser, teachers, ...)."""
    return SHEETS[dataset][model]


def train_spec(dataset, model):
    """Hyper-parameters of one branch, most specific last: train < train_per_encoder.<encoder>
    < datasets.<name>.train < datasets.<name>.train_per_encoder.<encoder> < the model's sheet fields."""
    fields = variant(dataset, model)
    encoder = fields["encoder"]
    defaults = corpus_spec(corpus_of(dataset)).defaults
    spec = {
        "class_weighting": defaults.get("class_weighting", False),
        **EXPLICIT_DEFAULTS,
        **config.get("train", {}),
        **config.get("train_per_encoder", {}).get(encoder, {}),
        **DATASETS[dataset].get("train", {}),
        **DATASETS[dataset].get("train_per_encoder", {}).get(encoder, {}),
        **fields,
    }
    # a field the model does not read, or one that restates its default, is not its job's parameter
    return without_restated_defaults(fields_read(spec, qa=is_qa(dataset)))


def model_dir(dataset, model):
    return f"results/models/{dataset}/{model}"


# one training run, two selection rules: {dataset: {last-epoch model: the best-epoch model whose run it reads off}}
FINAL_EPOCH_SOURCES = {
    dataset: final_epoch_sources({model: train_spec(dataset, model) for model in model_ids(dataset)})
    for dataset in DATASETS
}


def models_read_off_a_run():
    """``selection: last`` models read off another model's run (attnaudit.modelsheet.final_epoch_sources). A rule's
    wildcard constraint cannot tell datasets apart, so an id that is read off a run in one dataset but must be
    trained in another is trained in both."""
    derived = {model for sources in FINAL_EPOCH_SOURCES.values() for model in sources}
    return {
        model
        for model in derived
        if all(model in FINAL_EPOCH_SOURCES[dataset] for dataset in DATASETS if model in SHEETS[dataset])
    }


def runs_with_final_epoch():
    """The models whose training job also saves its final epoch, for the models read off their run."""
    derived = models_read_off_a_run()
    return {run for sources in FINAL_EPOCH_SOURCES.values() for model, run in sources.items() if model in derived}


def alternatives(names):
    """A wildcard constraint that matches exactly ``names`` (none: a pattern that matches nothing)."""
    return "|".join(re.escape(name) for name in sorted(names)) or "(?!)"


def final_epoch_of_run(wildcards):
    run = FINAL_EPOCH_SOURCES[wildcards.dataset][wildcards.model]
    return f"{model_dir(wildcards.dataset, run)}/final_epoch.pt"


def final_epoch_arg(wildcards, output):
    return f"--final-epoch {shlex.quote(output.final_epoch)}" if "final_epoch" in output.keys() else ""


def teacher_predictions(wildcards):
    """A guided or imitating model trains on its teacher's outputs: they are inputs, so retraining the teacher
    reruns the student (and nothing else)."""
    fields = variant(wildcards.dataset, wildcards.model)
    return {
        role: f"{model_dir(wildcards.dataset, fields[role])}/predictions.parquet"
        for role in ("guide", "teacher")
        if fields.get(role)
    }


def teacher_args(wildcards, input):
    return " ".join(
        f"--{role}-predictions {shlex.quote(str(input[role]))}" for role in ("guide", "teacher") if role in input.keys()
    )


def learned_attention(dataset, model):
    """Models whose attention the J&W and B&F audits question: learned (additive/dot), trained to classify.
    Frozen (uniform), guided and imitating models are the other papers' instruments, audited by those stages."""
    fields = variant(dataset, model)
    return fields["attention"] in ("additive", "dot") and fields["objective"] == "classify"


def audited_models(dataset):
    return [m for m in model_ids(dataset) if learned_attention(dataset, m)]


def models_matching(dataset, patterns):
    """The dataset's models whose variant matches one of the glob ``patterns`` (e.g. ``lstm150-*``)."""
    return [m for m in model_ids(dataset) if any(fnmatch.fnmatch(variant(dataset, m)["variant"], p) for p in patterns)]


def all_targets():
    targets = [f"results/datasets/{d}/stats.json" for d in DATASETS]
    targets += [f"results/embeddings/{d}/coverage.json" for d in DATASETS]
    targets += [f"{model_dir(d, m)}/metrics.json" for d in DATASETS for m in model_ids(d)]
    return targets


# -- tables: one set per dataset, combined on top ------------------------------------------------------------
# paper → {"category": its report category, "files": {file name: datasets}}; filled by combined_tables() calls in
# each rules/<stage>.smk and turned into one combining rule per paper by rules/tables.smk
COMBINED_TABLES = {}


def combined_tables(paper, category, files):
    """Declare that ``paper``'s stage writes ``results/tables/<paper>/<dataset>/<file>`` for each file's datasets.
    Per-dataset tables are what a run keeps (a run on other datasets never erases them); the table over this
    run's datasets, ``results/tables/<paper>/<file>``, is combined from them for the report and the README."""
    COMBINED_TABLES[paper] = {"category": category, "files": {name: ds for name, ds in files.items() if ds}}


def combined_table_targets(paper):
    return [f"results/tables/{paper}/{name}" for name in COMBINED_TABLES.get(paper, {}).get("files", {})]


# -- audits (shared by every audit stage) ---------------------------------------------------------------------
dataset_subset("audits.chunks_per_dataset", list(AUDITS["chunks_per_dataset"]))  # misspelt names stop


def audit_chunks(dataset):
    """Instance chunks for one dataset's audits: audits.chunks_per_dataset.<name>, else audits.chunks."""
    return AUDITS["chunks_per_dataset"].get(dataset, AUDITS["chunks"])


def chunk_paths(pattern, dataset, **wildcards):
    """Expand a per-chunk path pattern containing {chunk} and {n_chunks} for one dataset."""
    n = audit_chunks(dataset)
    return [pattern.format(dataset=dataset, chunk=i, n_chunks=n, **wildcards) for i in range(n)]


def gathered_chunks(pattern):
    """Input function of a gather rule: the chunk files of ``pattern`` for the job's wildcards."""

    def chunks(wildcards):
        return chunk_paths(pattern, wildcards.dataset, **{k: v for k, v in wildcards.items() if k != "dataset"})

    return chunks


def importance_path(dataset, model, method):
    return f"results/importance/{dataset}/{model}/{method}.parquet"


def importance_options(method):
    """config importance.<method>: what the method computes, its job's parameters. Left out: an option that
    restates its constructor's default and that the schema does not fill in (writing it out reruns nothing), and
    the method's memory options (``importance_memory_options``)."""
    schema = load_schema(SCHEMA_FILE)["properties"]["importance"]["properties"].get(method, {})
    filled = [key for key, option in schema.get("properties", {}).items() if "default" in option]
    options = without_defaults(IMPORTANCE.get(method, {}), declared_defaults()[method], kept=filled)
    return {key: value for key, value in options.items() if key not in importance_memory_options(method)}


def importance_memory_options(method):
    """The options of config importance.<method> that bound memory or the work per pass and change no score beyond
    float rounding (the method's ``memory_options``: LOO's re-encoding budget, IG's rows per pass): its job's
    resources, which Snakemake does not track, so changing one reruns nothing."""
    memory = declared_memory_options()[method]
    return {key: value for key, value in IMPORTANCE.get(method, {}).items() if key in memory}


# -- Jain & Wallace ----------------------------------------------------------------------------------------------
def jw_audit_path(dataset, model, audit):
    return f"results/audits/{dataset}/{model}/{audit}.parquet"


def jw_dataset_options(dataset):
    """The jain_wallace options overridden by datasets.<name>.jain_wallace (J&W §4.2.2: ε = 0.05 for QA/NLI)."""
    overrides = DATASETS[dataset].get("jain_wallace", {})
    return {section: {**options, **overrides.get(section, {})} for section, options in JW.items()}


def check_jw_overrides(dataset):
    """A dataset's jain_wallace overrides, merged, satisfy the schema of the jain_wallace block (keys, ranges)."""
    for section in DATASETS[dataset].get("jain_wallace", {}):
        at = ("datasets", dataset, "jain_wallace", section)
        check_section(jw_dataset_options(dataset)[section], SCHEMA_FILE, ("jain_wallace", section), at, CONFIG_SOURCES)


# keys only the tables read (thresholds): changing them reruns the tables, not the audits
JW_TABLE_ONLY = {"correlation": {"significance"}, "permutation": {"small_change"}, "adversarial": {"high_jsd"}}


def jw_options(dataset, audit):
    """The options one J&W audit job reads, as its --options JSON."""
    options = jw_dataset_options(dataset)[audit]
    return as_json({audit: {k: v for k, v in options.items() if k not in JW_TABLE_ONLY.get(audit, ())}})


#: the jain_wallace sections J&W's tables read (not heatmaps: a heatmap option reruns the heatmaps alone)
JW_TABLE_SECTIONS = ("correlation", "permutation", "adversarial")


def jw_table_options(dataset):
    """The options J&W's tables job of ``dataset`` reads, as its --options JSON."""
    return as_json({section: jw_dataset_options(dataset)[section] for section in JW_TABLE_SECTIONS})


def jw_heatmap_options(dataset):
    """The options J&W's heatmaps job of ``dataset`` reads (its own and the ε within which the adversaries it shows
    are valid), as its --options JSON."""
    options = jw_dataset_options(dataset)
    return as_json(
        {"heatmaps": options["heatmaps"], "adversarial": {"epsilon": validity_epsilon(options["adversarial"])}}
    )


def jw_figure_models(dataset):
    """The figures show J&W's own models: learned attention, no regulariser (seeds and selection rules too)."""
    return [m for m in audited_models(dataset) if variant(dataset, m)["regulariser"] == "base"]


def jw_runs(dataset):
    """Every audited model of ``dataset`` with its sheet fields, the paths of its three gathered audits and the
    corpus manifest (class names) — one dataset's tables."""
    runs = []
    for model in audited_models(dataset):
        spec = train_spec(dataset, model)
        run = {"dataset": dataset, "model": model, "corpus": corpus_of(dataset), "manifest": manifest_path(dataset)}
        run.update({k: spec[k] for k in ("encoder", "attention", "regulariser")})
        run.update({"seed": spec["seed"], "selection": spec.get("selection", "best"), "variant": spec["variant"]})
        run.update({audit.removeprefix("jw_"): jw_audit_path(dataset, model, audit) for audit in JW_AUDITS})
        run["metrics"] = f"{model_dir(dataset, model)}/metrics.json"
        run["epsilon"] = validity_epsilon(jw_dataset_options(dataset)["adversarial"])
        run.update({"qa": True} if is_qa(dataset) else {})  # only then: a classifier's tables keep their params
        runs.append(run)
    return runs


def jw_run_files(wildcards):
    """What one dataset's J&W tables read: the gathered audits and metrics of its models, the corpus manifest."""
    runs = jw_runs(wildcards.dataset)
    audits = [run[a.removeprefix("jw_")] for run in runs for a in JW_AUDITS]
    return [manifest_path(wildcards.dataset), *audits, *[run["metrics"] for run in runs]]


def jw_table_datasets():
    return [d for d in DATASETS if audited_models(d)]


def jain_wallace_targets():
    return (
        combined_table_targets("jain_wallace")
        + [f"results/figures/jain_wallace/{d}/{f}.png" for d in DATASETS for f in JW_FIGURES if jw_figure_models(d)]
        + [f"results/figures/jain_wallace/{d}/heatmaps/{m}.html" for d in DATASETS for m in audited_models(d)]
    )


# -- Bastings & Filippova ----------------------------------------------------------------------------------------
def saliency_models(dataset):
    """B&F's (costly) audit on the models with learned attention of saliency.seeds (null: every seed)."""
    seeds, patterns = config["saliency"]["seeds"], config["saliency"]["models"]
    chosen = audited_models(dataset) if patterns is None else models_matching(dataset, patterns)
    return [
        m for m in chosen if learned_attention(dataset, m) and (seeds is None or variant(dataset, m)["seed"] in seeds)
    ]


def saliency_importance(dataset, model):
    return [importance_path(dataset, model, method) for method in config["saliency"]["methods"]]


def saliency_runs(dataset):
    return [
        {
            "dataset": dataset,
            "model": m,
            "agreement": f"results/audits/{dataset}/{m}/saliency_agreement.parquet",
            "faithfulness": f"results/audits/{dataset}/{m}/saliency_faithfulness.parquet",
            "importance": saliency_importance(dataset, m),
        }
        for m in saliency_models(dataset)
    ]


def saliency_run_files(wildcards):
    runs = saliency_runs(wildcards.dataset)
    return [p for run in runs for p in (run["agreement"], run["faithfulness"], *run["importance"])]


def saliency_table_datasets():
    return [d for d in SAL_DATASETS if saliency_models(d)]


def saliency_targets():
    return combined_table_targets("bastings_filippova") + [
        f"results/figures/bastings_filippova/{d}/{m}/{f}.png"
        for d in SAL_DATASETS
        for m in saliency_models(d)
        for f in ("agreement", "faithfulness")
    ]


# -- Wiegreffe & Pinter ------------------------------------------------------------------------------------------
WP = config["wiegreffe_pinter"]
WP_DATASETS = dataset_subset("wiegreffe_pinter.datasets", WP["datasets"])
reject_qa("wiegreffe_pinter.datasets", WP_DATASETS, "W&P's adversaries imitate a classifier (objective imitate)")


def check_wp_options():
    """What the schema cannot say of the W&P options (Fig. 3's bin edges from 0 to 1), before any job."""
    with keys_located():
        resolve_wp_options({"uniform": WP["uniform"], "seeds": WP["seeds"]})


check_wp_options()


def wp_options(section, key):
    """The one W&P option a job reads: a table-only threshold reruns the table, not the audit before it."""
    return {section: {key: WP[section][key]}}


#: the attention each W&P role's models need (the uniform baseline is frozen uniform, the guided MLPs read a teacher)
WP_ROLE_ATTENTION = {
    "base": ("additive", "dot"),
    "uniform": ("uniform",),
    "diagnostic.uniform": ("uniform",),
    "diagnostic.trained": ("additive", "dot"),
    "diagnostic.base_lstm": ("guided",),
    "diagnostic.adversary": ("guided",),
}
#: W&P §3.4's diagnostic is non-contextual, "a token-level affine hidden layer": the token-wise encoders
WP_DIAGNOSTIC_ENCODERS = ("mlp", "average")


def wp_variant_models(dataset, name, role):
    """The models of variant ``name`` (the model playing ``role``); a missing variant, or one whose attention
    cannot play the role (the base model as its own uniform twin), stops the run."""
    models = [m for m in model_ids(dataset) if variant(dataset, m)["variant"] == name]
    if not models:
        raise config_error(
            f"wiegreffe_pinter.roles.{role}",
            f"dataset {dataset!r} has no variant {name!r} in its model sheet; "
            f"add it under datasets.{dataset}.models or drop {dataset} from wiegreffe_pinter.datasets",
        )
    attention = variant(dataset, models[0])["attention"]
    if attention not in WP_ROLE_ATTENTION[role]:
        raise config_error(
            f"wiegreffe_pinter.roles.{role}",
            f"{name!r} has attention {attention!r} on {dataset!r}; the {role} role "
            f"needs attention {' or '.join(WP_ROLE_ATTENTION[role])}",
        )
    encoder = variant(dataset, models[0])["encoder"]
    if role.startswith("diagnostic.") and encoder not in WP_DIAGNOSTIC_ENCODERS:
        raise config_error(
            f"wiegreffe_pinter.roles.{role}",
            f"{name!r} has encoder {encoder!r} on {dataset!r}; W&P's diagnostic model sees no neighbouring token "
            f"(§3.4, a token-level layer), so the {role} role needs encoder {' or '.join(WP_DIAGNOSTIC_ENCODERS)}",
        )
    return models


def shown_field(spec, key):
    """A training field's value for a message; – where the spec leaves it out (its default, or a field the model
    does not read)."""
    return repr(spec[key]) if key in spec else "–"


def field_differences(dataset, base, other, fields):
    """The training ``fields`` in which model ``other`` differs from ``base``, for a message ("key: base's against
    other's"); empty if none."""
    a, b = train_spec(dataset, base), train_spec(dataset, other)
    return ", ".join(
        f"{key}: {shown_field(a, key)} against {shown_field(b, key)}"
        for key in sorted(fields)
        if a.get(key) != b.get(key)
    )


def check_uniform_twin(dataset, base, twin):
    """W&P §3.2's uniform variant is "identical to the main setup except that the attention distribution is frozen
    to uniform weights": its training fields are the base model's, attention aside."""
    own = {"variant", "seed", "attention", *LEARNED_ATTENTION_FIELDS}
    fields = (train_spec(dataset, base).keys() | train_spec(dataset, twin).keys()) - own
    if differ := field_differences(dataset, base, twin, fields):
        raise config_error(
            "wiegreffe_pinter.roles.uniform",
            f"{variant(dataset, twin)['variant']!r} is not {variant(dataset, base)['variant']!r} with uniform "
            f"attention on {dataset!r} ({differ}); W&P §3.2's uniform variant is identical to the base model but "
            "for its attention",
        )


def check_same_architecture(dataset, base, adversary):
    """W&P §4's consistently adversarial model is "randomly initialised with the same architecture" as the base
    (their code: the same model class and sizes); only its training differs."""
    architecture = {"encoder", "attention", "regulariser", *ENCODER_FIELDS[variant(dataset, base)["encoder"]]}
    if differ := field_differences(dataset, base, adversary, architecture):
        raise config_error(
            "wiegreffe_pinter.roles.adversaries",
            f"{variant(dataset, adversary)['variant']!r} imitates {base} with another architecture on {dataset!r} "
            f"({differ}); W&P §4's adversary has the base model's architecture",
        )


def wp_roles(dataset):
    """Which models of ``dataset`` play W&P's parts: base, seeds, uniform, diagnostic MLPs, adversaries. Checked."""
    roles = WP["roles"]
    base_models = wp_variant_models(dataset, roles["base"], "base")
    base = next((m for m in base_models if variant(dataset, m)["seed"] == WP["base_seed"]), None)
    if base is None:
        raise config_error("wiegreffe_pinter.base_seed", f"{roles['base']} has no seed {WP['base_seed']} on {dataset}")
    seeds = [m for m in base_models if m != base]
    if len(seeds) < WP["seeds"]["min_seeds"]:
        raise config_error(
            "wiegreffe_pinter.seeds.min_seeds",
            f"the seed variance on {dataset!r} needs {WP['seeds']['min_seeds']} more seeds of "
            f"{roles['base']} besides seed {WP['base_seed']}, the model sheet has {len(seeds)} "
            f"({', '.join(seeds) or 'none'}): add seeds to the grid or the sheet entry of {roles['base']} on "
            f"{dataset!r}, or lower min_seeds",
        )
    uniform = wp_variant_models(dataset, roles["uniform"], "uniform")
    check_uniform_twin(dataset, base, uniform[0])
    diagnostic = {g: wp_variant_models(dataset, v, f"diagnostic.{g}") for g, v in roles["diagnostic"].items()}
    adversaries = [
        m for m in models_matching(dataset, roles["adversaries"]) if variant(dataset, m).get("teacher") == base
    ]
    for adversary in adversaries:
        check_same_architecture(dataset, base, adversary)
    if not adversaries:
        raise config_error(
            "wiegreffe_pinter.roles.adversaries",
            f"no model of {dataset!r} matching {roles['adversaries']} imitates {base} (objective: imitate, "
            f"teacher: {base})",
        )
    return {
        "base": base,
        "seeds": seeds,
        "uniform": uniform,
        "diagnostic": diagnostic,
        "adversaries": adversaries,
    }


def check_wp_roles():
    """Every W&P dataset's roles, before the DAG is built: a role the model sheet cannot fill would otherwise stop
    Snakemake inside an input function, its message under an InputFunctionException and a traceback."""
    for dataset in WP_DATASETS:
        wp_roles(dataset)


check_wp_roles()


def wp_metrics(dataset, model):
    return f"{model_dir(dataset, model)}/metrics.json"


def wp_uniform_runs(dataset):
    runs, roles = [], wp_roles(dataset)
    for role, models in (("base", [roles["base"], *roles["seeds"]]), ("uniform", roles["uniform"])):
        runs += [
            {"dataset": dataset, "corpus": corpus_of(dataset), "model": m, "role": role}
            | {"seed": variant(dataset, m)["seed"], "metrics": wp_metrics(dataset, m)}
            for m in sorted(models)
        ]
    return runs


def wp_diagnostic_runs(dataset):
    return [
        {"dataset": dataset, "corpus": corpus_of(dataset), "model": m, "guide": guide}
        | {"seed": variant(dataset, m)["seed"], "metrics": wp_metrics(dataset, m)}
        for guide, models in sorted(wp_roles(dataset)["diagnostic"].items())
        for m in sorted(models)
    ]


def wp_run_metrics(runs):
    """Input function: the metrics files of ``runs(dataset)``."""
    return lambda wildcards: [run["metrics"] for run in runs(wildcards.dataset)]


def wp_imitation_path(dataset, model):
    return f"results/audits/{dataset}/{model}/wp_imitation.json"


def imitates(dataset, model):
    """Whether the model is trained to imitate another (W&P §4, T&Š §4.3)."""
    return variant(dataset, model)["objective"] == "imitate"


def imitating_models(dataset):
    """Every model of the dataset trained to imitate another."""
    return [m for m in model_ids(dataset) if imitates(dataset, m)]


def wiegreffe_pinter_targets():
    if not WP_DATASETS:
        return []
    return combined_table_targets("wiegreffe_pinter") + [
        f"results/figures/wiegreffe_pinter/{d}/{f}.png"
        for d in WP_DATASETS
        for f in ("fig3_seed_variance", "fig3_seed_variance_scatter", "fig_adversary_jsd_tvd")
    ]


# -- Tutek & Šnajder ---------------------------------------------------------------------------------------------
TS = config["tutek_snajder"]
TS_DATASETS = dataset_subset("tutek_snajder.datasets", TS["datasets"])
reject_qa(
    "tutek_snajder.datasets",
    TS_DATASETS,
    "T&Š's regularisers and per-token probabilities (Eq. 9) need the classifier's linear decoder",
)


def ts_models(dataset):
    """The models T&Š's tables compare: learned attention, variant matching tutek_snajder.models."""
    return [m for m in models_matching(dataset, TS["models"]) if learned_attention(dataset, m)]


def ts_audit_path(dataset, model, part):
    return f"results/audits/{dataset}/{model}/ts_{part}"


def ts_has_mi(dataset, model):
    """T&Š Table 2: additive attention only, concat excluded (its hidden states are not in the embedding space)."""
    fields = variant(dataset, model)
    return fields["attention"] == "additive" and fields["regulariser"] != "concat"


def ts_runs(d):
    """One dataset's T&Š runs: sheet fields and the audit files the tables, figures and summary read."""
    runs = []
    for m in sorted(ts_models(d)):  # sorted: reordering the sheet changes no parameter
        spec = train_spec(d, m)
        run = {"dataset": d, "corpus": corpus_of(d), "model": m, "dataset_dir": f"results/datasets/{d}"}
        run |= {"regulariser": spec["regulariser"], "attention": spec["attention"], "seed": spec["seed"]}
        run |= {"layers": spec.get("lstm_layers", 1)}
        run |= {
            "fragility": ts_audit_path(d, m, "fragility.json"),
            "token_probability": ts_audit_path(d, m, "token_probability.parquet"),
            "mutual_information": ts_audit_path(d, m, "mutual_information.json") if ts_has_mi(d, m) else None,
            "jw_correlation": jw_audit_path(d, m, "jw_correlation"),
            "jw_adversarial": jw_audit_path(d, m, "jw_adversarial"),
            "saliency_faithfulness": (
                f"results/audits/{d}/{m}/saliency_faithfulness.parquet"
                if d in SAL_DATASETS and m in saliency_models(d)
                else None
            ),
        }
        runs.append(run)
    return runs


#: the audit files of a T&Š run (keys of ts_runs) that each T&Š table or figure reads, as inputs and in its runs
TS_RUN_FILES = {
    "ts_tables": ["fragility", "mutual_information", "token_probability"],
    "ts_figures": ["fragility", "token_probability"],
    "ts_summary": ["fragility", "mutual_information", "token_probability"]
    + ["jw_correlation", "jw_adversarial", "saliency_faithfulness"],
}


def ts_run_files(rule_name):
    """Input function: the audit files of one dataset's T&Š runs that ``rule_name`` reads."""
    keys = TS_RUN_FILES[rule_name]
    return lambda wildcards: [run[k] for run in ts_runs(wildcards.dataset) for k in keys if run.get(k)]


def ts_runs_param(rule_name):
    """Parameter: one dataset's T&Š runs as JSON, with only the audit files ``rule_name`` reads (and declares)."""
    unread = {k for keys in TS_RUN_FILES.values() for k in keys} - set(TS_RUN_FILES[rule_name])
    return lambda wildcards: as_json([{**run, **dict.fromkeys(unread)} for run in ts_runs(wildcards.dataset)])


def ts_imitations(wildcards):
    """Imitation results of the models that imitate one of T&Š's models (§4.3, Fig. 1)."""
    d = wildcards.dataset
    return [wp_imitation_path(d, m) for m in sorted(imitating_models(d)) if variant(d, m)["teacher"] in ts_models(d)]


def tutek_snajder_targets():
    return combined_table_targets("tutek_snajder") + [
        f"results/figures/tutek_snajder/{d}/{f}.png"
        for d in TS_DATASETS
        for f in ("fragility", "fig2_token_probability", "fig1_adversary")
    ]


# -- audit cards and the explorer ----------------------------------------------------------------------------------
CARDS = config["cards"]
EXPLORER = config["explorer"]
# stage → {"title", "models": dataset → models it summarises, "explorer": (dataset, model) → instance sources};
# filled by card_summary() calls in each rules/<stage>.smk, so a new stage joins the cards without editing them
CARD_SUMMARIES = {}


def card_summary(stage, title, models, explorer=None, not_run=None):
    """Declare that ``stage`` writes ``results/summaries/<stage>/{dataset}/{model}.json`` for ``models(dataset)``
    (and, optionally, per-instance sources for the explorer: ``explorer(dataset, model)`` → list of
    ``{path, overlays: {name: column}, values: {name: column}}``; ``not_run(dataset, model)``: why the stage leaves
    out a model, for its card)."""
    CARD_SUMMARIES[stage] = {"title": title, "models": models, "explorer": explorer, "not_run": not_run}


def summary_path(stage, dataset, model):
    return f"results/summaries/{stage}/{dataset}/{model}.json"


def card_options(dataset, stage):
    """The cards options ``stage``'s summary jobs on one dataset read (and no others, so a threshold reruns only the
    stage that reads it): the bootstrap seed defaults to the global seed; a check's threshold left null is the one
    the paper's own table uses on this dataset, so card and table apply one rule."""
    jw = jw_dataset_options(dataset)
    inherited = {
        "delta_median": jw["permutation"]["small_change"],
        "eps_max_jsd": jw["adversarial"]["high_jsd"],
        "seed_spread": WP["uniform"]["spread_k"],
        "fragility_f1": TS["tables"]["f1"],
    }
    options = {k: (inherited[k] if v is None and k in inherited else v) for k, v in CARDS.items() if k != "seed"}
    seed = CARDS["seed"] if CARDS["seed"] is not None else config["seed"]
    return stage_options(stage, {**options, "seed": seed, "split": AUDITS["split"]})


def card_summaries(dataset, model):
    """The summary files of the stages that ran on this model (declared inputs of its card)."""
    return {
        stage: summary_path(stage, dataset, model)
        for stage, spec in CARD_SUMMARIES.items()
        if model in spec["models"](dataset)
    }


def card_not_run(dataset, model):
    """The audits that leave this model out, each with why (named on its card)."""
    return {
        spec["title"]: (spec["not_run"] and spec["not_run"](dataset, model)) or "not configured for this model"
        for spec in CARD_SUMMARIES.values()
        if model not in spec["models"](dataset)
    }


def fixed_attention(dataset, model):
    """What a model's attention is when it is not a classifier's own learned attention (None when it is)."""
    fields = variant(dataset, model)
    if fields["objective"] == "imitate":
        return f"it is an adversary imitating {fields['teacher']} (its numbers are in its W&P section)"
    if fields["attention"] == "guided":
        return f"its attention is fixed, {fields['guide']}'s (a W&P §3.4 diagnostic)"
    if fields["attention"] == "uniform":
        return "its attention is fixed, uniform (a W&P §3.2 baseline)"
    return None


def jw_not_run(dataset, model):
    return f"J&W audit a classifier's learned attention; {fixed_attention(dataset, model)}"


def saliency_not_run(dataset, model):
    if dataset not in SAL_DATASETS:
        return f"saliency.datasets leaves out {dataset}"
    if reason := fixed_attention(dataset, model):
        return f"B&F compare saliency with a classifier's learned attention; {reason}"
    return "saliency.models and saliency.seeds leave it out (B&F's audit is the costliest)"


def wp_not_run(dataset, model):
    if dataset not in WP_DATASETS:
        return f"wiegreffe_pinter.datasets leaves out {dataset}"
    roles = wp_roles(dataset)
    base = roles["base"]
    if model in roles["seeds"]:
        return f"a seed of W&P's seed-variance baseline (§3.3); W&P's section is on {base}'s card"
    if model in roles["uniform"]:
        return f"the uniform-attention twin of {base} (W&P §3.2); W&P's section is on {base}'s card"
    if guides := [g for g, models in roles["diagnostic"].items() if model in models]:
        table = f"results/tables/wiegreffe_pinter/{dataset}/diagnostic_mlp.md"
        return f"W&P's diagnostic MLP with {guides[0]} attention (§3.4), in {table}"
    return "not one of W&P's roles (wiegreffe_pinter.roles)"


def ts_not_run(dataset, model):
    if dataset not in TS_DATASETS:
        return f"tutek_snajder.datasets leaves out {dataset}"
    fields = variant(dataset, model)
    if model not in models_matching(dataset, TS["models"]):
        return f"tutek_snajder.models ({', '.join(TS['models'])}) does not match {fields['variant']}"
    reason = f"T&Š audit a classifier's learned attention; {fixed_attention(dataset, model)}"
    if fields["objective"] == "imitate" and fields["teacher"] in ts_models(dataset):
        reason += f"; T&Š §4.3 plot it in results/figures/tutek_snajder/{dataset}/fig1_adversary.png"
    return reason


def card_path(dataset, model, ext):
    return f"results/cards/{dataset}/{model}.{ext}"


def manifest_path(dataset):
    return f"results/corpora/{corpus_of(dataset)}/manifest.json"


def explorer_plan():
    """The explorer rule's parameter: path templates per stage and, per model, the stages that summarise it (their
    per-instance files, where a stage has some, and their summaries, which a partial card reads when the card is
    missing: attnaudit.explorer.plan; full path lists would outgrow one shell argument on a large grid)."""
    templates = {s: spec["explorer"]("{dataset}", "{model}") for s, spec in CARD_SUMMARIES.items() if spec["explorer"]}
    templates["model"] = {
        "card": card_path("{dataset}", "{model}", "json"),
        "predictions": f"{model_dir('{dataset}', '{model}')}/predictions.parquet",
        "examples": "results/datasets/{dataset}/examples.parquet",
        "manifest": "results/corpora/{corpus}/manifest.json",
        "metrics": f"{model_dir('{dataset}', '{model}')}/metrics.json",
    }
    templates["summary"] = summary_path("{stage}", "{dataset}", "{model}")
    models = [
        {
            "dataset": d,
            "model": m,
            "corpus": corpus_of(d),
            "stages": [s for s, spec in CARD_SUMMARIES.items() if m in spec["models"](d)],
        }
        for d in DATASETS
        for m in model_ids(d)
    ]
    return {"templates": templates, "models": models}


def explorer_models():
    """Every model of every dataset with its card and the per-instance files the explorer shows."""
    return expand_plan(explorer_plan())


def explorer_inputs(with_card_inputs=False):
    """Every file the explorer reads; ``with_card_inputs``: also each card's summaries and metrics (a partial card)."""
    files = []
    for entry in explorer_models():
        files += [entry["card"], entry["predictions"], entry["examples"], entry["manifest"]]
        files += [source["path"] for source in entry["sources"]]
        if with_card_inputs:
            files += [entry["metrics"], *entry["summaries"].values()]
    return list(dict.fromkeys(files))


def explorer_partial_inputs():
    """The explorer's inputs and each card's summaries and metrics that exist now: ``explorer_partial`` reads only
    these, so what a run that stopped part way left out is shown as missing, not built."""
    return [path for path in explorer_inputs(with_card_inputs=True) if os.path.exists(path)]


def cards_targets():
    return [card_path(d, m, x) for d in DATASETS for m in model_ids(d) for x in ("json", "html", "md")] + [
        "results/explorer"
    ]


def card_inputs(wildcards):
    """A card reads its model's metrics, the corpus manifest (label names) and every summary of the model."""
    d, m = wildcards.dataset, wildcards.model
    return {"metrics": f"{model_dir(d, m)}/metrics.json", "manifest": manifest_path(d), **card_summaries(d, m)}


def summary_inputs_json(wildcards, input):
    """The summary job's named inputs as JSON ({name: path or [paths]}) for ``cards summary --inputs``."""
    return as_json({name: (list(map(str, v)) if isinstance(v, list) else str(v)) for name, v in input.items()})


def jw_summary_inputs(wildcards):
    d, m = wildcards.dataset, wildcards.model
    return {audit.removeprefix("jw_"): jw_audit_path(d, m, audit) for audit in JW_AUDITS}


def jw_explorer_sources(dataset, model):
    """J&W per instance: gradient/LOO scores, the best adversarial attention (ε-max JSD, its Δŷ), τ, permutation Δŷ."""
    methods = [m for m in config["jain_wallace"]["correlation"]["methods"] if m != "attention"]
    taus = {f"τ(attention, {b})": f"tau_attention_{b}" for b in ("gradient", "loo")}
    scores = [{"path": importance_path(dataset, model, m), "overlays": {m: "scores"}, "values": {}} for m in methods]
    return scores + [
        {
            "path": jw_audit_path(dataset, model, "jw_adversarial"),
            "overlays": {"adversarial attention": "adversarial_attention"},
            "values": {"ε-max JSD": "eps_max_jsd", "Δŷ adversary (TVD)": "best_tvd"},
        },
        {"path": jw_audit_path(dataset, model, "jw_correlation"), "overlays": {}, "values": taus},
        {
            "path": jw_audit_path(dataset, model, "jw_permutation"),
            "overlays": {},
            "values": {"median Δŷ permutation": "delta_median"},
        },
    ]


def saliency_card_models(dataset):
    return saliency_models(dataset) if dataset in SAL_DATASETS else []


def saliency_summary_inputs(wildcards):
    """B&F faithfulness; on the planted corpus also every method's scores and the examples (precision@k)."""
    d, m = wildcards.dataset, wildcards.model
    inputs = {"faithfulness": f"results/audits/{d}/{m}/saliency_faithfulness.parquet"}
    if d in SAL_PLANTED:
        inputs |= {"importance": saliency_importance(d, m)}
        inputs |= {"examples": f"results/datasets/{d}/examples.parquet", "vocab": f"results/datasets/{d}/vocab.json"}
    return inputs


def saliency_explorer_sources(dataset, model):
    return [
        {"path": importance_path(dataset, model, m), "overlays": {m: "scores"}, "values": {}}
        for m in config["saliency"]["methods"]
        if m != "attention"
    ]


def wp_card_models(dataset):
    """The base model's card carries W&P §3.2–3.3; every imitating model's card its own W&P §4 numbers (T&Š's
    adversaries too: T&Š §4.3 trains them by W&P's objective)."""
    base = [wp_roles(dataset)["base"]] if dataset in WP_DATASETS else []
    return base + sorted(imitating_models(dataset))


def wp_summary_inputs(wildcards):
    if imitates(wildcards.dataset, wildcards.model):
        return {"imitation": wp_imitation_path(wildcards.dataset, wildcards.model)}
    roles = wp_roles(wildcards.dataset)
    return {
        "base_metrics": [wp_metrics(wildcards.dataset, m) for m in [roles["base"], *sorted(roles["seeds"])]],
        "uniform_metrics": [wp_metrics(wildcards.dataset, m) for m in sorted(roles["uniform"])],
        "seed_variance": f"results/audits/{wildcards.dataset}/wp_seed_variance.parquet",
    }


def wp_card_options(wildcards):
    """The cards options of a W&P summary job: none for an imitating model's (W&P §4: its imitation's numbers, no
    check), so a threshold of the base model's checks does not rerun it."""
    if imitates(wildcards.dataset, wildcards.model):
        return as_json({})
    return as_json(card_options(wildcards.dataset, "wiegreffe_pinter"))


def ts_card_models(dataset):
    return ts_models(dataset) if dataset in TS_DATASETS else []


def ts_summary_inputs(wildcards):
    d, m = wildcards.dataset, wildcards.model
    inputs = {"fragility": ts_audit_path(d, m, "fragility.json")}
    inputs["token_probability"] = ts_audit_path(d, m, "token_probability.parquet")
    if ts_has_mi(d, m):
        inputs["mutual_information"] = ts_audit_path(d, m, "mutual_information.json")
    return inputs


def ts_explorer_sources(dataset, model):
    path = ts_audit_path(dataset, model, "token_probability.parquet")
    return [{"path": path, "overlays": {"T&Š per-token p(ŷ)": "token_probs"}, "values": {}}]


def stop_reevaluation_timers():
    """Cancel the job scheduler's pending re-evaluation timers once the run is over.

    Snakemake (9.27) arms a non-daemon `threading.Timer` of the `max-jobs-per-timespan` span after every scheduling
    pass (`JobScheduler._schedule_reevalutation`); the interpreter waits for the last ones before it exits. With the
    10-minute span of profiles/default that would keep a finished run alive for up to 10 minutes."""
    for thread in threading.enumerate():
        code = getattr(thread.function, "__code__", None) if isinstance(thread, threading.Timer) else None
        if code is not None and code.co_filename.endswith("job_scheduler.py"):
            thread.cancel()


def stop_reevaluation_timers_at_exit():
    """:func:`stop_reevaluation_timers` however the run ends: among threading's exit functions, which the interpreter
    calls before it waits for non-daemon threads (`threading._register_atexit`, as `concurrent.futures` uses it).
    The onsuccess/onerror hooks are not enough: an error in Snakemake's own handling of a job (a log it cannot write:
    PermissionError) ends the run past them, which then waited 10 minutes, deaf to SIGTERM."""
    threading._register_atexit(stop_reevaluation_timers)


# glibc's allocator hands every freed buffer above its mmap threshold (dynamic, ≤ 32 MiB) and the free top of its
# heap back to the kernel, and the next batch faults the same memory in again: 240k-590k page faults in a process
# that trains one epoch. These values keep it: mmap only above 32 MiB, trim only above 16 GiB, grow the heap 64 MiB
# at a time.
GLIBC_MALLOC_TUNABLES = ":".join(
    [
        "glibc.malloc.mmap_threshold=33554432",
        "glibc.malloc.trim_threshold=17179869184",
        "glibc.malloc.top_pad=67108864",
    ]
)


def check_profile_rule_names():
    """Snakemake ignores a set-resources or set-threads entry whose name is not one of the workflow's rules, so a
    typo (jw_adversarail) would send that job to a cluster with the default memory and time, to be killed hours
    later. Checked once every rule is defined."""
    names = {rule.name for rule in workflow.rules}
    settings = workflow.resource_settings
    for key, given in (("set-resources", settings.overwrite_resources), ("set-threads", settings.overwrite_threads)):
        unknown = sorted(set(given) - names)
        if unknown:
            raise AttnauditError(
                f"{key}: {unknown} name none of this workflow's rules (a profile or command-line typo?); they "
                f"are {', '.join(sorted(names))}"
            )


# profiles/slurm's placeholders, and where to find the value of each
SLURM_PLACEHOLDERS = {
    "slurm_partition": ("<your-partition>", "`sinfo -s` lists the partitions"),
    "slurm_account": (
        "<your-account>",
        "`sacctmgr -n -s list user $USER format=account` lists your accounts; delete the line if your cluster has none",
    ),
}


def check_slurm_placeholders():
    """profiles/slurm ships a partition and an account to be filled in; left as they are, every submission would
    fail at sbatch. Stops the planning run, naming the profile key and where to find the value."""
    settings = workflow.resource_settings
    given = {"default-resources": settings.default_resources or {}}
    given |= {f"set-resources.{rule}": resources for rule, resources in settings.overwrite_resources.items()}
    for where, resources in given.items():
        for name, (placeholder, hint) in SLURM_PLACEHOLDERS.items():
            if getattr(resources.get(name), "raw", None) == placeholder:
                raise AttnauditError(
                    f"{where}: {name} is {placeholder!r}, the placeholder profiles/slurm/config.yaml ships; set "
                    f"your cluster's value ({hint}) there, or per run with --default-resources (README, *Running on "
                    "a cluster*)"
                )


def keep_freed_memory_in_jobs():
    """Give every job (local, or Slurm, whose job steps parse this Snakefile again) glibc malloc tunables that keep
    freed memory in the process (docs/performance.md, *glibc's allocator*). The variable is read when a process
    starts, so it reaches the jobs, not this Snakemake process; a GLIBC_TUNABLES the user set is kept as it is, and
    a C library other than glibc ignores it."""
    os.environ.setdefault("GLIBC_TUNABLES", GLIBC_MALLOC_TUNABLES)
