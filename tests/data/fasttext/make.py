"""Writes ``small.bin`` with fastText's own C++ code and ``vectors.json``, the vectors fastText gives some words.

Run with fastText's Python package (``pip install fasttext==0.9.3``, which compiles the C++; not a dependency of
attnaudit): ``python tests/data/fasttext/make.py``. The corpus is seeded text over a fixed word list, so the words of
the probe list are in the model or not as the script says (fastText's training is not bit-reproducible, so the
files are kept, not remade by the tests); test_embeddings.py checks that attnaudit's reader gives these vectors, of
words in the model and of words composed from character n-grams alike.
"""

import json
import random
import tempfile
from pathlib import Path

import fasttext

HERE = Path(__file__).parent
WORDS = ["the", "a", "film", "films", "good", "bad", "plot", "acting", "actor", "actors", "scene", "scenes"]
WORDS += ["story", "long", "dull", "fine", "great", "poor"]
PROBE = ["the", "film", "films", "acting", "actress", "filmmaking", "goodness", "zzq", "a"]

rng = random.Random(0)
with tempfile.TemporaryDirectory() as tmp:
    corpus = Path(tmp) / "corpus.txt"
    filler = ["".join(rng.choice("bcdfghklmnprstvw") + rng.choice("aeiou") for _ in range(3)) for _ in range(300)]
    known = WORDS[:14] + filler  # not dull, fine, great, poor
    lines = [" ".join(rng.choice(known) for _ in range(12)) for _ in range(3000)]
    corpus.write_text("\n".join(lines) + "\n")
    for _attempt in range(20):  # on so small a corpus fastText's training sometimes stops with "Encountered NaN"
        try:
            model = fasttext.train_unsupervised(
                str(corpus),
                model="skipgram",
                dim=8,
                minCount=2,
                minn=3,
                maxn=6,
                bucket=10000,
                epoch=3,
                thread=1,
                verbose=0,
            )
            break
        except RuntimeError as err:
            print(f"fastText: {err}; again")
model.save_model(str(HERE / "small.bin"))
vectors = {word: [float(x) for x in model.get_word_vector(word)] for word in PROBE}
in_model = [word for word in PROBE if model.get_word_id(word) >= 0]
(HERE / "vectors.json").write_text(
    json.dumps({"fasttext": "0.9.3", "in_model": in_model, "vectors": vectors}, indent=1)
)
print(f"{len(model.words)} words; of the probe, in the model: {in_model}")
