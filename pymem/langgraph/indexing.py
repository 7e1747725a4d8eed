"""LangGraph's index configuration: which text of a value is embedded, and with what.

`index={"dims": ..., "embed": ..., "fields": [...]}` as LangGraph documents it: `fields` are
JSON paths into the value ("$" = the whole value as JSON, the default; "a.b", "list[*].text",
"list[0]", "{a,b}"), and a put's own `index` (a list of paths, or False) overrides them for that
item. Texts are extracted with LangGraph's own path functions, so the same paths select the same
texts as in LangGraph's stores. `embed` may be a LangChain `Embeddings`, a function of a list of
texts (sync or async), a provider string, or a pymem `Embedder`.

pymem keeps one vector per item: an item with several texts is embedded text by text and stored
as the normalised mean of those vectors (LangGraph's stores keep one vector per text and score an
item by its best one). An item with one text, the common case, is stored as that text's vector.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from langgraph.store.base import ensure_embeddings, get_text_at_path, tokenize_path

from ..errors import InvalidArguments

__all__ = ["Index", "combine"]


class _EmbedderFunction:
    """A pymem Embedder (`embed(texts)`) as the function of texts LangGraph accepts."""

    def __init__(self, embedder: Any):
        self.embedder = embedder

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        return [list(v) for v in self.embedder.embed(list(texts))]


class Index:
    """A checked index configuration: the dimension, the embeddings, the default paths."""

    def __init__(self, config: Mapping[str, Any], *, store_dim: int):
        if not isinstance(config, Mapping):
            raise InvalidArguments(f"index must be an object with dims and embed, got {type(config).__name__}")
        unknown = set(config) - {"dims", "embed", "fields"}
        if unknown:
            raise InvalidArguments(f"unknown index keys: {', '.join(sorted(map(str, unknown)))}; "
                                   "known: dims, embed, fields")
        dims = config.get("dims")
        if isinstance(dims, bool) or not isinstance(dims, int):
            raise InvalidArguments("index dims must be an integer")
        if dims != store_dim:
            raise InvalidArguments(f"index dims is {dims} but this pymem store holds {store_dim}-dimensional "
                                   "embeddings (PYMEM_EMBEDDING_DIM, fixed when the schema was created)")
        embed = config.get("embed")
        if embed is None:
            raise InvalidArguments("index embed is required (Embeddings, a function of texts, or a pymem Embedder)")
        if hasattr(embed, "embed") and not hasattr(embed, "embed_documents") and not callable(embed):
            embed = _EmbedderFunction(embed)
        self.dims = dims
        self.embeddings = ensure_embeddings(embed)
        fields = config.get("fields") or ["$"]
        if isinstance(fields, str) or not all(isinstance(f, str) and f for f in fields):
            raise InvalidArguments("index fields must be a list of JSON paths")
        self.fields = [(f, _tokens(f)) for f in fields]

    def texts(self, value: Mapping[str, Any], index: Any) -> list[str]:
        """The texts of a value to embed: under the put's own paths (a list), none (False), or
        under the configured fields (None)."""
        if index is False:
            return []
        if index is None:
            paths = self.fields
        elif isinstance(index, (list, tuple)) and all(isinstance(p, str) and p for p in index):
            paths = [(p, _tokens(p)) for p in index]
        else:
            raise InvalidArguments("a put's index must be None, False or a list of JSON paths")
        out: list[str] = []
        for _path, tokens in paths:
            out.extend(t for t in get_text_at_path(value, tokens) if isinstance(t, str))
        return out

    def check_vectors(self, vectors: Any, count: int) -> list[list[float]]:
        vectors = list(vectors)
        if len(vectors) != count:
            raise InvalidArguments(f"the embeddings returned {len(vectors)} vectors for {count} texts")
        return [[float(x) for x in v] for v in vectors]


def _tokens(path: str) -> Any:
    return path if path == "$" else tokenize_path(path)


def combine(vectors: Sequence[Sequence[float]]) -> list[float] | None:
    """One vector for an item: its only vector, or the normalised mean of its texts' vectors."""
    if not vectors:
        return None
    if len(vectors) == 1:
        return list(vectors[0])
    total = [0.0] * len(vectors[0])
    for v in vectors:
        norm = math.sqrt(math.fsum(x * x for x in v)) or 1.0
        for i, x in enumerate(v):
            total[i] += x / norm
    return [x / len(vectors) for x in total]
