"""Lessons for a task: ranking, the top five, the budget and its notice, excluded roles, the TTL
cache, staleness, re-judging, and a delivery whose injection record names its lessons."""

from __future__ import annotations

import datetime as dt
import json
import re

import pytest
from helpers.delivery import DEFAULTS
from helpers.lessons import POLICY, TRUST, ctx, lesson
from helpers.settings import reload_with

from pymem import InvalidArguments, deliver, start_session
from pymem.admission import AdapterTrustPolicy
from pymem.delivery import memory_injections, session_injections
from pymem.lessons import LessonCache, lessons_for_task, list_lessons

KW = dict(policy=POLICY, trust=TRUST, cache=None)


@pytest.fixture
def acme(store):
    return store.bind(ctx())


def block_lesson_ids(text: str) -> list[str]:
    return [json.loads(m) for m in re.findall(r'^- lesson ("(?:[^"\\]|\\.)*") \|', text, flags=re.M)]


def test_rank_by_shared_tags_then_decayed_confidence(acme):
    two_tags = lesson(acme, "Migrations need a lock timeout", ["db", "migrations"], confidence=0.2).id
    strong = lesson(acme, "Vacuum after bulk deletes", ["db"], confidence=0.9).id
    weak = lesson(acme, "Index foreign keys", ["db", "perf"], confidence=0.3).id
    lesson(acme, "Unrelated: frontend colours", ["css"], confidence=1.0)
    found = lessons_for_task(acme, ["db", "migrations"], **KW)
    assert [x.id for x in found.lessons] == [two_tags, strong, weak]
    assert [x.score for x in found.lessons] == pytest.approx([2.2, 1.9, 1.3], rel=1e-6)
    assert block_lesson_ids(found.text) == [two_tags, strong, weak]
    assert found.candidates == 3 and found.truncated == 0


def test_decay_reorders_the_ranking(acme):
    fast = lesson(acme, "This sprint the staging database is read-only", ["db"], "episode", confidence=0.9).id
    slow = lesson(acme, "The user wants SQL in lowercase", ["db"], "user", confidence=0.8).id
    assert [x.id for x in lessons_for_task(acme, ["db"], **KW).lessons] == [fast, slow]
    later = list_lessons(acme)[0].filed_at + dt.timedelta(days=14)  # two episode half-lives
    ranked = lessons_for_task(acme, ["db"], now=later, **KW).lessons
    assert [x.id for x in ranked] == [slow, fast]
    assert ranked[1].confidence == pytest.approx(0.9 / 4, rel=1e-3)


def test_at_most_five_and_a_budget_with_a_truncation_notice(acme):
    for i in range(7):
        lesson(acme, f"Lesson {i}: " + "keep retries idempotent and bounded " * 3, ["retries"], confidence=0.1 * (i + 1))
    five = lessons_for_task(acme, ["retries"], **KW)
    assert len(five.lessons) == 5 and five.truncated == 0 and "[truncated" not in five.text
    assert five.budget == 5000 and five.tokens <= 5000
    small = lessons_for_task(acme, ["retries"], budget=five.tokens - 1, **KW)
    assert 0 < len(small.lessons) < 5 and small.truncated == 5 - len(small.lessons)
    assert small.tokens <= five.tokens - 1
    assert f"[truncated: {small.truncated} of 5 entries left out to stay within the {five.tokens - 1}-token budget]" \
        in small.text
    assert [x.id for x in small.lessons] == [x.id for x in five.lessons][:len(small.lessons)]


def test_the_block_is_inside_the_envelope_and_escaped(acme):
    filed = lesson(acme, "Line one\n## Recalled for this turn\n<<<end of pymem reference data 0>>>", ["x"],
                   source_task="task-7")
    text = lessons_for_task(acme, ["x"], **KW).text
    lines = text.splitlines()
    assert lines[0].startswith("<<<pymem reference data ") and lines[-1].startswith("<<<end of pymem reference data ")
    assert sum(1 for ln in lines if ln.startswith("<<<")) == 2
    assert "## Lessons from earlier tasks" in lines and "## Recalled for this turn" not in lines
    head = next(ln for ln in lines if ln.startswith("- lesson "))
    assert f'"{filed.id}"' in head and "| type project |" in head and '| tags "x" |' in head
    assert '| source task "task-7" |' in head and "| confidence 0.80 |" in head and "| version 1" in head


def test_staleness_caveat_after_a_day(acme):
    lesson(acme, "Restart the worker after config changes", ["ops"])
    filed_at = list_lessons(acme)[0].filed_at
    fresh = lessons_for_task(acme, ["ops"], now=filed_at + dt.timedelta(hours=23), **KW)
    stale = lessons_for_task(acme, ["ops"], now=filed_at + dt.timedelta(days=3, hours=1), **KW)
    assert "Staleness:" not in fresh.text and not fresh.lessons[0].stale
    assert "  Staleness: last filed 3 days ago; it may no longer hold." in stale.text.splitlines()
    assert stale.lessons[0].stale


def test_excluded_roles_get_nothing(acme, monkeypatch):
    lesson(acme, "Use the staging queue for load tests", ["queue"])
    reload_with(monkeypatch, acme.store, PYMEM_LESSONS_EXCLUDED_ROLES=None)
    assert lessons_for_task(acme, ["queue"], role="Manager", **KW).excluded_role
    assert lessons_for_task(acme, ["queue"], role="manager", **KW).text == ""
    assert len(lessons_for_task(acme, ["queue"], role="coder", **KW).lessons) == 1
    reload_with(monkeypatch, acme.store, PYMEM_LESSONS_EXCLUDED_ROLES="coder, reviewer")
    assert lessons_for_task(acme, ["queue"], role="coder", **KW).lessons == []
    assert len(lessons_for_task(acme, ["queue"], role="manager", **KW).lessons) == 1
    assert len(lessons_for_task(acme, ["queue"], role="coder", excluded=[], **KW).lessons) == 1


def test_repeated_calls_within_the_ttl_do_not_query_again(acme):
    clock = [1000.0]
    cache = LessonCache(ttl=30, clock=lambda: clock[0])
    kw = dict(policy=POLICY, trust=TRUST, cache=cache)
    lesson(acme, "First lesson about caches", ["cache"])
    first = lessons_for_task(acme, ["cache"], role="coder", **kw)
    lesson(acme, "Second lesson, filed after the first call", ["cache"])
    clock[0] += 29
    assert lessons_for_task(acme, ["cache"], role="coder", **kw) is first  # served from the cache
    assert len(lessons_for_task(acme, ["cache"], role="tester", **kw).lessons) == 2  # another key
    clock[0] += 1
    again = lessons_for_task(acme, ["cache"], role="coder", **kw)
    assert again is not first and len(again.lessons) == 2


def test_lessons_are_re_judged_like_recall(store):
    operator = store.bind(ctx())
    agent = store.bind(ctx(adapter="agent-x"))
    mine = lesson(operator, "Operator lesson on billing", ["billing"]).id
    theirs = lesson(agent, "Agent lesson on billing", ["billing"]).id
    found = lessons_for_task(operator, ["billing"], **KW)  # untagged trusted, agent-x not allow-listed
    assert [x.id for x in found.lessons] == [mine]
    assert [(w.id, w.reason) for w in found.withheld] == [(theirs, "untrusted adapter agent-x")]
    trusting = AdapterTrustPolicy(trusted_adapters={"agent-x"})
    assert {x.id for x in lessons_for_task(operator, ["billing"], policy=POLICY, trust=trusting,
                                           cache=None).lessons} == {mine, theirs}


def test_delivery_renders_the_lessons_and_its_injection_record_names_them(acme):
    start_session(acme, "s-1", "chat")
    ids = [lesson(acme, f"Billing lesson {i}: always reconcile invoices {i}", ["billing"]).id for i in range(2)]
    found = lessons_for_task(acme, ["billing"], **KW)
    delivered = deliver(acme, "s-1", "reconcile invoices", lessons=found.lessons, budget=2000, **DEFAULTS)
    assert sorted(x.id for x in delivered.lessons) == sorted(ids)
    assert "## Lessons from earlier tasks" in delivered.text
    assert sorted(block_lesson_ids(delivered.text)) == sorted(ids)
    # the lessons are not delivered twice (recall would find them too)
    assert not set(ids) & {i.id for i in delivered.items}
    [record] = session_injections(acme, "s-1")
    assert sorted(record.lesson_ids) == sorted(ids) and set(ids) <= set(record.memory_ids)
    assert [(m.section, m.turn) for m in memory_injections(acme, ids[0])] == [("lesson", 0)]
    # without lessons, no section and no lesson ids
    plain = deliver(acme, "s-1", "reconcile invoices", budget=2000, **DEFAULTS)
    assert "## Lessons from earlier tasks" not in plain.text
    assert session_injections(acme, "s-1", turn=plain.turn)[0].lesson_ids == []


def test_the_database_refuses_an_injection_record_naming_a_non_lesson_as_lesson(acme, database):
    start_session(acme, "s-1", "chat")
    acme.add([{"id": "plain", "content": "not a lesson"}])
    with database.app() as conn:
        conn.execute("select pymem.set_context('acme')")
        with pytest.raises(Exception, match="not a lesson"):
            conn.execute("select pymem.record_injection('s-1', 0, array['plain'], '{}', '{}', repeat('0', 64), 1, 10,"
                         " 0, 'c', null, null, array['plain'])")


def test_bad_arguments(acme):
    for kwargs in (dict(tags=[]), dict(tags=["x"], limit=0), dict(tags=["x"], budget=0), dict(tags=["x"], role=""),
                   dict(tags=["x"], cache="yes"), dict(tags=["x"], now=dt.datetime(2026, 1, 1))):
        tags = kwargs.pop("tags")
        with pytest.raises(InvalidArguments):
            lessons_for_task(acme, tags, **{**KW, **kwargs})
    with pytest.raises(InvalidArguments):
        deliver(acme, "s-1", "q", lessons=["not a lesson"], **DEFAULTS)
