"""The service's bound on heavy calls (pymem.service.limits.HeavyLane): which calls are heavy, at
most `slots` of them at once, light calls never waiting, the next slot to the tenant served longest ago,
and a waiter refused with PoolExhausted when no slot frees within the wait."""

from __future__ import annotations

import threading

import pytest

from pymem.errors import InvalidArguments, PoolExhausted
from pymem.service.limits import HEAVY_CHARS, HEAVY_RECORDS, HeavyLane, default_heavy_calls, is_heavy

WAIT = 60.0  # long enough never to expire in these tests on any machine; the refusal test sets its own


def test_what_is_heavy():
    vector = [0.5] * 384
    assert is_heavy({"records": [{"id": str(i), "content": "x"} for i in range(HEAVY_RECORDS)]})
    assert not is_heavy({"records": [{"id": str(i), "content": "x", "embedding": vector}
                                     for i in range(HEAVY_RECORDS - 1)]})
    assert is_heavy({"record": {"content": "a" * HEAVY_CHARS}})
    assert is_heavy({"record": {"content": "a" * (HEAVY_CHARS // 2), "note": ["b" * (HEAVY_CHARS // 2)]}})
    assert not is_heavy({"query": "quarterly budget", "top_k": 10, "vector": vector})
    assert not is_heavy({"limit": 20}) and not is_heavy(None) and not is_heavy({})


def test_default_is_half_the_cores_at_least_one():
    assert default_heavy_calls(1) == 1 and default_heavy_calls(2) == 1 and default_heavy_calls(16) == 8


@pytest.mark.parametrize("slots", [0, -1, True, "2", 1.5])
def test_a_bad_slot_count_is_refused(slots):
    with pytest.raises(InvalidArguments):
        HeavyLane(slots, WAIT)


def _hold(lane: HeavyLane, tenant: str, entered: threading.Event, release: threading.Event,
          order: list[str] | None = None) -> threading.Thread:
    def run() -> None:
        with lane.slot(tenant, True):
            if order is not None:
                order.append(tenant)
            entered.set()
            release.wait(WAIT)
    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _wait_for_waiters(lane: HeavyLane, n: int) -> None:
    for _ in range(6000):  # polled, not timed: each check is immediate
        with lane._cond:
            if len(lane._waiting) >= n:
                return
        threading.Event().wait(0.01)
    raise AssertionError(f"{n} waiter(s) never queued")


def test_light_calls_pass_a_full_lane_and_heavy_ones_wait_for_a_slot():
    lane = HeavyLane(1, WAIT)
    entered, release = threading.Event(), threading.Event()
    holder = _hold(lane, "a", entered, release)
    assert entered.wait(WAIT)
    with lane.slot("b", False):  # a light call is not held up
        assert lane.running() == 1
    second_in, second_release = threading.Event(), threading.Event()
    second = _hold(lane, "b", second_in, second_release)
    _wait_for_waiters(lane, 1)
    assert not second_in.is_set() and lane.running() == 1
    release.set()
    holder.join(WAIT)
    assert second_in.wait(WAIT)
    second_release.set()
    second.join(WAIT)
    assert lane.running() == 0


def test_the_next_slot_goes_to_the_tenant_served_longest_ago():
    lane = HeavyLane(1, WAIT)
    order: list[str] = []
    entered, release = threading.Event(), threading.Event()
    first = _hold(lane, "noisy", entered, release, order)
    assert entered.wait(WAIT)
    events = {name: (threading.Event(), threading.Event()) for name in ("noisy-2", "quiet")}
    again = _hold(lane, "noisy", events["noisy-2"][0], events["noisy-2"][1], order)  # queues first
    _wait_for_waiters(lane, 1)
    quiet = _hold(lane, "quiet", events["quiet"][0], events["quiet"][1], order)  # queues second
    _wait_for_waiters(lane, 2)
    release.set()
    first.join(WAIT)
    assert events["quiet"][0].wait(WAIT)
    assert order == ["noisy", "quiet"], "the quiet tenant went before the noisy tenant's second call"
    events["quiet"][1].set()
    quiet.join(WAIT)
    assert events["noisy-2"][0].wait(WAIT)
    events["noisy-2"][1].set()
    again.join(WAIT)
    assert order == ["noisy", "quiet", "noisy"] and lane.running() == 0


def test_a_waiter_with_no_slot_in_time_gets_pool_exhausted_and_the_lane_is_unchanged():
    lane = HeavyLane(1, 0.2)
    entered, release = threading.Event(), threading.Event()
    holder = _hold(lane, "a", entered, release)
    assert entered.wait(WAIT)
    ran = []
    with pytest.raises(PoolExhausted) as caught:
        with lane.slot("b", True):
            ran.append(True)
    assert not ran and caught.value.retry_after >= 1 and "nothing was done" in str(caught.value)
    assert lane.running() == 1 and not lane._waiting
    release.set()
    holder.join(WAIT)
    with lane.slot("b", True):
        assert lane.running() == 1
    assert lane.running() == 0
