"""Hashed word and character n-grams, with a hash that is the same in every process.

Python's `hash()` of a str or bytes is salted per process, so it cannot index a weight table
that was trained elsewhere. Words are hashed with CRC-32 (zlib, in the standard library: stable,
fast, and a bigram's hash is one extra call); character 4-grams are read as little-endian
32-bit integers and spread with a multiplicative hash, which needs no call per 4-gram.

A text becomes two sets of bucket indices, one for word n-grams and one for character n-grams;
each set counts once per feature (presence, not frequency) and is weighted by 1/sqrt(size) so a
long text does not score higher just for being long. The training code uses this same module,
so what is learned is exactly what is scored.
"""

from __future__ import annotations

import itertools
import re
import sys
from array import array
from dataclasses import dataclass
from typing import Any
from zlib import crc32

__all__ = ["FeatureSpec", "extract"]

# Version 1 reads Latin words only (other scripts' letters are skipped); version 2 also reads words
# of other alphabets (Cyrillic, Greek ... after look-alike folding) and each CJK character as a word
# of its own, since those scripts do not separate words with spaces.
_TOKENS = {
    1: re.compile(r"[a-z0-9_]+(?:'[a-z]+)?|[^\w\s]"),
    2: re.compile(r"[a-z0-9_]+(?:'[a-z]+)?|[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]"
                  r"|[^\W\d_\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+|[^\w\s]"),
}


@dataclass(frozen=True, slots=True)
class FeatureSpec:
    """How a text is turned into bucket indices; stored with the weights it was trained with."""

    bits: int = 20
    word_orders: tuple[int, ...] = (1, 2)
    char_range: tuple[int, ...] = (4, 4)
    #: How words are read (`_TOKENS`): 1 Latin words only, 2 every script.
    tokens: int = 1

    @property
    def mask(self) -> int:
        return (1 << self.bits) - 1

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"bits": self.bits, "word_orders": list(self.word_orders),
                               "char_range": list(self.char_range)}
        if self.tokens != 1:
            out["tokens"] = self.tokens
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FeatureSpec:
        tokens = int(data.get("tokens", 1))
        if tokens not in _TOKENS:
            raise ValueError(f"unknown tokenisation {tokens}")
        return cls(int(data["bits"]), tuple(int(n) for n in data["word_orders"]),
                   tuple(int(n) for n in data["char_range"]), tokens)


# Distinct seeds per feature family so that the word "ing" and the character trigram "ing" land
# in different buckets.
_WORD_SEED = (0x57, 0x5A17, 0x9E37)
_CHAR_SEED = 0xC4A2
_BIG_ENDIAN = sys.byteorder == "big"


def word_buckets(text: str, spec: FeatureSpec) -> set[int]:
    # Each distinct token and token pair is hashed once: a long text repeats most of them, and the
    # de-duplication runs in C (a set of the tokens, of the pairs) where the hashing runs in Python.
    mask = spec.mask
    tokens = _TOKENS[spec.tokens].findall(text)
    seed = _WORD_SEED[0]
    table = {t: crc32(t.encode(), seed) for t in set(tokens)}
    hashes = list(map(table.__getitem__, tokens))
    out: set[int] = set()
    orders = spec.word_orders
    if 1 in orders:
        out.update(h & mask for h in table.values())
    if 2 in orders and len(hashes) > 1:
        out.update((crc32(b"\x01", h) ^ (g * 0x9E3779B1)) & mask for h, g in set(itertools.pairwise(hashes)))
    if 3 in orders and len(hashes) > 2:
        out.update((crc32(b"\x02", h) ^ (g * 0x85EBCA6B) ^ (k * 0xC2B2AE35)) & mask
                   for h, g, k in set(zip(hashes, hashes[1:], hashes[2:], strict=False)))
    return out


def char_buckets(text: str, spec: FeatureSpec) -> set[int]:
    data = b" " + text.encode() + b" "
    mask = spec.mask
    lo, hi = spec.char_range
    out: set[int] = set()
    size = len(data)
    for n in range(lo, hi + 1):
        if n == 4:
            out.update(_quad_buckets(data, spec.bits))
            continue
        seed = _CHAR_SEED + n
        out.update(crc32(data[i:i + n], seed) & mask for i in range(size - n + 1))
    return out


def _quad_buckets(data: bytes, bits: int) -> set[int]:
    """Buckets of every 4-byte window: the window read as a little-endian uint32, spread by a
    multiplicative (Fibonacci) hash, top `bits` bits kept. Four offset views of the bytes cover
    every window without a Python-level call per window, and each distinct window (a set of the
    views' integers, built in C) is hashed once."""
    shift = 32 - bits
    windows: set[int] = set()
    for offset in range(4):
        usable = (len(data) - offset) // 4 * 4
        if usable <= 0:
            continue
        words = array("I")
        words.frombytes(data[offset:offset + usable])
        if _BIG_ENDIAN:
            words.byteswap()
        windows.update(words)
    return {((x * 0x9E3779B1) & 0xFFFFFFFF) >> shift for x in windows}


def extract(text: str, spec: FeatureSpec) -> tuple[set[int], set[int]]:
    """The word-n-gram buckets and the character-n-gram buckets of a folded text."""
    return word_buckets(text, spec), char_buckets(text, spec)
