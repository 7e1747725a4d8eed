"""How well the write gate's content check does on data it was not tuned on (`pymem eval admission`).

The evaluation is leave-one-source-out: for each source of the training data in turn, the
classifier is trained and its threshold calibrated on every *other* source, then the held-out
source is judged whole (its payloads, and its benign notes). What is reported per source is what
the gate applies, the signatures OR the classifier, beside each alone.

The package ships the result of the last full run (`classifier_loso.json`, written by the
repository's `training/evaluate_loso.py` with the shipped weights). Recomputing needs three
things a plain install does not have: the training code (the source repository's `training/`),
the `train` extra (scikit-learn and friends) and the pinned source data, cached once by
`python training/fetch_data.py`. Nothing here downloads anything: without them, the committed
result is returned with a note saying why.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from importlib import resources
from importlib.util import find_spec
from pathlib import Path
from typing import Any, cast

from ..errors import InvalidArguments, PymemError
from .model import weights_sha256

__all__ = ["HeldOutSource", "AdmissionEvaluation", "evaluate_admission", "COMMITTED_FILE", "TRAIN_MODULES"]

#: The committed result, beside the weights it was computed with.
COMMITTED_FILE = "classifier_loso.json"
#: What the `train` extra installs (import names): all are needed to recompute.
TRAIN_MODULES = ("sklearn", "numpy", "scipy", "faker", "yaml")
_TRAINING = Path(__file__).resolve().parents[2] / "training"


@dataclass(frozen=True)
class HeldOutSource:
    """One source held out: its payloads and benign notes, and how many of each the gate refused
    (`*_refused` = signatures or classifier; `*_signatures`, `*_classifier` = each alone).
    `threshold` is the one calibrated without this source."""

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

    @property
    def payload_rate(self) -> float | None:
        return self.payloads_refused / self.payloads if self.payloads else None

    @property
    def benign_rate(self) -> float | None:
        return self.benign_refused / self.benign if self.benign else None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "payload_rate": self.payload_rate, "benign_rate": self.benign_rate}


@dataclass(frozen=True)
class AdmissionEvaluation:
    """The leave-one-source-out table. `recomputed` says whether it was computed now or read
    from the committed result; `note` says why not, or what was run."""

    sources: tuple[HeldOutSource, ...]
    recomputed: bool
    note: str
    payload_goal: float
    benign_goal: float
    weights_sha256: str | None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def benign(self) -> int:
        return sum(s.benign for s in self.sources)

    @property
    def benign_refused(self) -> int:
        return sum(s.benign_refused for s in self.sources)

    @property
    def benign_rate(self) -> float | None:
        return self.benign_refused / self.benign if self.benign else None

    @property
    def missed_goals(self) -> list[str]:
        """The goals not met, one line each (empty: all met)."""
        out = [f"{s.source}: {100 * s.payload_rate:.1f} % of payloads refused (goal {100 * self.payload_goal:.0f} %)"
               for s in self.sources if s.payload_rate is not None and s.payload_rate < self.payload_goal]
        if self.benign_rate is not None and self.benign_rate > self.benign_goal:
            out.append(f"benign notes refused: {100 * self.benign_rate:.1f} % (goal at most "
                       f"{100 * self.benign_goal:.0f} %)")
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "recomputed": self.recomputed, "note": self.note, "weights_sha256": self.weights_sha256,
            "goals": {"payloads_refused": self.payload_goal, "benign_refused": self.benign_goal},
            "sources": [s.to_json() for s in self.sources],
            "benign": self.benign, "benign_refused": self.benign_refused, "benign_rate": self.benign_rate,
            "missed_goals": self.missed_goals, "meta": self.meta,
        }


def _from_json(data: Any, *, recomputed: bool, note: str) -> AdmissionEvaluation:
    try:
        sources = tuple(
            HeldOutSource(
                source=str(s["source"]), threshold=float(s["threshold"]),
                payloads=int(s["payloads"]["n"]), payloads_refused=int(s["payloads"]["combined"]),
                payloads_signatures=int(s["payloads"]["signatures"]),
                payloads_classifier=int(s["payloads"]["classifier"]),
                benign=int(s["benign"]["n"]), benign_refused=int(s["benign"]["combined"]),
                benign_signatures=int(s["benign"]["signatures"]), benign_classifier=int(s["benign"]["classifier"]))
            for s in data["sources"])
        goals = data["goals"]
        return AdmissionEvaluation(sources, recomputed, note, float(goals["payloads_refused"]),
                                   float(goals["benign_refused"]), data.get("weights_sha256"),
                                   dict(data.get("meta") or {}))
    except (KeyError, TypeError, ValueError) as exc:
        raise PymemError(f"the leave-one-source-out result is malformed ({type(exc).__name__})") from None


def _committed() -> dict[str, Any]:
    try:
        return cast("dict[str, Any]",
                    json.loads(resources.files(__package__).joinpath(COMMITTED_FILE).read_text(encoding="utf-8")))
    except (FileNotFoundError, ValueError):
        raise PymemError(f"the committed leave-one-source-out result ({COMMITTED_FILE}) is missing or "
                         "unreadable") from None


def _cached_data_missing() -> list[str]:
    """The pinned source wheels not in the training cache (asks training/fetch_data.py, offline)."""
    done = subprocess.run([sys.executable, str(_TRAINING / "fetch_data.py"), "--check"], capture_output=True,
                          text=True, check=False)
    if done.returncode == 0:
        return []
    return [line for line in done.stdout.splitlines() if line.strip()] or ["the pinned source data"]


def why_not_recomputable() -> str | None:
    """Why the evaluation cannot be recomputed here, or None when it can."""
    if not (_TRAINING / "evaluate_loso.py").is_file():
        return "the training code is not here (it lives in the source repository's training/, not in the wheel)"
    missing = [m for m in TRAIN_MODULES if find_spec(m) is None]
    if missing:
        return f"the train extra is not installed (missing {', '.join(missing)}; pip install -e '.[train]')"
    absent = _cached_data_missing()
    if absent:
        return ("the pinned source data is not cached (" + "; ".join(absent) + "); `python training/fetch_data.py` "
                "downloads it once, this command never does")
    return None


def _recompute(sources: Sequence[str] | None, progress: Callable[[str], None] | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="pymem-loso-") as tmp:
        out = Path(tmp) / "loso.json"
        cmd = [sys.executable, str(_TRAINING / "evaluate_loso.py"), "--json", str(out)]
        if sources:
            cmd += ["--only", *sources]
        else:
            cmd += ["--out", str(Path(tmp) / "REPORT.md")]
        with subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) as proc:
            tail: list[str] = []
            for line in proc.stderr:  # type: ignore[union-attr]
                line = line.rstrip()
                tail = ([*tail, line])[-20:]
                if progress is not None and line:
                    progress(line)
        if proc.returncode != 0 or not out.is_file():
            raise PymemError("recomputing the evaluation failed:\n" + "\n".join(tail))
        return cast("dict[str, Any]", json.loads(out.read_text(encoding="utf-8")))


def evaluate_admission(*, recompute: bool | None = None, sources: Sequence[str] | None = None,
                       progress: Callable[[str], None] | None = None) -> AdmissionEvaluation:
    """The leave-one-source-out table of the gate's content check.

    `recompute`: None (default) recomputes when the training code, the `train` extra and the
    cached source data are all here, and otherwise returns the committed result with a note
    saying why; True insists (InvalidArguments saying what is missing); False returns the
    committed result. `sources` holds out only those (a quick look; needs recomputing).
    `progress` receives the training's progress lines. Recomputing every source trains about
    fifty models: expect minutes, not seconds.
    """
    if recompute is not None and not isinstance(recompute, bool):
        raise InvalidArguments("recompute must be true, false or None")
    if sources is not None:
        if isinstance(sources, str) or not all(isinstance(s, str) and s for s in sources) or not sources:
            raise InvalidArguments("sources must be a non-empty list of source names")
        if recompute is False:
            raise InvalidArguments("holding out chosen sources means recomputing; drop recompute=False")
    committed = _committed()
    if sources is not None:
        known = [s["source"] for s in committed.get("sources", [])]
        unknown = [s for s in sources if s not in known]
        if unknown:
            raise InvalidArguments(f"unknown source(s) {', '.join(u[:40] for u in unknown)}; known: {', '.join(known)}")
    reason = None if recompute is False else why_not_recomputable()
    if recompute is True and reason is not None:
        raise InvalidArguments(f"cannot recompute: {reason}")
    if sources is not None and reason is not None:
        raise InvalidArguments(f"cannot hold out chosen sources: {reason}")
    if recompute is False or reason is not None:
        shipped = weights_sha256()
        note = "committed result (training/REPORT.md), not recomputed: " + (reason or "as asked")
        if committed.get("weights_sha256") != shipped:
            note += "; it was computed for other weights than the shipped ones"
        return _from_json(committed, recomputed=False, note=note)
    data = _recompute(sources, progress)
    held = ", ".join(sources) if sources else "every source"
    return _from_json(data, recomputed=True, note=f"recomputed now from the training data ({held} held out in turn)")
