"""Jain & Wallace (2019) part of a model's audit card: Kendall τ between attention, gradient and LOO (§4.1,
Alg. 1) with bootstrap 95 % CIs over instances; permutation (§4.2.1, Alg. 2) and ε-max adversarial attention
(§4.2.2, Alg. 3) summaries, each with the check it implies."""

from __future__ import annotations

from attnaudit.cards.summary import bootstrap_ci, check, existing, level, make_summary, number, percent, share
from attnaudit.io import read_parquet

TITLE = "Jain & Wallace (2019): attention vs gradients and LOO, permuted and adversarial attention"
# the cards.* options this summary reads (only they are its jobs' parameters: attnaudit.cards.summary.stage_options)
OPTIONS = ("bootstrap_samples", "confidence", "seed", "majority", "delta_median", "eps_max_jsd")
PAIRS = {
    "tau_attention_gradient": "τ(attention, gradient)",
    "tau_attention_loo": "τ(attention, LOO)",
    "tau_gradient_loo": "τ(gradient, LOO)",
}


def summary(inputs: dict, *, dataset: str, model: str, options: dict) -> dict:
    """``inputs``: ``correlation``, ``permutation``, ``adversarial`` (the gathered J&W audit parquets)."""
    numbers, checks, missing, n = [], [], [], None
    boot = {"n_resamples": options["bootstrap_samples"], "confidence": options["confidence"], "seed": options["seed"]}
    majority = options["majority"]
    if path := existing(inputs, "correlation"):
        corr = read_parquet(path)
        n = len(corr)
        means = {}
        for key, label in PAIRS.items():
            if key in corr:
                means[key] = float(corr[key].mean())
                ci = bootstrap_ci(corr[key], **boot)
                numbers.append(
                    number(key, f"mean {label}", means[key], ci=ci, citation="J&W §4.1, Table 2", headline=True)
                )
        if {"tau_attention_loo", "tau_gradient_loo"} <= set(means):
            hi = bootstrap_ci(corr["tau_attention_loo"], **boot)
            ok = None if hi is None else hi[1] >= means["tau_gradient_loo"]
            checks.append(
                check(
                    "jw_tau",
                    f"τ(attention, LOO) {means['tau_attention_loo']:.2f} vs τ(gradient, LOO) "
                    f"{means['tau_gradient_loo']:.2f}",
                    f"pass if the upper {level(options['confidence'])} CI bound of mean τ(attention, LOO) reaches mean "
                    "τ(gradient, LOO)",
                    ok,
                    "J&W §4.1",
                )
            )
    else:
        missing.append("correlation")
    if path := existing(inputs, "permutation"):
        perm = read_parquet(path)
        small = float((perm["delta_median"] < options["delta_median"]).mean())
        numbers.append(
            number(
                "delta_median",
                "median Δŷ under permutation (mean)",
                perm["delta_median"].mean(),
                citation="J&W §4.2.1, Fig. 3",
            )
        )
        label = f"instances with median Δŷ < {options['delta_median']}"
        numbers.append(share("permutation_insensitive", label, small, citation="J&W §4.2.1"))
        checks.append(
            check(
                "jw_permutation",
                f"permuting attention leaves the output nearly unchanged (median Δŷ < {options['delta_median']}) "
                f"for {percent(small)} of instances",
                f"pass if that share is below {100 * majority:.0f} %",
                small < majority,
                "J&W §4.2.1",
            )
        )
    else:
        missing.append("permutation")
    if path := existing(inputs, "adversarial"):
        adv = read_parquet(path)
        valid = adv["n_valid"] > 0
        jsd = adv["eps_max_jsd"]  # as the audit wrote it: 0 without a valid adversary (Alg. 3), or NaN (`no_valid`)
        found = float(((jsd > options["eps_max_jsd"]) & valid).mean())
        numbers.append(
            number(
                "eps_max_jsd",
                "mean ε-max JSD",
                jsd.mean(),
                ci=bootstrap_ci(jsd, **boot),
                citation="J&W §4.2.2, Fig. 4",
                headline=True,
            )
        )
        label = f"instances with ε-max JSD > {options['eps_max_jsd']}"
        numbers.append(share("adversary_found", label, found, citation="J&W §4.2.2"))
        checks.append(
            check(
                "jw_adversarial",
                f"a very different attention (JSD > {options['eps_max_jsd']}) gives the same prediction for "
                f"{percent(found)} of instances",
                f"pass if that share is below {100 * majority:.0f} %",
                found < majority,
                "J&W §4.2.2",
            )
        )
        n = n or len(adv)
    else:
        missing.append("adversarial")
    citation = "Jain & Wallace (2019) §4"
    confidence = options["confidence"]
    return make_summary("jain_wallace", TITLE, citation, dataset, model, numbers, checks, missing, n, confidence)
