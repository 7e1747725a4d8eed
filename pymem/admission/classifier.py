"""The learned, offline check beside the named signatures: is this note written to the agent?

Pure and dependency-free: a linear model over hashed word and character n-grams
(pymem.admission.model, weights in `classifier_v1.bin` beside this module, shipped in the wheel)
and named structural signals (pymem.admission.signals), reading the gate's one normalisation
(pymem.admission.normalise). Training code, data manifest and the leave-one-source-out report
live in the repository's `training/`.

A note is judged as a whole *and* piece by piece (pymem.admission.pieces: the strings of a
record, the lines, fields, cells and sentences of a text), so an instruction hidden in the middle
of a long, ordinary document is judged on its own. It is refused when, in the whole or in any
one piece,

- a combination of structural signals that ordinary notes do not produce is present (refused
  under that signal's name, e.g. `signal.addressed_to_agent`), or
- the model's score reaches the threshold (refused as `classifier.v1`).

Then what a model over the visible words cannot see (pymem.admission.detector): text hidden in
the note (tag characters, base64, hex, URL encoding, rot13 ...) decoded and judged as pieces of
its own, refused as `hidden.<encoding>` when it holds an instruction; misspellings of the
override vocabulary read back and the signatures tried again; and the named doubts of a note
that is not refused (`Judgement.doubts`: hidden prose, a record redirection, a bare tool action,
an instruction in a data field, a decisive signal the score does not back), which the write gate
holds rather than admits.

The reported score is the model's highest over the whole, its pieces and its decoded pieces,
whatever decided.

    >>> classify({"content": "The user prefers tea in the afternoon."}).refused
    False
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from .detector import beyond_words, default_band
from .model import Model, default_model
from .normalise import fold, normalize
from .pieces import MAX_PIECES, TOO_DEEP, TooDeep, pieces, strings
from .signals import SIGNAL_NAMES, decisive, detect

__all__ = ["MODEL_NAME", "SIGNAL_NAMES", "TOO_DEEP", "Judgement", "classify", "score", "default_threshold",
           "detect_signals"]

#: Stable name of the model's refusals, as audited.
MODEL_NAME = "classifier.v1"


@dataclass(frozen=True, slots=True)
class Judgement:
    """The classifier's verdict on one note.

    `name` is the stable name a refusal is audited under (`classifier.v1`, a `signal.*` name, or
    `structure.too_deep`), None when the note passes. `score` is the model's highest score over
    the note and its pieces (0..1); `threshold` the one applied. `piece_index` says which text
    decided or scored highest (0 = the whole note, k = its k-th piece) and `piece_digest` is
    "sha256:" + the SHA-256 of that normalised text: audit records carry the digest, never the
    text. `signals` lists every structural signal seen anywhere in the note. `doubts` names what
    the detector is unsure of in a note it does not refuse, most telling first (a decisive signal
    the score does not back, `hidden.<encoding>`, `shape.*`: pymem.admission.detector); the write
    gate holds such a note in quarantine, as it does one whose score lies in its doubt band.
    """

    refused: bool
    name: str | None
    score: float
    threshold: float
    piece_index: int
    piece_digest: str
    signals: tuple[str, ...]
    pieces_judged: int
    doubts: tuple[str, ...] = ()


def _digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


def classify(value: Any, *, threshold: float | None = None, model: Model | None = None,
             band: float | None = None) -> Judgement:
    """Judge a note: a string, or any nesting of dicts (keys included), lists, tuples and sets
    of strings (other scalars are ignored). `threshold` defaults to the model's calibrated one,
    `band` (the lower edge of the doubt band, pymem.admission.detector.default_band) to the one
    calibrated with it."""
    model = model or default_model()
    limit = model.threshold if threshold is None else float(threshold)
    if not 0.0 <= limit <= 1.0:
        raise ValueError("threshold must be between 0 and 1")
    low = min(limit, default_band(model) if band is None else float(band))
    if low < 0.0:
        raise ValueError("band must be between 0 and the threshold")
    try:
        parts = list(strings(value))
    except (TooDeep, RecursionError):
        return Judgement(True, TOO_DEEP, 1.0, limit, 0, _digest(""), (), 0)
    judged = _judge(parts, model, limit)
    if judged.refused and judged.name not in SIGNAL_NAMES:
        return judged
    final: Judgement = beyond_words(judged, parts, model, limit, low, _judge)
    return final


def _judge(parts: list[str], model: Model, limit: float) -> Judgement:
    """The model and its structural signals over the whole note and its pieces."""
    whole = normalize("\n".join(parts))
    if not whole:
        return Judgement(False, None, 0.0, limit, 0, _digest(""), (), 0)
    try:
        units, in_full = _units(whole, parts)
    except TooDeep:
        return Judgement(True, TOO_DEEP, 1.0, limit, 0, _digest(""), (), 0)

    # Signals are local patterns: a piece of a text can only show a signal the whole shows, so
    # pieces are searched for those alone (none at all, for most notes). The strings of a JSON
    # text are unescaped and unquoted first, so their pieces are searched in full.
    seen = detect(whole)
    best, best_at, decided = -1.0, 0, None
    anywhere = set(seen)
    for k, unit in enumerate(units):
        found = seen if k == 0 else detect(unit) if k in in_full else (detect(unit, seen) if seen else ())
        anywhere.update(found)
        if decided is None:
            name = decisive(found, unit)
            if name is not None:
                decided = (name, k)
        s = model.score(fold(unit), found)
        if s > best:
            best, best_at = s, k
    signals = tuple(n for n in SIGNAL_NAMES if n in anywhere)
    if decided is not None:
        name, at = decided
        return Judgement(True, name, best, limit, at, _digest(units[at]), signals, len(units))
    refused = best >= limit
    return Judgement(refused, model.name if refused else None, best, limit, best_at, _digest(units[best_at]), signals,
                     len(units))


def _units(whole: str, parts: list[str]) -> tuple[list[str], set[int]]:
    """The whole note and its pieces, and which of them come from a JSON text (searched in full
    for signals). A JSON text is read as a record whether it is the whole note or one string in
    it (a record's `content` holding a JSON document): its strings become pieces of their own."""
    units = [whole, *pieces(whole)]
    in_full = set(range(1, len(units))) if whole[:1] in ("{", "[") else set()
    if len(parts) > 1:
        known = set(units)
        for part in parts:
            if part.lstrip()[:1] not in ("{", "["):
                continue
            text = normalize(part)
            for unit in (text, *pieces(text)):
                if unit not in known and len(units) <= MAX_PIECES:
                    known.add(unit)
                    in_full.add(len(units))
                    units.append(unit)
    return units, in_full


def default_threshold() -> float:
    """The calibrated threshold shipped with the model (what `classify` applies by default)."""
    return default_model().threshold


def detect_signals(text: str) -> tuple[str, ...]:
    """The structural signals present in `text` (normalised first), in SIGNAL_NAMES order."""
    return detect(normalize(text))


def score(text: str) -> float:
    """The model's highest score (0..1) over `text` and its pieces, without a decision."""
    return classify(text, threshold=1.0).score
