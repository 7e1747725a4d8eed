"""`pymem eval recall` on a tiny LoCoMo-shaped conversation written for this test (the real data
set is read from outside the repository at run time, never copied in)."""

from __future__ import annotations

import json

import pytest

from benchmarks.eval_recall import TEXT_WEIGHTS, _held_out_text_weights, _Replay, format_report, load_locomo, run
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
    if report["embedder"] == "multilingual-e5-small-q4":  # e5 fuses by score: the weight is checked held out
        weights = report["text_weight"]
        assert weights["shipped"] == 0.1 and set(weights["folds"]) == {"1"}
        assert weights["shipped_in_sample"] == {"any@5": 1.0, "any@10": 1.0}
        assert "text weight held out on 1" in text


def _replay(cosines, words, evidence, floor=0.0):
    return _Replay(cosines, words, floor, evidence, [f"m{i}" for i in range(len(cosines))])


def test_the_replay_ranks_as_score_fusion_does():
    # m0 is the evidence: the vectors put it last, the words first
    question = _replay([0.80, 0.86, 0.85, 0.84, 0.83, 0.82], {0: 4.0, 3: 1.0}, {"m0"})
    assert not question.hits(0.0, 5) and question.hits(0.0, 10)  # by cosine alone it is sixth
    assert not question.hits(0.05, 1) and question.hits(0.07, 1)  # 0.80 + w vs 0.86 + 0 (m3 gains w / 4)
    # the floor applies to the fused score: below it, the evidence is cut, however few are left
    assert not _replay([0.5, 0.9], {0: 2.0}, {"m0"}, floor=0.7).hits(0.1, 10)
    assert _replay([0.5, 0.9], {0: 2.0}, {"m0"}, floor=0.7).hits(0.25, 10)


def test_each_conversation_is_scored_at_the_weight_the_others_pick():
    # "needs": the evidence (m0) is eleventh by cosine and needs a weight of 0.07 or more to rank
    # first; "loses": it is first by cosine and ten word matches overtake it from a weight of 0.06
    needs = _replay([0.80] + [0.865] * 10, {0: 1.0}, {"m0"})
    loses = _replay([0.95] + [0.90] * 10, dict.fromkeys(range(1, 11), 1.0), {"m0"})
    assert needs.hits(0.08, 5) and not needs.hits(0.06, 10) and loses.hits(0.04, 5) and not loses.hits(0.06, 10)
    folds = _held_out_text_weights({"a": [needs], "b": [needs, needs], "c": [loses]}, 0.1)
    # a and c: the others' best weights are 0.08 and up (ties go to the one nearest the shipped 0.1);
    # b: a and c pull apart and tie, and the tie goes to 0.1 as well
    assert {name: fold["weight"] for name, fold in folds["folds"].items()} == {"a": 0.1, "b": 0.1, "c": 0.1}
    assert folds["folds"]["c"]["any@5"] == 0.0 and folds["held_out"] == {"any@5": 0.75, "any@10": 0.75}
    assert folds["by_weight"]["0.02"]["any@5"] == 0.25 and folds["by_weight"]["0.3"]["any@10"] == 0.75
    assert set(folds["by_weight"]) == {str(w) for w in TEXT_WEIGHTS}
