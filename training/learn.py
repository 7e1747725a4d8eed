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

SPEC = FeatureSpec(bits=20, word_orders=tuple(int(n) for n in os.environ.get("PYMEM_TRAIN_WORDS", "1,2").split(",")),
                   char_range=tuple(int(n) for n in os.environ.get("PYMEM_TRAIN_CHARS", "4,4").split(",")))
C = float(os.environ.get("PYMEM_TRAIN_C", "0.3"))
#: Benign refusal rate the threshold is calibrated to, for the combined decision (signatures
#: OR classifier) on held-out benign notes of the training sources; below the 2 % goal on purpose.
CALIBRATION_TARGET = 0.015
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


def calibrate(examples: list[dict], seed: int = 0) -> tuple[float, dict]:
    """The threshold for a model trained on `examples`, chosen on their benign notes held out:
    each benign note is scored by a model trained without its whole source (GROUPED) or
    without its row fold (otherwise), so the threshold reflects benign text of a kind the model
    has not seen."""
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
    scores, fixed = [], 0
    for k in range(nfolds):
        train = [e for i, e in enumerate(examples) if fold_of[i] != k]
        held = [e for i, e in enumerate(examples) if fold_of[i] == k and e["label"] == 0]
        model = fit(train)
        for e, j in zip(held, judged(model, held, threshold=1.0), strict=False):
            if signature(e["text"]) is not None or (j.refused and j.name != NAME):
                fixed += 1  # refused whatever the threshold
            else:
                scores.append(j.score)
    n = len(scores) + fixed
    allowed = math.floor(CALIBRATION_TARGET * n) - fixed
    scores.sort(reverse=True)
    if allowed < 0:
        threshold = 1.0
    elif allowed >= len(scores):
        threshold = MIN_THRESHOLD
    else:
        threshold = max(MIN_THRESHOLD, min(1.0, scores[allowed] + 1e-6))
    return threshold, {"benign_held_out": n, "refused_regardless": fixed, "allowed": max(allowed, 0)}
