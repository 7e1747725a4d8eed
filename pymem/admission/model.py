"""The learned linear model: its weight file, loading it, and scoring one piece of text.

The weight file (`classifier_v1.bin`, beside this module, shipped in the wheel) is one JSON header
line followed by a zlib stream of the non-zero weights: bucket indices as little-endian uint32
deltas, then the weights as little-endian int16 scaled by the header's `scale`. The header also
holds the feature spec, the bias, one weight per structural signal, and the calibrated default
threshold, so a model and the way its inputs are made travel together.

score(piece) = sigmoid(bias + sum(w[word buckets]) / sqrt(#word buckets)
                            + sum(w[char buckets]) / sqrt(#char buckets) + sum(w[signals present]))
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
import zlib
from array import array
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import PymemError
from .features import FeatureSpec, char_buckets, word_buckets

__all__ = ["Model", "ModelFileError", "load", "default_model", "weights_sha256", "shipped_threshold",
           "WEIGHTS_FILE", "encode"]

WEIGHTS_FILE = "classifier_v1.bin"
_MAGIC = b"pymem-classifier 1\n"


class ModelFileError(PymemError, ValueError):
    """The weight file is missing, truncated or of another format."""


@dataclass(frozen=True, slots=True)
class Model:
    name: str
    spec: FeatureSpec
    bias: float
    weights: array[Any]  # float32, one per bucket
    signal_weights: dict[str, float]
    threshold: float
    meta: dict[str, Any] = field(default_factory=dict[str, Any])
    #: SHA-256 (hex) of the weight file this model was read from ("" for a model built in memory).
    sha256: str = ""

    def raw(self, folded: str, signals: tuple[str, ...] = ()) -> float:
        """The model's log-odds for one folded piece of text."""
        w = self.weights
        total = self.bias
        get = w.__getitem__
        words = word_buckets(folded, self.spec)
        if words:
            total += sum(map(get, words)) / math.sqrt(len(words))
        chars = char_buckets(folded, self.spec)
        if chars:
            total += sum(map(get, chars)) / math.sqrt(len(chars))
        for name in signals:
            total += self.signal_weights.get(name, 0.0)
        return total

    def score(self, folded: str, signals: tuple[str, ...] = ()) -> float:
        """The model's probability that one folded piece is written to the agent, in [0, 1]."""
        z = self.raw(folded, signals)
        if z >= 0:
            return 1.0 / (1.0 + math.exp(-z))
        e = math.exp(z)
        return e / (1.0 + e)


def encode(*, name: str, spec: FeatureSpec, bias: float, weights: dict[int, float], signal_weights: dict[str, float],
           threshold: float, meta: dict[str, Any] | None = None) -> bytes:
    """The bytes of a weight file (used by the training script)."""
    items = sorted((i, v) for i, v in weights.items() if v != 0.0)
    peak = max((abs(v) for _, v in items), default=1.0) or 1.0
    scale = peak / 32767.0
    idx, vals, prev = array("I"), array("h"), 0
    for i, v in items:
        q = round(v / scale)
        if q == 0:
            continue
        idx.append(i - prev)
        vals.append(q)
        prev = i
    if sys.byteorder == "big":
        idx.byteswap()
        vals.byteswap()
    header = {
        "name": name, "spec": spec.to_json(), "bias": bias, "scale": scale, "count": len(idx),
        "signals": signal_weights, "threshold": threshold, "meta": meta or {},
    }
    body = zlib.compress(idx.tobytes() + vals.tobytes(), 9)
    return _MAGIC + json.dumps(header, sort_keys=True).encode() + b"\n" + body


def _decode(data: bytes) -> Model:
    if not data.startswith(_MAGIC):
        raise ModelFileError("not a pymem classifier weight file")
    try:
        head, body = data[len(_MAGIC):].split(b"\n", 1)
        header = json.loads(head)
        raw = zlib.decompress(body)
        count = int(header["count"])
        idx, vals = array("I"), array("h")
        idx.frombytes(raw[: 4 * count])
        vals.frombytes(raw[4 * count: 6 * count])
        if len(idx) != count or len(vals) != count:
            raise ModelFileError("weight file is truncated")
        if sys.byteorder == "big":
            idx.byteswap()
            vals.byteswap()
        spec = FeatureSpec.from_json(header["spec"])
        scale = float(header["scale"])
        weights = array("f", bytes(4 * (1 << spec.bits)))
        pos = 0
        for d, q in zip(idx, vals, strict=True):
            pos += d
            weights[pos] = q * scale
        return Model(
            name=str(header["name"]), spec=spec, bias=float(header["bias"]), weights=weights,
            signal_weights={str(k): float(v) for k, v in header["signals"].items()},
            threshold=float(header["threshold"]), meta=dict(header.get("meta") or {}),
            sha256=hashlib.sha256(data).hexdigest(),
        )
    except ModelFileError:
        raise
    except (ValueError, KeyError, TypeError, IndexError, zlib.error) as exc:
        raise ModelFileError(f"unreadable weight file: {exc.__class__.__name__}") from None


def load(path: str | Path) -> Model:
    """A model from a weight file on disk."""
    return _decode(Path(path).read_bytes())


@lru_cache(maxsize=1)
def _shipped() -> bytes:
    try:
        return resources.files(__package__).joinpath(WEIGHTS_FILE).read_bytes()
    except FileNotFoundError:
        raise ModelFileError(f"the shipped weight file {WEIGHTS_FILE} is missing") from None


@lru_cache(maxsize=1)
def default_model() -> Model:
    """The model shipped with the package (read once per process; its `sha256` names the file)."""
    return _decode(_shipped())


@lru_cache(maxsize=1)
def shipped_threshold() -> float:
    """The calibrated threshold stored with the shipped weights (read from the file's header only,
    without decoding the weights)."""
    data = _shipped()
    if not data.startswith(_MAGIC):
        raise ModelFileError("not a pymem classifier weight file")
    try:
        return float(json.loads(data[len(_MAGIC):].split(b"\n", 1)[0])["threshold"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ModelFileError(f"unreadable weight file: {exc.__class__.__name__}") from None


@lru_cache(maxsize=1)
def weights_sha256() -> str:
    """SHA-256 (hex) of the shipped weight file: part of the admission policy's fingerprint."""
    return hashlib.sha256(_shipped()).hexdigest()
