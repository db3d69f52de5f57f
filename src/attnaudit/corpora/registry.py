"""The corpus registry: every corpus described once — files, official URLs, sha256, reader, labels,
and J&W's per-dataset choices (``defaults``) that the tokenise stage applies.

Paths are relative to the corpus's folder: ``<mirror>/<mirror_dir>/`` or the stage's ``--raw-dir``.
URLs, sizes and checksums are those of ``shared/corpora/MANIFEST.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from attnaudit import AttnauditError, ConfigKeyError
from attnaudit.corpora import readers


@dataclass(frozen=True)
class CorpusFile:
    """A single file, verified against its pinned ``sha256``; ``None`` = no checksum could be established (the
    file's sha256 is recorded in the manifest with a loud warning instead of being checked)."""

    path: str
    urls: tuple[str, ...]
    sha256: str | None


@dataclass(frozen=True)
class CorpusTree:
    """An extracted folder ``root``, verified through the SHA256SUMS list ``sums`` (whose own sha256 is pinned).

    Where no mirror holds it, the official ``archive`` is downloaded, checked against its pinned sha256 and
    extracted; the archive's folder ``archive_prefix`` ("" = its top level) becomes ``root``.
    """

    root: str
    sums: str
    sums_sha256: str
    archive: CorpusFile
    archive_prefix: str = ""


Reader = Callable[[Path | None, dict, int], tuple[pd.DataFrame, dict]]


@dataclass(frozen=True)
class CorpusSpec:
    """One corpus: where its files are, how to read them, and J&W's per-dataset choices.

    ``reader(root, options, seed) -> (documents, info)``; ``options`` maps the accepted options to their
    defaults (only the planted corpus has any); ``defaults`` are for the tokeniser (min_count, max_tokens,
    dev_fraction, test_fraction, test_sample, class_weighting).
    """

    name: str
    description: str
    citation: str
    mirror_dir: str | None
    files: tuple[CorpusFile | CorpusTree, ...]
    reader: Reader
    label_names: tuple[str, ...]
    defaults: dict[str, Any]
    options: dict[str, Any] = field(default_factory=dict)
    query: bool = False  # QA/NLI: documents carry a ``query`` (question/hypothesis) besides the passage ``text``
    user_data: bool = False  # read from a folder the user supplies (``options.path``; MIMIC), never downloaded


def _defaults(
    min_count: int,
    *,
    max_tokens: int | None = None,
    dev_fraction: float | None = None,
    test_fraction: float | None = None,
    test_sample: float | None = None,
    class_weighting: bool = False,
) -> dict[str, Any]:
    return {
        "min_count": min_count,
        "max_tokens": max_tokens,
        "dev_fraction": dev_fraction,
        "test_fraction": test_fraction,
        "test_sample": test_sample,
        "class_weighting": class_weighting,
    }


def _files_only(read: Callable[[Path], tuple[pd.DataFrame, dict]]) -> Reader:
    return lambda root, options, seed: read(root)


REGISTRY: dict[str, CorpusSpec] = {
    spec.name: spec
    for spec in [
        CorpusSpec(
            name="sst",
            description="Stanford Sentiment Treebank, binary sentence-level sentiment without neutral (J&W §3)",
            citation="Socher et al., Recursive Deep Models for Semantic Compositionality Over a Sentiment "
            "Treebank, EMNLP 2013",
            mirror_dir="sst",
            files=(
                CorpusFile(
                    "trainDevTestTrees_PTB.zip",
                    ("https://nlp.stanford.edu/sentiment/trainDevTestTrees_PTB.zip",),
                    "5c613a4f673fc74097d523a2c83f38e0cc462984d847b82c7aaf36b01cbbbfcc",
                ),
            ),
            reader=_files_only(readers.read_sst),
            label_names=("negative", "positive"),
            defaults=_defaults(1),
        ),
        CorpusSpec(
            name="imdb",
            description="IMDB Large Movie Review Dataset v1.0, positive vs negative (J&W §3)",
            citation="Maas et al., Learning Word Vectors for Sentiment Analysis, ACL 2011",
            mirror_dir="imdb",
            files=(
                CorpusTree(
                    root="aclImdb",
                    sums="SHA256SUMS",
                    sums_sha256="ecc885c6bb64d630469e43f8f0a90f827d779192bb03bc5ccab2a48d8457a236",
                    archive=CorpusFile(
                        "aclImdb_v1.tar.gz",
                        ("https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz",),
                        "c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe",
                    ),
                    archive_prefix="aclImdb",
                ),
            ),
            reader=_files_only(readers.read_imdb),
            label_names=("negative", "positive"),
            defaults=_defaults(10, max_tokens=400, dev_fraction=0.2, test_sample=0.2),
        ),
        CorpusSpec(
            name="20news",
            description="20 Newsgroups (bydate), rec.sport.baseball vs rec.sport.hockey, pooled (J&W §3)",
            citation="Lang, NewsWeeder: Learning to Filter Netnews, ICML 1995 (bydate version by J. Rennie)",
            mirror_dir="20newsgroups",
            files=(
                CorpusTree(
                    root="20news-bydate",
                    sums="SHA256SUMS",
                    sums_sha256="f7c1182b55b6bb10798cfcec04356953dfd9bf4dea609d716bfb5289dc12ade4",
                    # the sha256 is scikit-learn's pin for its figshare copy of the bydate tarball
                    archive=CorpusFile(
                        "20news-bydate.tar.gz",
                        (
                            "https://ndownloader.figshare.com/files/5975967",
                            "http://qwone.com/~jason/20Newsgroups/20news-bydate.tar.gz",
                        ),
                        "8f1b2514ca22a5ade8fbb9cfa5727df95fa587f4c87b786e15c759fa66d95610",
                    ),
                ),
            ),
            reader=_files_only(readers.read_20news),
            label_names=("baseball", "hockey"),
            defaults=_defaults(2, dev_fraction=0.2, test_fraction=0.2),
        ),
        CorpusSpec(
            name="agnews",
            description="AG News, World vs Business (J&W §3)",
            citation="Zhang, Zhao & LeCun, Character-level Convolutional Networks for Text Classification, NIPS 2015",
            mirror_dir="ag_news",
            files=tuple(
                CorpusFile(
                    f"ag_news_csv/{name}",
                    (f"https://raw.githubusercontent.com/mhjabreel/CharCnn_Keras/master/data/ag_news_csv/{name}",),
                    sha,
                )
                for name, sha in [
                    ("train.csv", "76a0a2d2f92b286371fe4d4044640910a04a803fdd2538e0f3f29a5c6f6b672e"),
                    ("test.csv", "521465c2428ed7f02f8d6db6ffdd4b5447c1c701962353eb2c40d548c3c85699"),
                ]
            ),
            reader=_files_only(readers.read_agnews),
            label_names=("world", "business"),
            defaults=_defaults(5, dev_fraction=0.15),
        ),
        CorpusSpec(
            name="adr",
            description="Twitter adverse drug reactions, as preprocessed by Jain & Wallace (2019)",
            citation="Nikfarjam et al., Pharmacovigilance from social media, JAMIA 2015",
            mirror_dir="twitter_adr",
            files=(
                CorpusFile(
                    "adr_dataset.csv",
                    (
                        "https://raw.githubusercontent.com/successar/AttentionExplanation/"
                        "c6fb074cc0baa8be5385dab3322e2d8ce3996c42/preprocess/Tweets/adr_dataset.csv",
                    ),
                    "5291e972cba82c400ff4f57db5141b93014f949429b680c40b9624d8bb8c41d7",
                ),
            ),
            reader=_files_only(readers.read_adr),
            label_names=("no_adr", "adr"),
            defaults=_defaults(2, dev_fraction=0.15, class_weighting=True),
        ),
        CorpusSpec(
            name="planted",
            description="Synthetic planted-token corpus: the label is decided by known marker words",
            citation="attnaudit (generated from a seed; no download)",
            mirror_dir=None,
            files=(),
            reader=lambda root, options, seed: readers.generate_planted(seed, **options),
            label_names=("negative", "positive"),
            defaults=_defaults(1, dev_fraction=0.2, test_fraction=0.2),
            options=dict(readers.PLANTED_OPTIONS),
        ),
    ]
}


# bAbI v1.2 (Weston et al. 2015): the mirror's copy is VinGarcia/bAbI @ c4f149b (the official tarball,
# tasks_1-20_v1-2.tar.gz, has no published checksum); sha256 values are shared/corpora/MANIFEST.md's, each file
# checked against its git blob id there. en-10k/qa3 train was too large for the mirror: unpinned.
_BABI_COMMIT = "c4f149baa4ecc4ba9096d2706e5be845a98680e6"
_BABI_RAW = f"https://raw.githubusercontent.com/VinGarcia/bAbI/{_BABI_COMMIT}"
_BABI_SHA256 = {
    ("en-10k", 1, "train"): "749ea9f7c99070feb2d88c975a254417a0dcc8274add4435ae5ae24c7afc7e9d",
    ("en-10k", 1, "test"): "55acf66cef2f6d798e2aa1d056e1ec8f24e910ea9215b639450574321132959b",
    ("en-10k", 2, "train"): "d4074c0c5d54f70ce2f538056ce2b6ef6a313da336da4245f1a24f1298e37ef3",
    ("en-10k", 2, "test"): "eff93fb9cd81ba02eb765772cf7cc269769ed44ec71cbbbc19cfb16ee5eba0f6",
    ("en-10k", 3, "test"): "17795c977100baf8188f386522ae301b62d6c1a13efc01b3aea781e588b4d57f",
    ("en", 3, "train"): "a6e78019f36a02a7ed71fe6aaded0b563ff09c8deec392931801fcd9c6af4d60",
    ("en", 3, "test"): "17795c977100baf8188f386522ae301b62d6c1a13efc01b3aea781e588b4d57f",
}


def _babi_spec(task: int, size: str = "en-10k") -> CorpusSpec:
    """bAbI task 1–3 (J&W §3: en-10k, 10,000 train / 1,000 test questions; ``en`` = the 1k version)."""
    suffix = "" if size == "en-10k" else "_1k"
    files = tuple(
        CorpusFile(
            readers.babi_path(task, split, size),
            (f"{_BABI_RAW}/{readers.babi_path(task, split, size)}",),
            _BABI_SHA256.get((size, task, split)),
        )
        for split in ("train", "test")
    )
    return CorpusSpec(
        name=f"babi{task}{suffix}",
        description=f"bAbI v1.2 {size} task {task} ({readers.BABI_TASKS[task]}): passage = the story so far, "
        "query = the question, answer = a word (J&W §3)",
        citation="Weston et al., Towards AI-Complete Question Answering: A Set of Prerequisite Toy Tasks, 2015",
        mirror_dir="babi",
        files=files,
        reader=lambda root, options, seed: readers.read_babi(root, task, size),
        label_names=(),  # the answer vocabulary, from the files (reader info)
        defaults=_defaults(1, class_weighting=False),
        query=True,
    )


def _mimic_spec(task: str, description: str, labels: tuple[str, str]) -> CorpusSpec:
    return CorpusSpec(
        name=f"mimic_{task}",
        description=description,
        citation="Johnson et al., MIMIC-III, a freely accessible critical care database, Scientific Data 2016",
        mirror_dir=None,
        files=(),
        reader=lambda root, options, seed: readers.read_mimic(task, options),
        label_names=labels,
        defaults=_defaults(5, dev_fraction=0.15, test_fraction=0.2, class_weighting=True),
        options=dict(readers.MIMIC_OPTIONS),
        user_data=True,
    )


REGISTRY.update(
    {
        spec.name: spec
        for spec in [
            _babi_spec(1),
            _babi_spec(2),
            _babi_spec(3),
            _babi_spec(3, "en"),  # the mirror lacks en-10k qa3 train: the 1k task is runnable here
            CorpusSpec(
                name="snli",
                description="SNLI 1.0: premise attended, hypothesis = query; neutral/contradiction/entailment "
                "(J&W §3); rows without a gold label dropped",
                citation="Bowman et al., A large annotated corpus for learning natural language inference, EMNLP 2015",
                mirror_dir="snli",
                # no published sha256 for snli_1.0.zip was found: unpinned (the manifest records the file's hash)
                files=(CorpusFile("snli_1.0.zip", ("https://nlp.stanford.edu/projects/snli/snli_1.0.zip",), None),),
                reader=_files_only(readers.read_snli),
                label_names=readers.SNLI_LABELS,
                defaults=_defaults(3),
                query=True,
            ),
            CorpusSpec(
                name="cnn",
                description="CNN cloze QA in Chen et al. (2016)'s format: passage, question, answer among the "
                "passage's @entity tokens (J&W §3)",
                citation="Hermann et al., Teaching Machines to Read and Comprehend, NeurIPS 2015; Chen, Bolton & "
                "Manning, A Thorough Examination of the CNN/Daily Mail Reading Comprehension Task, ACL 2016",
                mirror_dir="cnn",
                # Chen et al.'s cnn.tar.gz has no published sha256: unpinned; place cnn/{train,dev,test}.txt
                files=tuple(
                    CorpusFile(f"cnn/{split}.txt", (), None)  # from http://cs.stanford.edu/~danqi/data/cnn.tar.gz
                    for split in ("train", "dev", "test")
                ),
                reader=_files_only(readers.read_cnn),
                label_names=(),
                defaults=_defaults(8),
                query=True,
            ),
            _mimic_spec(
                "diabetes",
                "MIMIC-III discharge summaries: labelled with ICD-9 250.xx diabetes or not (J&W §3)",
                ("no_diabetes", "diabetes"),
            ),
            _mimic_spec(
                "anemia",
                "MIMIC-III discharge summaries of anemia patients: acute (285.1) vs chronic (285.2x) (J&W §3)",
                ("acute", "chronic"),
            ),
        ]
    }
)


def user_spec(name: str, config: Any) -> CorpusSpec:
    """A CorpusSpec for a user's own CSV/TSV/JSONL corpus declared in config (``corpora.user.<name>``)."""
    key = ("corpora", "user", name)
    if name in REGISTRY:
        raise ConfigKeyError(key, "the name collides with a built-in corpus; rename it")
    if not isinstance(config, dict):
        raise ConfigKeyError(key, f"expected a mapping with keys {sorted(readers.USER_KEYS)}")
    unknown = sorted(set(config) - readers.USER_KEYS)
    if unknown:
        raise ConfigKeyError((*key, unknown[0]), f"unknown key; expected one of {', '.join(sorted(readers.USER_KEYS))}")
    missing = [k for k in readers.USER_REQUIRED if not config.get(k)]
    if missing:
        raise ConfigKeyError(key, f"missing required key(s) {missing}")
    readers.user_format(name, config)
    readers.distinct_columns(name, config)
    readers.answers_from_passage(name, config)
    extra = config.get("defaults") or {}
    base = _defaults(1, dev_fraction=0.2, test_fraction=0.2)
    unknown = sorted(set(extra) - set(base))
    if unknown:
        raise ConfigKeyError((*key, "defaults", unknown[0]), f"unknown key; expected one of {', '.join(sorted(base))}")
    return CorpusSpec(
        name=name,
        description=config.get("description") or f"user corpus {config['path']}",
        citation="user-provided",
        mirror_dir=None,
        files=(),
        reader=lambda root, options, seed: readers.read_user(name, config),
        label_names=tuple(str(n) for n in config.get("label_names") or ()),
        defaults={**base, **extra},
        query=bool(config.get("query_column")),
    )


def get_spec(name: str, user_corpora: dict | None = None) -> CorpusSpec:
    """The registered corpus ``name``, or the user corpus of that name declared in ``user_corpora``."""
    user_corpora = user_corpora or {}
    if name in user_corpora:
        return user_spec(name, user_corpora[name])
    if name in REGISTRY:
        return REGISTRY[name]
    valid = sorted(REGISTRY) + sorted(user_corpora)
    raise AttnauditError(f"unknown corpus {name!r}; valid names are: {', '.join(valid)}")
