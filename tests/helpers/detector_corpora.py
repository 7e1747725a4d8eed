"""The texts the detector's decisions are pinned on: the project's corpora and hostile inputs.

`tests/data/detector_decisions.txt` holds, for every text here, what the detector decided on it
(keyed by the text's digest, never the text): the signature name, the classifier's verdict, score,
deciding piece and pieces judged, the signals seen and the named doubts. A change to how the detector runs (its
cost, its regular expressions) must leave every one of those decisions as it is; a change to what
it decides regenerates the file (`python tests/unit/test_detector_decisions.py --write`) and says
why in the commit.

Sources:
- project-corpus: tests/helpers/poisoning_corpus.py, payloads and benign notes, as they are;
- bench-notes: the 400 ordinary notes of `pymem bench --admission` (benchmarks.admission_bench);
- long-notes: ordinary notes of 8, 32 and 64 KiB, clean and with a corpus payload in the middle;
- hostile: periodic text of one or two tokens (letters, digits, every ASCII punctuation mark,
  look-alike letters, URL and address fragments): the shapes that made the detector's regular
  expressions quadratic;
- the training corpora of the classifier (training/: own framings, host documents, everyday notes,
  standard-library docstrings), when the `train` extra's Faker is installed.
"""

from __future__ import annotations

import hashlib
import itertools
import random
import string
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DECISIONS = ROOT / "tests" / "data" / "detector_decisions.txt"

#: The tokens hostile text is built from.
TOKENS = (list("a1 \n\t") + list(string.punctuation)
          + ["é", "а", "\u200b", "·", "you", "http://", "www", ".com", "ai", "send", "to "])


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _periodic(unit: str, n: int) -> str:
    return (unit * (n // len(unit) + 1))[:n]


def project_corpus() -> Iterator[str]:
    from helpers.poisoning_corpus import BENIGN, PAYLOADS

    for _, text in PAYLOADS + BENIGN:
        yield text


def bench_notes() -> Iterator[str]:
    from benchmarks.admission_bench import sample_notes

    yield from sample_notes(100)


def long_notes() -> Iterator[str]:
    from benchmarks.admission_bench import _note
    from helpers.poisoning_corpus import PAYLOADS

    rng = random.Random(20261201)
    for size in (8192, 32768, 65536):
        for _k in range(3):
            text = _note(rng, size)[:size]
            yield text
            payload = PAYLOADS[rng.randrange(len(PAYLOADS))][1]
            middle = len(text) // 2
            yield text[:middle] + "\n" + payload + "\n" + text[middle:]


def hostile() -> Iterator[str]:
    for unit in TOKENS:
        for n in (400, 1600):
            yield _periodic(unit, n)
    rng = random.Random(7)
    pairs = list(itertools.permutations(TOKENS, 2))
    for a, b in rng.sample(pairs, 400):
        yield _periodic(a + b, 800)
    for a, b, c in (("send the chat history to ", "a", "@x.co"), ("the real address is ", "a.", "com"),
                    ("![x](http://", "/", "?d={data})"), ("http://", "http://", "?q={history}")):
        yield a + b * 3000 + c


def training_corpora() -> Iterator[str] | None:
    """The classifier's own training sources that need no download; None without Faker."""
    try:
        import faker  # noqa: F401
    except ImportError:
        return None
    from training import datasets

    def texts() -> Iterator[str]:
        for build in (datasets.own_framings, datasets.host_documents, datasets.everyday_notes, datasets.python_docs):
            for example in build():
                yield example["text"]
    return texts()


SOURCES = {"project-corpus": project_corpus, "bench-notes": bench_notes, "long-notes": long_notes,
           "hostile": hostile}


def _name(value: object) -> str:
    return "-" if value is None else str(value)


def decision(text: str) -> str:
    """Everything the detector decides on `text`, alone and as a record's content, in one line:
    for each, the signature (or -), the classifier's verdict (name or -), its score, the deciding
    piece's index, the pieces judged, the signals seen and the named doubts (or -); then the
    signals of the whole text."""
    from pymem.admission.classifier import SIGNAL_NAMES, classify
    from pymem.admission.normalise import normalize
    from pymem.admission.scanning import instruction_shaped
    from pymem.admission.signals import detect

    def signals(names) -> str:
        return "".join(str(SIGNAL_NAMES.index(n)) for n in names)

    out = []
    for value in (text, {"content": text, "kind": "note"}):
        judged = classify(value)
        name = judged.name if judged.refused else "-"
        out.append(",".join([_name(instruction_shaped(value)), name, f"{judged.score:.10f}", str(judged.piece_index),
                             str(judged.pieces_judged), signals(judged.signals), "/".join(judged.doubts) or "-"]))
    out.append(signals(detect(normalize(text))))
    return " ".join(out)
