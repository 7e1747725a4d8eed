"""Fitting a delivery into its token budget, visibly.

Entries are considered in priority order: hot memories (delivered every turn), then lessons of
earlier tasks best first (when asked for), then recalled memories best first, then the digest's
sessions newest first. Each is kept if the whole block,
rendered with it, still fits; otherwise it is left out and the next is tried, so one long memory
does not push out several short ones. Whenever anything is left out the block carries a notice
saying how many entries, inside the envelope. The final block is counted again as a whole, and
the last kept entry is dropped until it fits: the block never exceeds the budget by the counter's
own measure.

Counting each candidate block whole made fitting quadratic in the block (a deliver of 10 recalled
memories and 20 digest sessions counted about 25 blocks of up to 30 entries, most of a
deliver's time). The default counter (ApproxTokenCounter) is additive over a split just after a
newline that is followed by a non-space character (no piece it counts crosses such a point: a
whitespace run ends there, and a number there has no space before it), and consecutive
candidate blocks share most of their lines, so the greedy pass counts the block line by line,
each distinct line once per fit (and the default counter keeps the counts of the short lines a
process has seen: consecutive deliveries repeat most of them). The final block is still counted
whole by the counter itself.
Any other counter is called on each whole block, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidArguments
from .envelope import DeliveredItem, DeliveredLesson, DigestEntry, assemble, entry_lines
from .tokens import LINE_START, ApproxTokenCounter, TokenCounter

__all__ = ["Fitted", "fit", "MIN_BUDGET", "MAX_BUDGET"]

MIN_BUDGET = 1
MAX_BUDGET = 1_000_000


@dataclass(frozen=True)
class Fitted:
    text: str
    tokens: int
    digest: list[DigestEntry]
    hot: list[DeliveredItem]
    recalled: list[DeliveredItem]
    omitted: int
    lessons: list[DeliveredLesson] = field(default_factory=list)


def _sections(keep: list[Any], present: tuple[bool, bool, bool, bool]) -> tuple[Any, ...]:
    """(digest, hot, recalled, lessons) of `keep`; a section that is not present is None."""
    digest = [e for e in keep if isinstance(e, DigestEntry)]
    hot = [e for e in keep if isinstance(e, DeliveredItem) and e.section == "hot"]
    recalled = [e for e in keep if isinstance(e, DeliveredItem) and e.section == "recalled"]
    lessons = [e for e in keep if isinstance(e, DeliveredLesson)]
    return tuple(part if shown else None
                 for part, shown in zip((digest, hot, recalled, lessons), present, strict=False))


def _renderer(entries: list[Any], present: tuple[bool, bool, bool, bool]) -> Callable[[list[Any], int, int], str]:
    """render(...) of a subset of `entries` with `omitted` of them left out, each entry rendered to
    its lines once (pymem.delivery.envelope.assemble gives the text render gives)."""
    total = len(entries)
    lines = {id(e): entry_lines(e) for e in entries}

    def block(keep: list[Any], omitted: int, budget: int) -> str:
        digest, hot, recalled, lessons = (None if part is None else [lines[id(e)] for e in part]
                                          for part in _sections(keep, present))
        return assemble(digest, hot, recalled, lessons, omitted=omitted, total=total, budget=budget)

    return block


def _block_counter(counter: TokenCounter) -> Callable[[str], int]:
    """`counter.count`, or for the default counter the same count summed over the block's lines,
    each distinct line counted once per fit (see the module docstring)."""
    if type(counter) is not ApproxTokenCounter:
        return counter.count
    seen: dict[str, int] = {}

    def count(text: str) -> int:
        total = 0
        for part in LINE_START.split(text):
            n = seen.get(part)
            if n is None:
                n = seen[part] = counter.count(part)
            total += n
        return total

    return count


def fit(digest: Sequence[DigestEntry] | None, hot: Sequence[DeliveredItem] | None,
        recalled: Sequence[DeliveredItem] | None, *, lessons: Sequence[DeliveredLesson] | None = None,
        budget: int, counter: TokenCounter) -> Fitted:
    """The largest block (greedy, in priority order) that `counter` says fits in `budget` tokens.
    A section given as None is not part of the block at all (see pymem.delivery.envelope.render)."""
    if isinstance(budget, bool) or not isinstance(budget, int) or not MIN_BUDGET <= budget <= MAX_BUDGET:
        raise InvalidArguments(f"budget must be an integer number of tokens between {MIN_BUDGET} and {MAX_BUDGET}")
    present = (digest is not None, hot is not None, recalled is not None, lessons is not None)
    entries: list[Any] = [*(hot or ()), *(lessons or ()), *(recalled or ()), *(digest or ())]
    total = len(entries)
    count = _block_counter(counter)
    render = _renderer(entries, present)
    everything = render(entries, 0, budget)
    if count(everything) <= budget:
        keep = entries
    else:
        # sized with the notice for the largest count it can show, so the final notice fits too
        empty = render([], total, budget)
        if counter.count(empty) > budget:
            raise InvalidArguments(f"a budget of {budget} tokens cannot hold even the envelope "
                                   f"({counter.count(empty)} tokens by {counter.name})")
        keep = []
        for entry in entries:
            if count(render([*keep, entry], total, budget)) <= budget:
                keep.append(entry)
    while True:
        omitted = total - len(keep)
        text = render(keep, omitted, budget)
        tokens = counter.count(text)
        if tokens <= budget or not keep:
            break
        keep.pop()
    if tokens > budget:
        raise InvalidArguments(f"a budget of {budget} tokens cannot hold even the envelope ({tokens} tokens)")
    digest_kept, hot_kept, recalled_kept, lessons_kept = _sections(keep, (True, True, True, True))
    return Fitted(text=text, tokens=tokens, digest=digest_kept, hot=hot_kept, recalled=recalled_kept,
                  omitted=total - len(keep), lessons=lessons_kept)
