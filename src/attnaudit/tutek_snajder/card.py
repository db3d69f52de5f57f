"""Tutek & Šnajder (2020) part of a model's audit card: fragility of the predictions to uniform and permuted
attention (§4.1, Table 1, in the F1 ``cards.fragility_f1`` names, by default the table's, ``tutek_snajder.tables.f1``),
mutual information between e_t and h_t (§3.4, Table 2) and the average per-token prediction probability (§5, Eq. 9,
Table 3)."""

from __future__ import annotations

from attnaudit.cards.summary import check, existing, make_summary, number
from attnaudit.io import read_json, read_parquet
from attnaudit.tutek_snajder.runs import reported_f1

TITLE = "Tutek & Šnajder (2020): fragility, mutual information, per-token probability"
# the cards.* options this summary reads (only they are its jobs' parameters: attnaudit.cards.summary.stage_options)
OPTIONS = ("fragility_points", "fragility_f1")


def summary(inputs: dict, *, dataset: str, model: str, options: dict) -> dict:
    """``inputs``: ``fragility`` (ts_fragility.json), ``token_probability`` (parquet), optional
    ``mutual_information`` (JSON; additive non-concat models only)."""
    numbers, checks, missing, n = [], [], [], None
    if path := existing(inputs, "fragility"):
        result = read_json(path)
        f1 = reported_f1(result, options["fragility_f1"])
        pm, un = result["delta"][f"permutation_{f1}_f1_mean"], result["delta"][f"uniform_{f1}_f1"]
        numbers += [
            number("pm_delta_f1", f"Pm. ΔF1 ({f1} F1, points)", pm, citation="T&Š §4.1, Table 1", headline=True),
            number("un_delta_f1", f"Un. ΔF1 ({f1} F1, points)", un, citation="T&Š §4.1, Table 1"),
        ]
        checks.append(
            check(
                "ts_fragility",
                f"permuting attention changes {f1} F1 by {pm:+.1f} points (uniform: {un:+.1f})",
                f"pass if the permuted ΔF1 is at most −{options['fragility_points']:g} points (attention matters)",
                pm <= -options["fragility_points"],
                "T&Š §4.1",
            )
        )
    else:
        missing.append("fragility")
    if path := existing(inputs, "mutual_information"):
        mi = read_json(path)["samples"]
        for sample in ("MF", "RS"):
            if sample in mi:
                numbers.append(
                    number(
                        f"mi_{sample}",
                        f"MI(e_t; h_t), {sample} words (nats, ≤ {mi[sample]['ln_k']:.2f})",
                        mi[sample]["mi"],
                        citation="T&Š §3.4, Table 2",
                    )
                )
    elif inputs.get("mutual_information"):  # declared for this model, but absent
        missing.append("mutual information")
    if path := existing(inputs, "token_probability"):
        frame = read_parquet(path)
        n = len(frame)
        correct = frame[frame["correct"]]
        numbers += [
            number(
                "token_probability",
                "mean per-token probability (correct instances; lower: attention matters more)",
                correct["mean_token_prob"].mean(),
                citation="T&Š §5, Eq. 9, Table 3",
                headline=True,
            ),
            number(
                "prediction_probability",
                "mean prediction probability p(ŷ)",
                correct["prediction_prob"].mean(),
                citation="T&Š §5",
            ),
        ]
    else:
        missing.append("per-token probability")
    return make_summary(
        "tutek_snajder", TITLE, "Tutek & Šnajder (2020) §3.4, §4.1, §5", dataset, model, numbers, checks, missing, n
    )
