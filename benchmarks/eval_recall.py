"""`pymem eval recall`: find what was remembered, measured on LoCoMo, beside baselines of the same run.

LoCoMo ("Evaluating Very Long-Term Conversational Memory of LLM Agents", ACL 2024): long
multi-session conversations whose questions name the dialog turns that hold the answer. Each
conversation becomes a tenant of a scratch database, each of its sessions a pymem session, and
each turn a memory admitted through the write gate ("Speaker: text", a shared photo's caption
appended; the session's date as the memory's event time). Then, for every answerable question
(categories 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop):

- pymem `recall` (the store's default embedder, hybrid search, the calibrated floor): any@k (an
  evidence turn among the first k memories) and all@k (every evidence turn), k = 5 and 10;
- pymem `deliver` (defaults: top_k 5, budget 1000 tokens): whether the block carries an evidence
  turn, and how many blocks recalled nothing;
- computed in the same run, on the same turns: BM25 (Okapi, k1 1.5, b 0.75, lowercase words), raw
  cosine over the vectors pymem stored (the same embedder), and their reciprocal-rank fusion
  (k 60, the usual constant);
- ingest time and per-question query time (recall with its query embedding, and deliver);
- the similarity floor checked on held-out conversations: for each conversation, the floor set
  from the other ones (the 1st percentile of their questions' best cosine) and the share of its
  own questions that floor would leave without a memory;
- the hybrid text weight checked on held-out conversations (when the embedder fuses by score,
  pymem.embedder.hybrid_fusion_of): recall's ranking replayed for each weight of TEXT_WEIGHTS
  from the same cosines and the database's own BM25 scores (pymem._text_candidates); for each
  conversation, the weight the other ones pick (best any@5 + any@10) and the any@5 / any@10 it
  gives on it, beside the shipped weight's figures on all of them.

The data is read from DIR (the development half lives outside the repository); nothing of it is
copied into the project.
"""

from __future__ import annotations

import collections
import datetime as _dt
import json
import math
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pymem.context import Context
from pymem.errors import InvalidArguments, MemoryAdmissionError

from .bench import scratch_database

__all__ = ["load_locomo", "run", "format_report", "CATEGORIES", "KS", "TEXT_WEIGHTS"]

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (5, 10)
#: The text weights the held-out check replays (score fusion; see the module docstring).
TEXT_WEIGHTS = (0.02, 0.04, 0.06, 0.08, 0.1, 0.12, 0.15, 0.2, 0.25, 0.3)
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Turn:
    dia_id: str
    session: int
    text: str


@dataclass(frozen=True)
class Conversation:
    name: str
    sessions: dict[int, _dt.datetime | None]
    turns: list[Turn]
    questions: list[dict[str, Any]]


def _date(text: Any) -> _dt.datetime | None:
    """LoCoMo's "1:56 pm on 8 May, 2023" as an aware datetime (UTC), None if it does not parse."""
    if not isinstance(text, str):
        return None
    for fmt in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y"):
        try:
            return _dt.datetime.strptime(text.strip(), fmt).replace(tzinfo=_dt.UTC)
        except ValueError:
            continue
    return None


def load_locomo(directory: str | Path) -> list[Conversation]:
    """The conversations in DIR (one JSON file each, LoCoMo's layout), answerable questions only."""
    path = Path(directory)
    files = sorted(path.glob("*.json")) if path.is_dir() else []
    if not files:
        raise InvalidArguments(f"no LoCoMo conversation files (*.json) in {str(path)[:200]!r}")
    out = []
    for file in files:
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InvalidArguments(f"{file.name}: not a LoCoMo conversation ({type(exc).__name__})") from None
        if not isinstance(data, dict) or not isinstance(data.get("qa"), list):
            raise InvalidArguments(f"{file.name}: not a LoCoMo conversation (no qa list)")
        sessions: dict[int, _dt.datetime | None] = {}
        turns: list[Turn] = []
        n = 1
        while f"session_{n}_date_time" in data or f"session_{n}" in data:
            sessions[n] = _date(data.get(f"session_{n}_date_time"))
            for t in data.get(f"session_{n}") or []:
                text = f"{t.get('speaker', '')}: {t.get('text', '')}"
                if t.get("blip_caption"):
                    text += f" [shares a photo: {t['blip_caption']}]"
                turns.append(Turn(str(t["dia_id"]), n, text))
            n += 1
        questions = [q for q in data["qa"] if q.get("category") in CATEGORIES and q.get("evidence")]
        out.append(Conversation(file.stem, sessions, turns, questions))
    return out


# ----------------------------------------------------------------------------------------------
# baselines, computed in the same run
# ----------------------------------------------------------------------------------------------


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class BM25:
    """Okapi BM25 (k1 1.5, b 0.75) over lowercase words."""

    def __init__(self, docs: list[str], k1: float = 1.5, b: float = 0.75):
        self.tokens = [_words(d) for d in docs]
        self.tf = [collections.Counter(t) for t in self.tokens]
        self.n = len(docs)
        self.avg = sum(len(t) for t in self.tokens) / max(1, self.n)
        df = collections.Counter(w for t in self.tokens for w in set(t))
        self.idf = {w: math.log(1 + (self.n - c + 0.5) / (c + 0.5)) for w, c in df.items()}
        self.k1, self.b = k1, b

    def ranking(self, query: str) -> list[int]:
        scores = [0.0] * self.n
        for w in set(_words(query)):
            idf = self.idf.get(w)
            if idf is None:
                continue
            for i, tf in enumerate(self.tf):
                c = tf.get(w)
                if c:
                    norm = 1 - self.b + self.b * len(self.tokens[i]) / self.avg
                    scores[i] += idf * c * (self.k1 + 1) / (c + self.k1 * norm)
        return [i for i in sorted(range(self.n), key=lambda i: -scores[i]) if scores[i] > 0]


def _cosines(query: list[float], vectors: list[list[float]]) -> list[float]:
    return [sum(a * b for a, b in zip(query, v, strict=False)) for v in vectors]


def _cosine_ranking(scores: list[float]) -> list[int]:
    return sorted(range(len(scores)), key=lambda i: -scores[i])


def _rrf(*rankings: list[int], k: float = 60.0) -> list[int]:
    score: dict[int, float] = collections.defaultdict(float)
    for ranking in rankings:
        for r, i in enumerate(ranking):
            score[i] += 1.0 / (k + r + 1)
    return sorted(score, key=lambda i: -score[i])


# ----------------------------------------------------------------------------------------------
# the run
# ----------------------------------------------------------------------------------------------


class _Tally:
    def __init__(self) -> None:
        self.hits: dict[str, dict[str, list[bool]]] = collections.defaultdict(lambda: collections.defaultdict(list))

    def add(self, method: str, category: int, ids: list[str], evidence: set[str]) -> None:
        for key in ("all", CATEGORIES[category]):
            for k in KS:
                top = set(ids[:k])
                self.hits[method][f"{key}:any@{k}"].append(bool(top & evidence))
                self.hits[method][f"{key}:all@{k}"].append(evidence <= top)

    def table(self) -> dict[str, dict[str, float]]:
        return {m: {key: round(sum(v) / len(v), 3) for key, v in sorted(d.items()) if v} for m, d in self.hits.items()}


@dataclass(frozen=True)
class _Replay:
    """What recall's score fusion needs to rank one question again at another text weight: the
    question's cosine to every memory, its BM25 scores (the database's), the floor, the evidence."""

    cosines: list[float]
    text: dict[int, float]
    floor: float
    evidence: set[str]
    ids: list[str]

    def hits(self, weight: float, k: int) -> bool:
        """Whether recall's first k (top_k = k) hold an evidence turn at text `weight`: the vector
        and the text rankings each cut at pymem.search's pool, fused by score, cut at the floor."""
        from pymem.recall import candidate_count

        pool = min(1000, max(4 * candidate_count(k), 50))
        by_vector = sorted(range(len(self.cosines)), key=lambda i: (-self.cosines[i], self.ids[i]))[:pool]
        by_text = sorted(self.text, key=lambda i: (-self.text[i], self.ids[i]))[:pool]
        best = max((self.text[i] for i in by_text), default=0.0) or 1.0
        score = {i: self.cosines[i] + weight * self.text.get(i, 0.0) / best for i in {*by_vector, *by_text}}
        ranked = [i for i in sorted(score, key=lambda i: (-score[i], self.ids[i])) if score[i] >= self.floor]
        return any(self.ids[i] in self.evidence for i in ranked[:k])


def _held_out_text_weights(replays: dict[str, list[_Replay]], shipped: float) -> dict[str, Any]:
    """For each conversation: the weight of TEXT_WEIGHTS the others pick (best any@5 + any@10) and
    the any@5 / any@10 it gives on it; overall, those held-out figures and the shipped weight's."""
    rate: dict[tuple[float, str, int], float] = {}
    for w in {*TEXT_WEIGHTS, shipped}:
        for name, questions in replays.items():
            for k in KS:
                rate[w, name, k] = sum(r.hits(w, k) for r in questions) / max(1, len(questions))
    size = {name: len(questions) for name, questions in replays.items()}

    def pooled(w: float, names: list[str], k: int) -> float:
        return sum(rate[w, n, k] * size[n] for n in names) / max(1, sum(size[n] for n in names))

    folds = {}
    for name in replays:
        rest = [n for n in replays if n != name]
        pick = max(TEXT_WEIGHTS, key=lambda w: (sum(pooled(w, rest, k) for k in KS), -abs(w - shipped)))
        folds[name] = {"weight": pick, **{f"any@{k}": round(rate[pick, name, k], 3) for k in KS}}
    names = list(replays)
    held_out = {f"any@{k}": round(sum(rate[folds[n]["weight"], n, k] * size[n] for n in names)
                                  / max(1, sum(size.values())), 3) for k in KS}
    return {"folds": folds, "held_out": held_out, "shipped": shipped,
            "shipped_in_sample": {f"any@{k}": round(pooled(shipped, names, k), 3) for k in KS},
            "by_weight": {str(w): {f"any@{k}": round(pooled(w, names, k), 3) for k in KS} for w in TEXT_WEIGHTS}}


def _p50(values: list[float]) -> float | None:
    return round(statistics.median(values) * 1000, 1) if values else None


def run(store: Any, directory: str | Path, *, database: str = "pymem_eval_recall", keep: bool = False,
        limit: int | None = None, progress: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Run the evaluation (see the module docstring) in a scratch database next to `store`;
    `limit` caps the questions per conversation (a quick look)."""
    from pymem import Provenance, admit, deliver, recall, start_session
    from pymem.embedder import embed_query, hybrid_fusion_of
    from pymem.recall import similarity_floor

    conversations = load_locomo(directory)
    config = type("Config", (), {"database": database, "dims": store.embedding_dim, "keep": keep})()
    tally = _Tally()
    report: dict[str, Any] = {"conversations": [c.name for c in conversations], "turns": 0, "refused": 0,
                              "questions": 0, "deliver_evidence": 0, "deliver_empty": 0}
    times: dict[str, list[float]] = collections.defaultdict(list)
    best_cosine: dict[str, list[float]] = {}
    replays: dict[str, list[_Replay]] = {}
    with scratch_database(store, config, progress) as scratch:
        evalstore = scratch.store
        embedder = evalstore.text_embedder()
        report["embedder"] = embedder.name
        text_weight, rank_constant = hybrid_fusion_of(embedder)
        floor = similarity_floor(embedder, evalstore.settings.environ)
        started = time.perf_counter()
        for conv in conversations:
            mem = evalstore.bind(Context(tenant=f"locomo-{conv.name}", actor="eval"))
            progress(f"conversation {conv.name}: admitting {len(conv.turns)} turns")
            for n in conv.sessions:
                start_session(mem, f"s{n}", "chat")
            for turn in conv.turns:
                when = conv.sessions.get(turn.session)
                record = {"id": turn.dia_id, "content": turn.text}
                if when is not None:
                    record["event_at"] = when.isoformat()
                try:
                    admit(mem, record, Provenance(origin="user_asserted", source="chat", session_id=f"s{turn.session}"))
                except MemoryAdmissionError:
                    report["refused"] += 1
                except InvalidArguments:
                    report.setdefault("skipped", 0)
                    report["skipped"] += 1  # a dia_id the conversation repeats
                report["turns"] += 1
        report["ingest_s"] = round(time.perf_counter() - started, 1)
        report["ingest_turns_per_s"] = round(report["turns"] / max(report["ingest_s"], 1e-9), 1)

        for conv in conversations:
            tenant = f"locomo-{conv.name}"
            mem = evalstore.bind(Context(tenant=tenant, actor="eval"))
            with evalstore.transaction(mem.ctx) as c:
                # the vectors pymem stored, for the raw-cosine baseline (tooling: not a library query)
                stored = c.execute("select id, embedding from pymem.memories where tenant_id = %s"
                                   " and embedding is not null order by id", (tenant,)).fetchall()
            ids = [r[0] for r in stored]
            vectors = [r[1].to_list() for r in stored]
            texts = {t.dia_id: t.text for t in conv.turns}
            bm25 = BM25([texts.get(i, "") for i in ids])
            start_session(mem, "questions", "chat")
            questions = conv.questions[:limit] if limit else conv.questions
            progress(f"conversation {conv.name}: {len(questions)} questions")
            best_cosine[conv.name] = []
            replays[conv.name] = []
            position = {memory_id: n for n, memory_id in enumerate(ids)}
            for q in questions:
                question, evidence, category = str(q["question"]), {str(e) for e in q["evidence"]}, int(q["category"])
                report["questions"] += 1
                t0 = time.perf_counter()
                qv = embed_query(embedder, question)
                t1 = time.perf_counter()
                got = recall(mem, question, top_k=max(KS), embedder=embedder)
                t2 = time.perf_counter()
                delivered = deliver(mem, "questions", question, embedder=embedder, max_sessions=0, max_hot=0)
                t3 = time.perf_counter()
                times["embed"].append(t1 - t0)
                times["recall"].append(t2 - t1)
                times["deliver"].append(t3 - t2)
                tally.add("pymem recall", category, [k.id for k in got.kept], evidence)
                items = [i.id for i in delivered.items]
                report["deliver_evidence"] += bool(set(items) & evidence)
                report["deliver_empty"] += not items
                cosines = _cosines(qv, vectors)
                cos = _cosine_ranking(cosines)
                best_cosine[conv.name].append(cosines[cos[0]] if cos else -1.0)
                if rank_constant is None:  # score fusion: keep what replaying it at other weights needs
                    with evalstore.transaction(mem.ctx) as c:
                        text = c.execute("select id, score from pymem._text_candidates(%s, 1000, '{}'::jsonb, false)",
                                         (question,)).fetchall()
                    words = {position[i]: float(v) for i, v in text if i in position}
                    replays[conv.name].append(_Replay(cosines, words, floor, evidence, ids))
                bm = bm25.ranking(question)
                tally.add("BM25", category, [ids[i] for i in bm], evidence)
                tally.add("raw cosine", category, [ids[i] for i in cos], evidence)
                tally.add("BM25 + cosine (RRF)", category, [ids[i] for i in _rrf(bm, cos)], evidence)
    n = max(1, report["questions"])
    report["deliver_evidence_rate"] = round(report["deliver_evidence"] / n, 3)
    report["deliver_empty_rate"] = round(report["deliver_empty"] / n, 3)
    report["table"] = tally.table()
    report["query_ms_p50"] = {name: _p50(v) for name, v in times.items()}
    report["floor"] = _held_out_floors(best_cosine, getattr(embedder, "similarity_floor", None))
    if rank_constant is None and any(replays.values()):
        report["text_weight"] = _held_out_text_weights(replays, text_weight)
    return report


def _held_out_floors(best: dict[str, list[float]], shipped: float | None) -> dict[str, Any]:
    """For each conversation: the floor the others give (1st percentile of their questions' best
    cosine) and the share of its own questions below it; and the shipped floor's share."""
    folds = {}
    for name, values in best.items():
        rest = sorted(v for other, vs in best.items() if other != name for v in vs)
        if not rest or not values:
            continue
        floor = rest[max(0, int(0.01 * len(rest)) - 1)]
        folds[name] = {"floor": round(floor, 3),
                       "held_out_empty": round(sum(v < floor for v in values) / len(values), 3)}
    every = [v for vs in best.values() for v in vs]
    out: dict[str, Any] = {"folds": folds}
    if shipped is not None and every:
        out["shipped"] = shipped
        out["shipped_empty"] = round(sum(v < shipped for v in every) / len(every), 3)
    return out


def format_report(report: dict[str, Any]) -> str:
    """The tables as text (per category and overall; pymem beside the baselines)."""
    methods = ["pymem recall", "BM25", "raw cosine", "BM25 + cosine (RRF)"]
    keys = ["all", *list(CATEGORIES.values())]
    lines = [f"LoCoMo: conversations {', '.join(report['conversations'])}; {report['turns']:,} turns "
             f"({report['refused']} refused by the write gate); {report['questions']:,} answerable questions "
             f"(categories 1-4); embedder {report['embedder']}", ""]
    for metric in ("any@5", "any@10", "all@5", "all@10"):
        rows = [[metric, *keys]]
        for m in methods:
            values = report["table"].get(m, {})
            rows.append([m] + [f"{values.get(f'{k}:{metric}', float('nan')):.3f}" for k in keys])
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip() for r in rows] + [""]
    lines.append(f"deliver (defaults): an evidence turn in the block for {report['deliver_evidence_rate']:.3f} of "
                 f"questions; {report['deliver_empty_rate']:.3f} got no recalled memory")
    lines.append(f"ingest: {report['ingest_s']} s ({report['ingest_turns_per_s']} turns/s, through the write gate, "
                 f"embedding included)")
    t = report["query_ms_p50"]
    lines.append(f"per question, p50: query embedding {t.get('embed')} ms, recall {t.get('recall')} ms (its own "
                 f"embedding included), deliver {t.get('deliver')} ms")
    floor = report.get("floor", {})
    for name, fold in floor.get("folds", {}).items():
        lines.append(f"floor held out on {name}: {fold['floor']} (from the others) leaves "
                     f"{fold['held_out_empty']:.3f} of its questions without a memory")
    if "shipped" in floor:
        lines.append(f"shipped floor {floor['shipped']}: {floor['shipped_empty']:.3f} of all questions below it")
    weights = report.get("text_weight")
    if weights:
        for name, fold in weights["folds"].items():
            lines.append(f"text weight held out on {name}: {fold['weight']} (picked by the others) gives any@5 "
                         f"{fold['any@5']:.3f}, any@10 {fold['any@10']:.3f}")
        lines.append(f"text weight: held out any@5 {weights['held_out']['any@5']:.3f} / any@10 "
                     f"{weights['held_out']['any@10']:.3f}; shipped {weights['shipped']} on every conversation "
                     f"(in sample) {weights['shipped_in_sample']['any@5']:.3f} / "
                     f"{weights['shipped_in_sample']['any@10']:.3f} (replayed)")
    return "\n".join(lines)
