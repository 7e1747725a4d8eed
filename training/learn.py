"""Turning examples into the model: features, fitting, calibration, decisions.

The features come from `pymem.admission` itself (same normalisation, pieces, hashing and
signals as at run time), and every evaluation goes through `pymem.admission.classifier.classify`, so what
is measured here is what the package does.
"""

from __future__ import annotations

import math
import os
import random
from array import array
from collections import Counter

import numpy as np
from scipy.sparse import csr_matrix
from sklearn.linear_model import LogisticRegression

from pymem.admission.classifier import MODEL_NAME, classify
from pymem.admission.features import FeatureSpec, char_buckets, word_buckets
from pymem.admission.model import Model
from pymem.admission.normalise import fold, normalize
from pymem.admission.pieces import pieces
from pymem.admission.scanning import instruction_shaped
from pymem.admission.signals import SIGNAL_NAMES, detect

SPEC = FeatureSpec(bits=20, tokens=2, word_orders=tuple(int(n) for n in os.environ.get("PYMEM_TRAIN_WORDS", "1,2").split(",")),
                   char_range=tuple(int(n) for n in os.environ.get("PYMEM_TRAIN_CHARS", "4,4").split(",")))
C = float(os.environ.get("PYMEM_TRAIN_C", "0.3"))
#: Benign refusal rate the threshold is calibrated to, for the combined decision (signatures
#: OR classifier) on held-out benign notes of the training sources; below the 1 % goal on purpose.
CALIBRATION_TARGET = 0.008
#: Benign doubt rate (held for review, not refused) the doubt band is calibrated to, on the same
#: held-out benign notes; below the 3 % goal on purpose.
BAND_TARGET = 0.027
MIN_THRESHOLD = 0.5
FOLDS = 4
GROUPED = True
NAME = MODEL_NAME


def record(text: str) -> dict:
    """A note as the write gate sees it (content plus kind)."""
    return {"content": text, "kind": "fact"}


_ROWS: dict[str, tuple[list[int], list[float]]] = {}


def _row(text: str) -> tuple[list[int], list[float]]:
    if text not in _ROWS:
        _ROWS[text] = _features(text)
    return _ROWS[text]


def _features(text: str) -> tuple[list[int], list[float]]:
    norm = normalize(text)
    folded = fold(norm)
    words, chars = word_buckets(folded, SPEC), char_buckets(folded, SPEC)
    acc: dict[int, float] = {}
    for group in (words, chars):
        if group:
            v = 1.0 / math.sqrt(len(group))
            for i in group:
                acc[i] = acc.get(i, 0.0) + v
    base = 1 << SPEC.bits
    for name in detect(norm):
        acc[base + SIGNAL_NAMES.index(name)] = 1.0
    return list(acc), list(acc.values())


def training_rows(examples: list[dict]) -> tuple[list[str], list[int], list[float]]:
    """Texts, labels and weights: every note whole; the hidden payload of a poisoned document
    alone; the pieces of benign notes (every piece of a benign note is benign). Sources are
    weighted by 1/sqrt(size) and the two classes are balanced."""
    size = Counter((e["source"], e["label"]) for e in examples)
    texts, labels, weights = [], [], []
    for e in examples:
        w = 1.0 / math.sqrt(size[(e["source"], e["label"])])
        if not e.get("encoded"):
            texts.append(e["text"])
            labels.append(e["label"])
            weights.append(w)
        if e["label"] == 1 and e.get("core"):
            texts.append(e["core"])
            labels.append(1)
            weights.append(w)
        if e["label"] == 0:
            ps = pieces(normalize(e["text"]))
            for p in ps:
                texts.append(p)
                labels.append(0)
                weights.append(w / math.sqrt(len(ps)))
    wy = np.array(weights)
    y = np.array(labels)
    for cls in (0, 1):
        total = wy[y == cls].sum()
        if total:
            wy[y == cls] *= len(y) / (2 * total)
    return texts, labels, list(wy)


def matrix(texts: list[str]) -> csr_matrix:
    indptr, indices, data = [0], [], []
    for t in texts:
        cols, vals = _row(t)
        indices.extend(cols)
        data.extend(vals)
        indptr.append(len(indices))
    return csr_matrix((np.array(data, dtype=np.float64), np.array(indices, dtype=np.int64), np.array(indptr)),
                      shape=(len(texts), (1 << SPEC.bits) + len(SIGNAL_NAMES)))


def fit(examples: list[dict], threshold: float = 0.5) -> Model:
    texts, labels, weights = training_rows(examples)
    clf = LogisticRegression(C=C, solver="liblinear", max_iter=1000, random_state=0)
    clf.fit(matrix(texts), np.array(labels), sample_weight=np.array(weights))
    return to_model(clf.coef_[0], float(clf.intercept_[0]), threshold)


def to_model(coef, bias: float, threshold: float, meta: dict | None = None) -> Model:
    n = 1 << SPEC.bits
    weights = array("f", np.asarray(coef[:n], dtype=np.float32).tobytes())
    signals = {name: float(coef[n + k]) for k, name in enumerate(SIGNAL_NAMES)}
    return Model(NAME, SPEC, bias, weights, signals, threshold, meta or {})


def sparse_weights(model: Model) -> dict[int, float]:
    w = np.frombuffer(model.weights.tobytes(), dtype=np.float32)
    nz = np.nonzero(w)[0]
    return {int(i): float(w[i]) for i in nz}


_SIGNATURE_CACHE: dict[str, str | None] = {}


def signature(text: str) -> str | None:
    """The existing signature detector's verdict on a note, as the write gate calls it today."""
    if text not in _SIGNATURE_CACHE:
        _SIGNATURE_CACHE[text] = instruction_shaped(record(text))
    return _SIGNATURE_CACHE[text]


def judged(model: Model, examples: list[dict], threshold: float | None = None) -> list:
    return [classify(record(e["text"]), model=model, threshold=threshold) for e in examples]


def decide(signature_name: str | None, j, band: float) -> str:
    """The gate's three decisions from the signatures and a classifier judgement made at the
    threshold and `band` in force: "refuse", "doubt" (held in quarantine) or "admit"."""
    if signature_name is not None or j.refused:
        return "refuse"
    if j.doubts or j.score >= band:
        return "doubt"
    return "admit"


def judged_at(model: Model, examples: list[dict], threshold: float, band: float) -> list:
    return [classify(record(e["text"]), model=model, threshold=threshold, band=band) for e in examples]


def _held_out_benign(examples: list[dict], seed: int = 0) -> list[tuple[bool, float, bool, bool]]:
    """For every benign note of `examples`, judged by a model trained without its whole source
    (GROUPED) or its row fold: (refused whatever the threshold, score, a decisive signal without
    a signature, another named doubt)."""
    if GROUPED:
        groups = sorted({e["source"] for e in examples if e["label"] == 0})
        fold_of = {i: groups.index(e["source"]) if e["source"] in groups else -1 for i, e in enumerate(examples)}
        nfolds = len(groups)
    else:
        rng = random.Random(seed)
        order = list(range(len(examples)))
        rng.shuffle(order)
        fold_of = {i: k % FOLDS for k, i in enumerate(order)}
        nfolds = FOLDS
    out = []
    for k in range(nfolds):
        train = [e for i, e in enumerate(examples) if fold_of[i] != k]
        held = [e for i, e in enumerate(examples) if fold_of[i] == k and e["label"] == 0]
        model = fit(train)
        # threshold 1 and band 1: nothing is refused by its score, so every note's score and
        # named doubts are seen; a decisive signal then shows as a doubt of its own name.
        for e, j in zip(held, judged_at(model, held, 1.0, 1.0), strict=False):
            fixed = signature(e["text"]) is not None or (j.refused and j.name != NAME)
            signal = any(d.startswith("signal.") for d in j.doubts)
            other = any(not d.startswith("signal.") for d in j.doubts)
            out.append((fixed, j.score, signal, other))
    return out


def _rates(notes: list[tuple[bool, float, bool, bool]], t: float, b: float) -> tuple[int, int]:
    refused = doubt = 0
    for fixed, score, signal, other in notes:
        if fixed or score >= t or (signal and score >= b):
            refused += 1
        elif signal or other or score >= b:
            doubt += 1
    return refused, doubt


def _code_digest() -> str:
    """SHA-256 of the detector's code (pymem/admission/*.py): held-out scores depend on it."""
    import hashlib
    from pathlib import Path

    h = hashlib.sha256()
    for path in sorted((Path(__file__).resolve().parent.parent / "pymem" / "admission").glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def held_out_benign(examples: list[dict]) -> dict[str, tuple[bool, float, bool, bool]]:
    """{example id: (refused whatever the threshold, score, decisive signal, other doubt)} for every
    benign note, judged by a model trained without its source (`_held_out_benign`), cached in the
    training cache by the data's and the detector code's digests: the shipped model's calibration
    and every leave-one-source-out fold read the same scores."""
    import hashlib
    import json

    from .external import CACHE

    key = hashlib.sha256(json.dumps(examples, sort_keys=True).encode() + _code_digest().encode()
                         + json.dumps([SPEC.to_json(), C, GROUPED]).encode()).hexdigest()[:16]
    path = CACHE / f"held-out-benign-{key}.json"
    if path.exists():
        return {k: tuple(v) for k, v in json.loads(path.read_text()).items()}  # type: ignore[misc]
    benign = [e for e in examples if e["label"] == 0]
    notes = _held_out_benign(examples)
    out = {e["id"]: n for e, n in zip(benign, notes, strict=True)}
    CACHE.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out))
    return out


def choose(notes: list[tuple[bool, float, bool, bool]]) -> tuple[float, dict]:
    """The lowest threshold that refuses at most CALIBRATION_TARGET of the held-out benign
    `notes`, then the lowest band that holds at most BAND_TARGET of them without refusing more.
    Returns (threshold, {..., "band": band})."""
    n = len(notes)
    candidates = sorted({round(score + 1e-6, 6) for _, score, _, _ in notes if score + 1e-6 <= 1.0} | {MIN_THRESHOLD, 1.0})
    candidates = [c for c in candidates if c >= MIN_THRESHOLD]
    threshold = 1.0
    for t in candidates:
        if _rates(notes, t, t)[0] <= CALIBRATION_TARGET * n:
            threshold = t
            break
    band = threshold
    for b in sorted({c for c in candidates if c <= threshold} | {c / 100 for c in range(20, 50)}, reverse=True):
        refused, doubt = _rates(notes, threshold, b)
        if refused > CALIBRATION_TARGET * n or doubt > BAND_TARGET * n:
            break
        band = b
    refused, doubt = _rates(notes, threshold, band)
    return threshold, {"benign_held_out": n, "refused": refused, "held": doubt, "band": round(band, 6)}


def calibrate(examples: list[dict], scores: dict[str, tuple[bool, float, bool, bool]] | None = None) -> tuple[float, dict]:
    """The refusal threshold and the doubt band for a model trained on `examples`, chosen on
    their benign notes held out (each scored by a model trained without its source; `scores`,
    from `held_out_benign`, when already computed for a superset of `examples`)."""
    if scores is None:
        scores = held_out_benign(examples)
    return choose([scores[e["id"]] for e in examples if e["label"] == 0])
