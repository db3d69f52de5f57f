"""Every number of Tutek & Šnajder (2020), "Staying True to Your Word: (How) Can Attention Become Explanation?"
(RepL4NLP 2020) that the tables put beside ours, transcribed from the paper's tables. No public code exists.

Keys are this project's corpus registry names: sst, agnews (AG News, world vs business), 20news (20 Newsgroups,
baseball vs hockey), imdb; anemia (MIMIC) is kept for users who add it. Regulariser names as in the model layer:
base, concat, residual, tying, mlm. Attention: additive (the paper's "+"), dot ("•").
"""

from __future__ import annotations

PAPER = "Tutek & Šnajder (2020)"
REGULARISERS = ("base", "concat", "residual", "tying", "mlm")
ATTENTIONS = ("additive", "dot")
CORPORA = ("sst", "agnews", "20news", "imdb", "anemia")

# Table 1 (§4.1): (Tr. F1, Un. ΔF1, Pm. ΔF1) in % F1 points, averages over five runs; Δ = modified − trained.
# Diabetes is omitted by the paper (every modification gives F1 = 0).
TABLE1_PROVENANCE = f"{PAPER}, Table 1 (§4.1): Tr. F1 / Un. ΔF1 / Pm. ΔF1, % points, mean of 5 runs"
TABLE1: dict[str, dict[str, dict[str, tuple[float, float, float]]]] = {
    "sst": {
        "additive": {
            "base": (84.2, -2.8, -5.0),
            "concat": (83.7, -1.9, -4.7),
            "tying": (83.5, -7.0, -18.0),
            "mlm": (82.8, -5.9, -15.6),
        },
        "dot": {
            "base": (84.3, -2.6, -6.5),
            "concat": (84.1, -3.4, -7.4),
            "tying": (83.5, -9.9, -20.0),
            "mlm": (82.7, -3.0, -5.4),
        },
    },
    "agnews": {
        "additive": {
            "base": (95.9, -2.3, -3.9),
            "concat": (95.9, -1.5, -2.6),
            "tying": (95.0, -3.3, -14.6),
            "mlm": (95.2, -1.5, -6.6),
        },
        "dot": {
            "base": (95.9, -2.3, -3.8),
            "concat": (96.1, -1.9, -3.0),
            "tying": (95.4, -3.0, -12.2),
            "mlm": (95.4, -2.0, -5.3),
        },
    },
    "20news": {
        "additive": {
            "base": (90.9, -9.8, -14.1),
            "concat": (91.3, -25.0, -28.2),
            "tying": (91.4, -39.7, -43.2),
            "mlm": (91.5, -76.3, -66.0),
        },
        "dot": {
            "base": (91.1, -35.2, -36.8),
            "concat": (91.0, -40.4, -37.1),
            "tying": (90.9, -37.0, -42.8),
            "mlm": (89.1, -79.6, -72.8),
        },
    },
    "imdb": {
        "additive": {
            "base": (88.3, -10.0, -13.4),
            "concat": (88.3, -10.2, -14.0),
            "tying": (87.1, -56.2, -43.3),
            "mlm": (87.5, -22.8, -26.5),
        },
        "dot": {
            "base": (88.2, -18.6, -22.9),
            "concat": (87.9, -17.2, -20.8),
            "tying": (87.2, -57.7, -45.3),
            "mlm": (87.8, -15.3, -18.5),
        },
    },
    "anemia": {
        "additive": {
            "base": (92.4, -21.6, -22.4),
            "concat": (92.8, -19.3, -22.2),
            "tying": (91.3, -31.4, -27.6),
            "mlm": (89.7, -35.0, -37.7),
        },
        "dot": {
            "base": (92.7, -10.2, -14.4),
            "concat": (92.4, -15.2, -17.2),
            "tying": (91.0, -91.0, -59.7),
            "mlm": (90.7, -37.8, -33.9),
        },
    },
}

# Table 2 (§3.4, §4.2; the text calls it "Table 3"): MI (nats, ≤ ln 1000 ≈ 6.91) between the cluster ids of
# e_t and h_t, (MF, RS), additive attention only. Residual replaces concat, whose dimensions differ.
TABLE2_PROVENANCE = f"{PAPER}, Table 2 (§3.4, §4.2): MI of MF / RS words, additive attention, k = 1000"
TABLE2: dict[str, dict[str, tuple[float, float]]] = {
    "sst": {"base": (2.324, 2.435), "residual": (5.062, 4.289), "tying": (4.870, 4.216), "mlm": (3.662, 3.808)},
    "agnews": {"base": (1.940, 2.078), "residual": (5.467, 4.518), "tying": (4.075, 4.177), "mlm": (3.845, 3.980)},
    "20news": {"base": (1.566, 1.828), "residual": (4.345, 3.843), "tying": (3.985, 3.784), "mlm": (3.677, 3.458)},
    "imdb": {"base": (2.455, 2.682), "residual": (4.998, 4.366), "tying": (5.186, 4.434), "mlm": (3.728, 3.885)},
    "anemia": {"base": (3.711, 3.780), "residual": (5.253, 4.477), "tying": (4.239, 3.950), "mlm": (4.016, 3.921)},
}
TABLE2_K = 1000

# Table 3 (§5, Eq. 9): average per-token probability of the predicted class over correctly predicted
# instances; lower is better for interpretability.
TABLE3_PROVENANCE = f"{PAPER}, Table 3 (§5, Eq. 9): average per-token prediction probability"
TABLE3: dict[str, dict[str, dict[str, float]]] = {
    "sst": {
        "additive": {"base": 0.712, "residual": 0.685, "tying": 0.586, "mlm": 0.630},
        "dot": {"base": 0.693, "residual": 0.701, "tying": 0.600, "mlm": 0.664},
    },
    "agnews": {
        "additive": {"base": 0.887, "residual": 0.822, "tying": 0.615, "mlm": 0.695},
        "dot": {"base": 0.862, "residual": 0.876, "tying": 0.646, "mlm": 0.698},
    },
    "20news": {
        "additive": {"base": 0.811, "residual": 0.551, "tying": 0.577, "mlm": 0.514},
        "dot": {"base": 0.687, "residual": 0.755, "tying": 0.516, "mlm": 0.482},
    },
    "imdb": {
        "additive": {"base": 0.625, "residual": 0.609, "tying": 0.533, "mlm": 0.562},
        "dot": {"base": 0.590, "residual": 0.608, "tying": 0.539, "mlm": 0.553},
    },
    "anemia": {
        "additive": {"base": 0.568, "residual": 0.547, "tying": 0.531, "mlm": 0.515},
        "dot": {"base": 0.542, "residual": 0.534, "tying": 0.515, "mlm": 0.519},
    },
}

# Table 6 (App. B): multi-layer BiLSTMs, additive attention, (Tr., Un., Pm.) by number of layers; 2 and 3
# layers reuse the best 1-layer hyper-parameters; the 1-layer rows are Table 1's additive rows.
TABLE6_PROVENANCE = f"{PAPER}, Table 6 (App. B): Tr. / Un. / Pm. by LSTM layers, additive attention"
TABLE6: dict[str, dict[int, dict[str, tuple[float, float, float]]]] = {
    "sst": {
        1: TABLE1["sst"]["additive"],
        2: {
            "base": (84.2, -1.0, -1.2),
            "concat": (84.5, -0.8, -4.6),
            "tying": (84.1, -3.7, -14.5),
            "mlm": (84.4, -3.8, -5.9),
        },
        3: {
            "base": (84.2, -0.7, -0.7),
            "concat": (83.3, -1.3, -1.3),
            "tying": (84.6, -2.7, -13.9),
            "mlm": (82.3, -7.3, -18.0),
        },
    },
    "agnews": {
        1: TABLE1["agnews"]["additive"],
        2: {
            "base": (95.7, -0.3, -0.3),
            "concat": (95.9, -1.4, -2.0),
            "tying": (95.5, -3.7, -14.8),
            "mlm": (95.6, -1.6, -3.8),
        },
        3: {
            "base": (95.9, -0.0, -0.1),
            "concat": (95.7, -1.0, -1.6),
            "tying": (95.4, -2.0, -12.8),
            "mlm": (95.8, -13.2, -62.5),
        },
    },
    "20news": {
        1: TABLE1["20news"]["additive"],
        2: {
            "base": (93.7, -0.9, -5.6),
            "concat": (94.0, -6.3, -11.9),
            "tying": (92.8, -17.5, -25.5),
            "mlm": (89.8, -31.6, -35.0),
        },
        3: {
            "base": (92.0, 0.0, 0.0),
            "concat": (91.5, -30.2, -35.7),
            "tying": (89.0, -30.3, -39.3),
            "mlm": (88.5, -17.9, -17.4),
        },
    },
    "imdb": {
        1: TABLE1["imdb"]["additive"],
        2: {
            "base": (88.4, -3.1, -3.8),
            "concat": (88.9, -7.2, -9.1),
            "tying": (87.6, -51.2, -41.1),
            "mlm": (87.4, -14.5, -21.7),
        },
        3: {
            "base": (88.5, -1.2, -1.4),
            "concat": (88.8, -5.7, -7.8),
            "tying": (87.9, -7.6, -21.3),
            "mlm": (87.1, -87.1, -84.5),
        },
    },
}


def table1(corpus: str, attention: str, regulariser: str) -> tuple[float, float, float] | None:
    return TABLE1.get(corpus, {}).get(attention, {}).get(regulariser)


def table2(corpus: str, regulariser: str) -> tuple[float, float] | None:
    return TABLE2.get(corpus, {}).get(regulariser)


def table3(corpus: str, attention: str, regulariser: str) -> float | None:
    return TABLE3.get(corpus, {}).get(attention, {}).get(regulariser)


def table6(corpus: str, layers: int, regulariser: str) -> tuple[float, float, float] | None:
    return TABLE6.get(corpus, {}).get(int(layers), {}).get(regulariser)
