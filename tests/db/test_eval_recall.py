"""`pymem eval recall` on a tiny LoCoMo-shaped conversation written for this test (the real data
set is read from outside the repository at run time, never copied in)."""

from __future__ import annotations

import json

import pytest

from benchmarks.eval_recall import format_report, load_locomo, run
from pymem.errors import InvalidArguments

CONVERSATION = {
    "speaker_a": "Ana", "speaker_b": "Ben",
    "session_1_date_time": "1:56 pm on 8 May, 2023",
    "session_1": [
        {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a grey kitten called Pixel last weekend."},
        {"speaker": "Ben", "dia_id": "D1:2", "text": "Lovely! I started learning the cello in April."},
        {"speaker": "Ana", "dia_id": "D1:3", "text": "Work is busy, we ship the billing release on Friday.",
         "blip_caption": "a photo of a whiteboard"},
    ],
    "session_2_date_time": "10:37 am on 27 June, 2023",
    "session_2": [
        {"speaker": "Ben", "dia_id": "D2:1", "text": "My cello teacher says my bowing has improved."},
        {"speaker": "Ana", "dia_id": "D2:2", "text": "Pixel knocked a plant off the shelf this morning."},
        {"speaker": "Ben", "dia_id": "D2:3", "text": "We hiked up Snowdon on Saturday, the view was amazing."},
    ],
    "qa": [
        {"question": "What is the name of Ana's kitten?", "answer": "Pixel", "evidence": ["D1:1"], "category": 4},
        {"question": "Which instrument does Ben play?", "answer": "cello", "evidence": ["D1:2", "D2:1"], "category": 1},
        {"question": "When did Ben hike Snowdon?", "answer": "June 2023", "evidence": ["D2:3"], "category": 2},
        {"question": "What is Ana's favourite colour?", "adversarial_answer": "blue", "evidence": [], "category": 5},
    ],
}


@pytest.fixture
def locomo_dir(tmp_path):
    (tmp_path / "1.json").write_text(json.dumps(CONVERSATION), encoding="utf-8")
    return tmp_path


def test_loading_keeps_the_answerable_questions_and_every_turn(locomo_dir):
    (conv,) = load_locomo(locomo_dir)
    assert [t.dia_id for t in conv.turns] == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2", "D2:3"]
    assert conv.turns[2].text.endswith("[shares a photo: a photo of a whiteboard]")
    assert len(conv.questions) == 3 and conv.sessions[2].month == 6


def test_a_folder_without_conversations_is_refused(tmp_path):
    with pytest.raises(InvalidArguments, match="no LoCoMo"):
        load_locomo(tmp_path)
    (tmp_path / "x.json").write_text("[1, 2]")
    with pytest.raises(InvalidArguments, match="not a LoCoMo conversation"):
        load_locomo(tmp_path)


@pytest.mark.slow
def test_the_evaluation_runs_pymem_beside_the_baselines(store, locomo_dir):
    report = run(store, locomo_dir, database="pymem_eval_recall_test")
    assert report["turns"] == 6 and report["questions"] == 3 and report["refused"] == 0
    table = report["table"]
    assert set(table) == {"pymem recall", "BM25", "raw cosine", "BM25 + cosine (RRF)"}
    # three easy questions over six turns: every method finds an evidence turn in its top 5
    for method, values in table.items():
        assert values["all:any@5"] == 1.0, (method, values)
    assert report["deliver_evidence_rate"] == 1.0 and report["deliver_empty_rate"] == 0.0
    assert set(report["query_ms_p50"]) == {"embed", "recall", "deliver"}
    text = format_report(report)
    assert "pymem recall" in text and "BM25 + cosine (RRF)" in text and "deliver (defaults)" in text
