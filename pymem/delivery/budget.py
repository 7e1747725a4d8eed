"""Fitting a delivery into its token budget, visibly.

Entries are considered in priority order: hot memories (delivered every turn), then recalled
memories best first, then the digest's sessions newest first. Each is kept if the whole block,
rendered with it, still fits; otherwise it is left out and the next is tried, so one long memory
does not push out several short ones. Whenever anything is left out the block carries a notice
saying how many entries, inside the envelope. The final block is counted again as a whole, and
the last kept entry is dropped until it fits: the block never exceeds the budget by the counter's
own measure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..errors import InvalidArguments
from .envelope import DeliveredItem, DigestEntry, render
from .tokens import TokenCounter

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


def _render(keep: list, total: int, omitted: int, budget: int) -> str:
    digest = [e for e in keep if isinstance(e, DigestEntry)]
    hot = [e for e in keep if isinstance(e, DeliveredItem) and e.section == "hot"]
    recalled = [e for e in keep if isinstance(e, DeliveredItem) and e.section == "recalled"]
    return render(digest, hot, recalled, omitted=omitted, total=total, budget=budget)


def fit(digest: Sequence[DigestEntry], hot: Sequence[DeliveredItem], recalled: Sequence[DeliveredItem], *,
        budget: int, counter: TokenCounter) -> Fitted:
    """The largest block (greedy, in priority order) that `counter` says fits in `budget` tokens."""
    if isinstance(budget, bool) or not isinstance(budget, int) or not MIN_BUDGET <= budget <= MAX_BUDGET:
        raise InvalidArguments(f"budget must be an integer number of tokens between {MIN_BUDGET} and {MAX_BUDGET}")
    entries: list = [*hot, *recalled, *digest]
    total = len(entries)
    everything = _render(entries, total, 0, budget)
    if counter.count(everything) <= budget:
        keep = entries
    else:
        # sized with the notice for the largest count it can show, so the final notice fits too
        empty = _render([], total, total, budget)
        if counter.count(empty) > budget:
            raise InvalidArguments(f"a budget of {budget} tokens cannot hold even the envelope "
                                   f"({counter.count(empty)} tokens by {counter.name})")
        keep = []
        for entry in entries:
            if counter.count(_render(keep + [entry], total, total, budget)) <= budget:
                keep.append(entry)
    while True:
        omitted = total - len(keep)
        text = _render(keep, total, omitted, budget)
        tokens = counter.count(text)
        if tokens <= budget or not keep:
            break
        keep.pop()
    if tokens > budget:
        raise InvalidArguments(f"a budget of {budget} tokens cannot hold even the envelope ({tokens} tokens)")
    return Fitted(text=text, tokens=tokens,
                  digest=[e for e in keep if isinstance(e, DigestEntry)],
                  hot=[e for e in keep if isinstance(e, DeliveredItem) and e.section == "hot"],
                  recalled=[e for e in keep if isinstance(e, DeliveredItem) and e.section == "recalled"],
                  omitted=total - len(keep))
