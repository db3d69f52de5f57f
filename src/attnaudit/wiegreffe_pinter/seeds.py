"""Variance within a model (W&P §3.3, Fig. 3): how far the attention of the same architecture trained from other
random seeds lies from the base model's, next to how far J&W's post-hoc ε-max adversary pulls it (J&W §4.2.2).

Per test instance of the base model: JSD (nats) of each seed's attention to the base attention over the non-marker
tokens, both renormalised there (:mod:`attnaudit.wiegreffe_pinter.distances`), TVD of the predicted
distributions, their median (W&P's x axis), mean and max over seeds; the base model's max renormalised attention
(Fig. 3's y bins) and predicted class (hue); and from the J&W adversarial audit of the same base model its ε-max
JSD, number of valid adversaries and the best adversary's TVD. ``beyond_every_seed`` says the adversary is valid
and its ε-max JSD exceeds the JSD of every seed. (J&W's ε-max JSD is measured against the full base attention;
it equals ours when the base model puts no mass on the markers.)
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from attnaudit import AttnauditError
from attnaudit.io import read_parquet, write_parquet
from attnaudit.wiegreffe_pinter.distances import attention_jsd, load_predictions, load_split, output_tvd
from attnaudit.wiegreffe_pinter.options import resolve

log = logging.getLogger(__name__)

ADVERSARIAL_COLUMNS = ["id", "predicted_class", "eps_max_jsd", "n_valid", "best_tvd"]


def _adversarial(path: str | Path, ids: list[str]) -> pd.DataFrame:
    """The J&W adversarial audit's columns for ``ids`` (every one must be audited)."""
    frame = read_parquet(path, columns=ADVERSARIAL_COLUMNS)
    if frame["id"].duplicated().any():
        raise AttnauditError(f"{path}: duplicate ids")
    frame = frame.set_index("id")
    missing = pd.Index(ids).difference(frame.index)
    if len(missing):
        raise AttnauditError(
            f"{path}: {len(missing)} instances of the base model have no adversarial audit, e.g. {list(missing[:3])}"
        )
    return frame.loc[ids].reset_index()


def seed_variance(
    base_predictions: str | Path,
    seed_predictions: list[str | Path],
    dataset_dir: str | Path,
    adversarial: str | Path,
    split: str = "test",
    options: dict | None = None,
) -> pd.DataFrame:
    """One row per instance of ``split`` (W&P §3.3); see the module docstring for the columns."""
    opts = resolve(options)["seeds"]
    paths = [Path(p).resolve() for p in seed_predictions]
    if len(paths) < opts["min_seeds"]:
        raise AttnauditError(
            f"{dataset_dir}: seed variance needs at least {opts['min_seeds']} seed models, got {len(paths)}"
        )
    if len(set(paths)) != len(paths) or Path(base_predictions).resolve() in paths:
        raise AttnauditError(f"{dataset_dir}: the seed predictions repeat a file or include the base model's")
    data = load_split(dataset_dir, split)
    base = load_predictions(base_predictions, data)
    seeds = [load_predictions(p, data) for p in seed_predictions]
    seed_jsd, max_attention = attention_jsd(seeds, base, data)
    seed_tvd = output_tvd(seeds, base)
    adv = _adversarial(adversarial, data.data.ids)
    disagree = int((adv["predicted_class"].to_numpy() != base.predicted).sum())
    if disagree:
        log.warning(
            "%s: the adversarial audit's predicted class differs from the base model's on %d instances",
            adversarial,
            disagree,
        )
    with np.errstate(all="ignore"):
        frame = pd.DataFrame(
            {
                "id": data.data.ids,
                "row": np.arange(len(data.data)),
                "label": data.data.labels,
                "predicted_class": base.predicted,
                "n_tokens": data.lengths,
                "n_content": data.n_content,
                "max_attention": max_attention,
                "n_seeds": len(seeds),
                "seed_jsd": list(seed_jsd.T),
                "seed_tvd": list(seed_tvd.T),
                "jsd_median": np.median(seed_jsd, axis=0),
                "jsd_mean": seed_jsd.mean(axis=0),
                "jsd_max": seed_jsd.max(axis=0),
                "tvd_median": np.median(seed_tvd, axis=0),
                "tvd_mean": seed_tvd.mean(axis=0),
                "eps_max_jsd": adv["eps_max_jsd"].to_numpy(float),
                "n_valid": adv["n_valid"].to_numpy(np.int64),
                "best_tvd": adv["best_tvd"].to_numpy(float),
            }
        )
    frame["beyond_every_seed"] = (frame["n_valid"] > 0) & (frame["eps_max_jsd"] > frame["jsd_max"])
    return frame


def write_seed_variance(out: str | Path, *args, **kwargs) -> pd.DataFrame:
    frame = seed_variance(*args, **kwargs)
    write_parquet(out, frame)
    log.info(
        "%d instances, %d seeds: median seed JSD %.3f (mean over instances), adversary beyond every seed on %.1f%%",
        len(frame),
        frame["n_seeds"].iat[0],
        frame["jsd_median"].mean(),
        100 * frame["beyond_every_seed"].mean(),
    )
    return frame
