"""How well the write gate's content check does on data it was not tuned on (`pymem eval admission`).

The evaluation is leave-one-source-out: for each source of the training data in turn, the
classifier is trained and its threshold and doubt band calibrated on every *other* source, then
the held-out source is judged whole (its payloads, and its benign notes). What is reported per
source is what the gate decides: refused (the signatures OR the classifier, beside each alone),
held for review (doubtful: quarantined), or admitted.

The package ships the result of the last full run (`classifier_loso.json`, beside the weights it
was computed with) and this module only reads it: it runs no training code and starts no process.
Recomputing it is a training command, from a source checkout with the `train` extra:
`python -m training.evaluate_loso` (see the repository's `training/`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from importlib import resources
from typing import Any

from ..errors import PymemError
from .model import weights_sha256

__all__ = ["HeldOutSource", "AdmissionEvaluation", "evaluate_admission", "COMMITTED_FILE", "RECOMPUTE_COMMAND"]

#: The committed result, beside the weights it was computed with.
COMMITTED_FILE = "classifier_loso.json"
#: How the committed result is recomputed (a training command, from a source checkout).
RECOMPUTE_COMMAND = "python -m training.evaluate_loso"


@dataclass(frozen=True)
class HeldOutSource:
    """One source held out: its payloads and benign notes, and how many of each the gate refused
    (`*_refused` = signatures or classifier; `*_signatures`, `*_classifier` = each alone) and held
    for review (`*_held`: not refused but doubtful, so quarantined). `threshold` and `band` are the
    refusal threshold and the doubt band's lower edge calibrated without this source."""

    source: str
    threshold: float
    payloads: int
    payloads_refused: int
    payloads_signatures: int
    payloads_classifier: int
    benign: int
    benign_refused: int
    benign_signatures: int
    benign_classifier: int
    band: float | None = None
    payloads_held: int = 0
    benign_held: int = 0

    @property
    def payload_rate(self) -> float | None:
        return self.payloads_refused / self.payloads if self.payloads else None

    @property
    def stopped_rate(self) -> float | None:
        """The share of payloads refused or held: kept out of every prompt."""
        return (self.payloads_refused + self.payloads_held) / self.payloads if self.payloads else None

    @property
    def benign_rate(self) -> float | None:
        return self.benign_refused / self.benign if self.benign else None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "payload_rate": self.payload_rate, "stopped_rate": self.stopped_rate,
                "benign_rate": self.benign_rate}


@dataclass(frozen=True)
class AdmissionEvaluation:
    """The leave-one-source-out table. `recomputed` says whether it was computed now or read
    from the committed result; `note` says why not, or what was run. The goals: every source's
    payloads refused (`payload_goal`) and refused or held (`stopped_goal`); benign notes refused
    at most `benign_goal` and held at most `benign_held_goal` overall."""

    sources: tuple[HeldOutSource, ...]
    recomputed: bool
    note: str
    payload_goal: float
    benign_goal: float
    weights_sha256: str | None
    meta: dict[str, Any] = field(default_factory=dict)
    stopped_goal: float | None = None
    benign_held_goal: float | None = None

    @property
    def benign(self) -> int:
        return sum(s.benign for s in self.sources)

    @property
    def benign_refused(self) -> int:
        return sum(s.benign_refused for s in self.sources)

    @property
    def benign_held(self) -> int:
        return sum(s.benign_held for s in self.sources)

    @property
    def benign_rate(self) -> float | None:
        return self.benign_refused / self.benign if self.benign else None

    @property
    def benign_held_rate(self) -> float | None:
        return self.benign_held / self.benign if self.benign else None

    @property
    def missed_goals(self) -> list[str]:
        """The goals not met, one line each (empty: all met)."""
        out = [f"{s.source}: {100 * s.payload_rate:.1f} % of payloads refused (goal {100 * self.payload_goal:.0f} %)"
               for s in self.sources if s.payload_rate is not None and s.payload_rate < self.payload_goal]
        if self.stopped_goal is not None:
            out += [f"{s.source}: {100 * s.stopped_rate:.1f} % of payloads refused or held "
                    f"(goal {100 * self.stopped_goal:.0f} %)"
                    for s in self.sources if s.stopped_rate is not None and s.stopped_rate < self.stopped_goal]
        if self.benign_rate is not None and self.benign_rate > self.benign_goal:
            out.append(f"benign notes refused: {100 * self.benign_rate:.1f} % "
                       f"(goal at most {100 * self.benign_goal:.0f} %)")
        held = self.benign_held_rate
        if self.benign_held_goal is not None and held is not None and held > self.benign_held_goal:
            out.append(f"benign notes held: {100 * held:.1f} % (goal at most {100 * self.benign_held_goal:.0f} %)")
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "recomputed": self.recomputed, "note": self.note, "weights_sha256": self.weights_sha256,
            "goals": {"payloads_refused": self.payload_goal, "payloads_stopped": self.stopped_goal,
                      "benign_refused": self.benign_goal, "benign_held": self.benign_held_goal},
            "sources": [s.to_json() for s in self.sources],
            "benign": self.benign, "benign_refused": self.benign_refused, "benign_rate": self.benign_rate,
            "benign_held": self.benign_held, "benign_held_rate": self.benign_held_rate,
            "missed_goals": self.missed_goals, "meta": self.meta,
        }


def _optional(value: Any) -> float | None:
    return None if value is None else float(value)


def _from_json(data: Any, *, recomputed: bool, note: str) -> AdmissionEvaluation:
    try:
        sources = tuple(
            HeldOutSource(
                source=str(s["source"]), threshold=float(s["threshold"]),
                payloads=int(s["payloads"]["n"]), payloads_refused=int(s["payloads"]["combined"]),
                payloads_signatures=int(s["payloads"]["signatures"]),
                payloads_classifier=int(s["payloads"]["classifier"]),
                benign=int(s["benign"]["n"]), benign_refused=int(s["benign"]["combined"]),
                benign_signatures=int(s["benign"]["signatures"]), benign_classifier=int(s["benign"]["classifier"]),
                band=_optional(s.get("band")), payloads_held=int(s["payloads"].get("held", 0)),
                benign_held=int(s["benign"].get("held", 0)))
            for s in data["sources"])
        goals = data["goals"]
        return AdmissionEvaluation(sources, recomputed, note, float(goals["payloads_refused"]),
                                   float(goals["benign_refused"]), data.get("weights_sha256"),
                                   dict(data.get("meta") or {}), _optional(goals.get("payloads_stopped")),
                                   _optional(goals.get("benign_held")))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise PymemError(f"the leave-one-source-out result is malformed ({type(exc).__name__})") from None


def _committed() -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(resources.files(__package__).joinpath(COMMITTED_FILE)
                                          .read_text(encoding="utf-8"))
        return data
    except (FileNotFoundError, ValueError):
        raise PymemError(f"the committed leave-one-source-out result ({COMMITTED_FILE}) is missing or "
                         "unreadable") from None


def evaluate_admission() -> AdmissionEvaluation:
    """The leave-one-source-out table of the gate's content check: the committed result.

    Reads the result shipped with the classifier's weights; nothing is trained, run or
    downloaded. The note says whether it was computed for the shipped weights. Recomputing is
    a training command (`RECOMPUTE_COMMAND`), which rewrites the committed file.
    """
    committed = _committed()
    note = f"committed result (training/REPORT.md; recomputed by `{RECOMPUTE_COMMAND}` in a source checkout)"
    if committed.get("weights_sha256") != weights_sha256():
        note += "; it was computed for other weights than the shipped ones"
    return _from_json(committed, recomputed=False, note=note)
