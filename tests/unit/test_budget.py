"""The token budget: a block never exceeds it, and says when it left something out."""

from __future__ import annotations

import datetime as dt

import pytest

from pymem import InvalidArguments
from pymem.delivery import ApproxTokenCounter
from pymem.delivery.budget import fit
from pymem.delivery.envelope import DeliveredItem, DigestEntry, render

T0 = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)
COUNTER = ApproxTokenCounter()


def items(section, n, words=20):
    return [DeliveredItem(section, f"{section}-{i}", T0, "s-1", T0, "user_asserted", "user",
                          " ".join(["invoice"] * words)) for i in range(n)]


DIGEST = [DigestEntry(f"s-{i}", T0, None, "chat", "Invoices") for i in range(6)]
ENVELOPE = COUNTER.count(render([], [], [], omitted=15, total=15, budget=10**5))  # the empty block, with a notice


@pytest.mark.parametrize("extra", [0, 10, 40, 100, 250, 5000])
def test_never_over_budget_and_says_when_it_truncated(extra):
    budget = ENVELOPE + extra
    fitted = fit(DIGEST, items("hot", 3), items("recalled", 6), budget=budget, counter=COUNTER)
    assert fitted.tokens == COUNTER.count(fitted.text) <= budget
    kept = len(fitted.digest) + len(fitted.hot) + len(fitted.recalled)
    assert kept + fitted.omitted == 15
    if fitted.omitted:
        assert f"[truncated: {fitted.omitted} of 15 entries left out to stay within the {budget}-token budget]" \
            in fitted.text
    else:
        assert "[truncated" not in fitted.text


def test_priority_hot_then_recalled_then_digest_and_a_long_item_does_not_block_short_ones():
    long = DeliveredItem("recalled", "long", T0, None, None, "user_asserted", "user", "word " * 400)
    fitted = fit(DIGEST, items("hot", 2, words=5), [long, *items("recalled", 2, words=5)], budget=ENVELOPE + 330,
                 counter=COUNTER)
    assert [i.id for i in fitted.hot] == ["hot-0", "hot-1"]
    assert [i.id for i in fitted.recalled] == ["recalled-0", "recalled-1"] and fitted.omitted >= 1


def test_a_budget_below_the_envelope_is_refused():
    with pytest.raises(InvalidArguments, match="cannot hold even the envelope"):
        fit(DIGEST, items("hot", 1), [], budget=ENVELOPE - 40, counter=COUNTER)
    for bad in (0, -5, True, 2.5, 10**9):
        with pytest.raises(InvalidArguments):
            fit([], [], [], budget=bad, counter=COUNTER)


_AWKWARD = ["plain words here", "  indented line", "\tTabbed\t\tline", "12 345 6789", " 42 leading space",
            "camelCaseIdentifierHere", "ÜBER naïve café", "日本語のテキスト", "emoji 🎉🎉 ok", "a_b-c.d/e", "",
            "   ", "x", "\r\n", "SHOUTING", "base64+/Zm9vYmFy==", "trailing spaces   ", "0"]


@pytest.mark.parametrize("seed", range(40))
def test_the_default_counter_is_additive_over_the_line_starts_fitting_splits_at(seed):
    """fit counts a candidate block line by line (each distinct line once), and the default counter
    counts any text line by line: that must equal the estimate of the whole text counted in one
    pass, for any mix of lines, numbers, whitespace and scripts."""
    import random

    from pymem.delivery.budget import _block_counter
    from pymem.delivery.tokens import _count_whole

    rng = random.Random(seed)
    text = "".join(rng.choice(_AWKWARD) + rng.choice(["\n", "\n\n", "\n  ", " \n", "\r\n", ""])
                   for _ in range(rng.randint(1, 40)))
    assert _block_counter(COUNTER)(text) == COUNTER.count(text) == _count_whole(text)
    block = render(DIGEST, items("hot", 2), items("recalled", rng.randint(0, 8), words=rng.randint(1, 30)),
                   omitted=3, total=15, budget=999)
    assert _block_counter(COUNTER)(block) == COUNTER.count(block) == _count_whole(block)


class _WholeBlocks:
    """The default counter's count, but not the default counter: fit counts every block whole."""

    name = "whole"

    def count(self, text):
        return COUNTER.count(text)


@pytest.mark.parametrize("extra", [0, 7, 40, 123, 400])
def test_fitting_line_by_line_keeps_exactly_what_counting_whole_blocks_keeps(extra):
    budget = ENVELOPE + extra
    recalled = items("recalled", 5) + items("recalled", 3, words=3) + items("recalled", 2, words=90)
    args = (DIGEST, items("hot", 2), recalled)
    fast, slow = fit(*args, budget=budget, counter=COUNTER), fit(*args, budget=budget, counter=_WholeBlocks())
    assert (fast.text, fast.tokens, fast.omitted) == (slow.text, slow.tokens, slow.omitted)
