"""`pymem bench --admission`: what the classifier adds to the write gate's cost per note.

Offline and without a database: the gate's content check (pymem.admission.judge.check_content,
the first step of every write and of every recalled row's re-judging) runs on the same notes
twice, as it was before the classifier (the named signatures only) and as it is now (signatures,
then the classifier with its structural signals, at the default policy's threshold), interleaved
note by note so that load from elsewhere on the machine hits both alike. Each note's time is the
best of `repeat` runs, single-threaded, after a warm-up.

The notes are ordinary memory (no payloads): preferences and facts, e-mails, meeting notes,
records, JSON records and reports, generated from a fixed seed in four length bands from 50 to
2,000 characters. Benign notes are the gate's costliest case, since a note the signatures refuse
never reaches the classifier. The goal: at p50, for notes of 200 to 500 characters, at most three
times the signatures' cost (the classifier with its decoders of hidden text, its gloss of other
languages, its spelling and its shapes).
"""

from __future__ import annotations

import json
import platform
import random
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pymem.admission.classifier import MODEL_NAME
from pymem.admission.judge import check_content
from pymem.admission.model import default_model
from pymem.admission.policy import AdmissionPolicy
from pymem.admission.provenance import Provenance
from pymem.errors import InvalidArguments

__all__ = ["BANDS", "GOAL", "sample_notes", "measure", "run_admission_bench", "format_admission_report"]

#: Note lengths measured (characters, lower bound included).
BANDS = ((50, 200), (200, 500), (500, 1000), (1000, 2000))
#: The most the check may cost with the classifier, as a multiple of the signatures alone, at p50
#: for the notes of GOAL_BAND characters.
GOAL = 3.0
GOAL_BAND = "200-500"

_FIRST = ("Ana", "Ben", "Chloe", "Dev", "Elena", "Farid", "Grace", "Hugo", "Ines", "Jonas", "Kemi", "Liam", "Mara")
_LAST = ("Okafor", "Lindqvist", "Moreau", "Tanaka", "Silva", "Novak", "Brennan", "Haddad", "Kowalski", "Reyes")
_CITIES = ("Lisbon", "Osaka", "Toronto", "Nairobi", "Leeds", "Porto", "Austin", "Gdansk", "Lyon", "Pune")
_THINGS = ("the quarterly budget", "the office move", "the hiring plan", "the vendor contract", "the product launch",
           "the data migration", "the kitchen renovation", "the conference trip", "the insurance renewal")
_SENTENCES = (
    "{p} prefers {x} in the morning and asked to keep meetings short.",
    "The team agreed to finish {t} before the end of the month.",
    "{p} will send the updated figures for {t} by Thursday.",
    "Shipping to {c} was delayed by three days because of the weather.",
    "The review of {t} found two open questions about cost and timing.",
    "Revenue in {c} grew by eight percent compared with last quarter.",
    "{p} is allergic to peanuts and avoids shellfish at restaurants.",
    "Please book a table for six near the station on Friday evening.",
    "Remember that {p} moved to {c} and now works remotely on Mondays.",
    "The dentist appointment moved to Tuesday at ten in the morning.",
    "{p} forwarded the signed lease; the deposit is two months of rent.",
    "Always back up the photos to the external drive on Sundays.",
    "Action: {p} to follow up with the supplier about {t}.",
    "The system update on the laptop is scheduled for Wednesday night.",
)


def _sentence(rng: random.Random) -> str:
    return rng.choice(_SENTENCES).format(p=f"{rng.choice(_FIRST)} {rng.choice(_LAST)}", c=rng.choice(_CITIES),
                                         t=rng.choice(_THINGS), x=rng.choice(("tea", "coffee", "a walk", "quiet")))


def _prose(rng: random.Random, n: int) -> str:
    return " ".join(_sentence(rng) for _ in range(n))


def _note(rng: random.Random, size: int) -> str:
    """One ordinary note of about `size` characters, of a random kind."""
    kind = rng.randrange(5)
    n = max(1, size // 60)
    if kind == 0:  # plain note
        return _prose(rng, n)
    if kind == 1:  # e-mail
        who = rng.choice(_FIRST)
        return (f"From: {who} <{who.lower()}@example.org>\nSubject: {rng.choice(_THINGS)}\n\nHi,\n\n"
                f"{_prose(rng, n)}\n\nBest,\n{who}")
    if kind == 2:  # meeting notes
        return "Meeting notes\n" + "\n".join(f"- {_sentence(rng)}" for _ in range(n))
    if kind == 3:  # key: value record
        fields = [f"name: {rng.choice(_FIRST)} {rng.choice(_LAST)}", f"city: {rng.choice(_CITIES)}",
                  f"plan: {rng.choice(('basic', 'pro', 'team'))}"]
        return "\n".join(fields + [f"note_{k}: {_sentence(rng)}" for k in range(n)])
    return json.dumps({"id": rng.randrange(10**6), "owner": rng.choice(_FIRST), "city": rng.choice(_CITIES),
                       "history": [{"note": _sentence(rng)} for _ in range(n)]})


def sample_notes(per_band: int = 100, seed: int = 20260512) -> list[str]:
    """`per_band` ordinary notes in each length band of BANDS (deterministic for a seed)."""
    rng = random.Random(seed)
    out: list[str] = []
    for lo, hi in BANDS:
        band: list[str] = []
        while len(band) < per_band:
            text = _note(rng, rng.randint(lo, hi))
            if lo <= len(text) < hi:
                band.append(text)
        out += band
    return out


def _best(fn: Callable[[], Any], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _pct(xs: Sequence[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def _summary(before: list[float], after: list[float]) -> dict[str, Any]:
    ms = lambda x: round(1e3 * x, 4)  # noqa: E731
    return {
        "notes": len(before),
        "signatures_p50_ms": ms(_pct(before, 0.5)), "signatures_p99_ms": ms(_pct(before, 0.99)),
        "signatures_mean_ms": ms(statistics.mean(before)),
        "with_classifier_p50_ms": ms(_pct(after, 0.5)), "with_classifier_p99_ms": ms(_pct(after, 0.99)),
        "with_classifier_mean_ms": ms(statistics.mean(after)),
        "ratio_p50": round(_pct(after, 0.5) / _pct(before, 0.5), 3),
        "ratio_p99": round(_pct(after, 0.99) / _pct(before, 0.99), 3),
        "ratio_mean": round(statistics.mean(after) / statistics.mean(before), 3),
    }


def measure(notes: Iterable[str], *, repeat: int = 3, policy: AdmissionPolicy | None = None) -> dict[str, Any]:
    """Per note, the content check without and with the classifier; summaries per length band
    and overall (times in ms, ratios = with classifier / signatures only)."""
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise InvalidArguments("repeat must be a positive integer")
    policy = policy if policy is not None else AdmissionPolicy()
    provenance = Provenance.from_json({"origin": "user_asserted", "source": "chat"})
    records = [{"content": text, "kind": "note"} for text in notes]
    if not records:
        raise InvalidArguments("no notes to measure")
    default_model()  # loaded once, outside the timings
    for record in records[:10]:
        check_content(record, provenance, policy, classifier=False)
        check_content(record, provenance, policy)
    before: list[float] = []
    after: list[float] = []
    lengths: list[int] = []
    refused = 0
    for record in records:
        before.append(_best(lambda: check_content(record, provenance, policy, classifier=False), repeat))  # noqa: B023 - called within this iteration
        after.append(_best(lambda: check_content(record, provenance, policy), repeat))  # noqa: B023 - called within this iteration
        lengths.append(len(record["content"]))
        refused += check_content(record, provenance, policy) is not None
    bands = []
    for lo, hi in BANDS:
        idx = [i for i, n in enumerate(lengths) if lo <= n < hi]
        if idx:
            bands.append({"chars": f"{lo}-{hi}", **_summary([before[i] for i in idx], [after[i] for i in idx])})
    return {"bands": bands, "all": _summary(before, after), "refused": refused, "repeat": repeat}


def run_admission_bench(*, per_band: int = 100, repeat: int = 3,
                        progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The admission section of `pymem bench`: the content check's cost per note, signatures only
    vs signatures + classifier, on ordinary notes (see the module docstring)."""
    if isinstance(per_band, bool) or not isinstance(per_band, int) or per_band < 1:
        raise InvalidArguments("per_band must be a positive integer")
    if progress is not None:
        progress(f"admission: {per_band * len(BANDS)} notes, best of {repeat} runs each")
    t0 = time.perf_counter()
    result = measure(sample_notes(per_band), repeat=repeat)
    load = None
    try:
        import os

        load = round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        pass
    return {"classifier": MODEL_NAME, "threshold": AdmissionPolicy().classifier_threshold, "goal_ratio": GOAL,
            "python": f"{platform.python_implementation()} {platform.python_version()}",
            "machine": platform.machine(), "load_average": load, "seconds": round(time.perf_counter() - t0, 1),
            **result}


def format_admission_report(report: dict[str, Any]) -> str:
    """The admission section as a table."""
    lines = [f"admission: the gate's content check per note, signatures only (before) vs signatures + "
             f"{report['classifier']} (threshold {report['threshold']:.3f}); ordinary notes, best of "
             f"{report['repeat']} runs, {report['python']} on {report['machine']}, load average "
             f"{report['load_average']}",
             ""]
    header = (f"{'chars':>10} {'notes':>6}  {'before p50':>10} {'before p99':>10}  {'after p50':>10} {'after p99':>10} "
              f" "
              f"{'x p50':>6} {'x p99':>6} {'x mean':>6}")
    lines += [header, "-" * len(header)]
    for row in [*report["bands"], {"chars": "all", **report["all"]}]:
        lines.append(f"{row['chars']:>10} {row['notes']:>6}  {row['signatures_p50_ms']:>8.3f}ms "
                     f"{row['signatures_p99_ms']:>8.3f}ms  "
                     f"{row['with_classifier_p50_ms']:>8.3f}ms {row['with_classifier_p99_ms']:>8.3f}ms  "
                     f"{row['ratio_p50']:>5.2f}x {row['ratio_p99']:>5.2f}x {row['ratio_mean']:>5.2f}x")
    [goal_row] = [row for row in report["bands"] if row["chars"] == GOAL_BAND] or [report["all"]]
    ratio = goal_row["ratio_p50"]
    lines += ["",
              f"cost per note with the classifier: {ratio:.2f}x the signatures' (p50, {goal_row['chars']} characters); "
              f"{report['all']['ratio_mean']:.2f}x (mean, all notes); goal at most {report['goal_ratio']:.0f}x: "
              + ("met" if ratio <= report["goal_ratio"] else "MISSED"),
              f"ordinary notes refused by the check: {report['refused']} of {report['all']['notes']}"]
    return "\n".join(lines)
