"""pymem.aio mirrors the sync surface: every verb is a coroutine with its sync twin's parameters
(names, kinds, defaults), so a parameter added to a sync verb fails here until the async one has it."""

from __future__ import annotations

import asyncio
import inspect

import pytest

import pymem
from pymem import aio, delivery, facts, lessons
from pymem.admission import quarantine

TWINS = {
    "admit": pymem.admit, "list_quarantined": quarantine.list_quarantined,
    "get_quarantined": quarantine.get_quarantined, "release_quarantined": quarantine.release_quarantined,
    "reject_quarantined": quarantine.reject_quarantined, "recall": pymem.recall, "deliver": pymem.deliver, "start_session": pymem.start_session,
    "end_session": pymem.end_session, "supersede": pymem.supersede, "erase": pymem.erase,
    "erase_session": delivery.erase_session, "list_sessions": delivery.list_sessions,
    "file_lesson": lessons.file_lesson, "list_lessons": lessons.list_lessons,
    "lessons_for_task": lessons.lessons_for_task, "deliver_with_lessons": lessons.deliver_with_lessons,
    "publish": facts.publish, "subscribe": facts.subscribe,
}

#: The Memories methods that do no I/O, so stay plain methods.
NO_IO = {"describe_store", "prepare_row"}


def shape(fn) -> list[tuple[str, object, object]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


def test_every_verb_function_is_exported_and_has_a_twin():
    verbs = [n for n in aio.__all__ if inspect.isfunction(getattr(aio, n))]
    assert sorted(verbs) == sorted(TWINS)


@pytest.mark.parametrize("name", sorted(TWINS))
def test_each_verb_is_a_coroutine_with_its_sync_twins_parameters(name):
    verb = getattr(aio, name)
    assert inspect.iscoroutinefunction(verb)
    assert shape(verb) == shape(TWINS[name])


def test_each_memories_method_mirrors_the_sync_one():
    public = [n for n, _ in inspect.getmembers(pymem.Memories, inspect.isfunction) if not n.startswith("_")]
    for name in public:
        method = getattr(aio.Memories, name, None)
        assert method is not None, f"pymem.aio.Memories has no {name}"
        assert inspect.iscoroutinefunction(method) == (name not in NO_IO), name
        assert shape(method) == shape(getattr(pymem.Memories, name)), name


def test_outside_a_bridged_call_cpu_work_runs_where_it_is_called():
    from pymem import bridge

    assert not bridge.in_bridge()
    assert bridge.blocking(lambda x: x + 1, 1) == 2

    async def main():
        return await bridge.run(lambda: (bridge.in_bridge(), bridge.blocking(lambda: bridge.in_bridge())))
    assert asyncio.run(main()) == (True, False)  # the CPU work ran on a worker thread, outside the bridge


def test_the_bridge_awaits_what_waits_and_steps_what_does_not():
    from pymem import bridge

    async def instant():
        return 1

    async def waits():
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return 2

    async def fails():
        await asyncio.sleep(0)
        raise ValueError("from the loop")

    def verb():
        got = [bridge.await_(instant()), bridge.await_(waits())]
        with pytest.raises(ValueError, match="from the loop"):
            bridge.await_(fails())
        return got

    async def main():
        return await bridge.run(verb)
    assert asyncio.run(main()) == [1, 2]


def test_a_cancelled_bridged_call_unwinds_its_code_and_raises_cancelled():
    from pymem import bridge

    unwound = []

    def verb():
        try:
            bridge.await_(asyncio.sleep(60))
        finally:
            unwound.append(True)

    async def main():
        task = asyncio.create_task(bridge.run(verb))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    asyncio.run(main())
    assert unwound == [True]
