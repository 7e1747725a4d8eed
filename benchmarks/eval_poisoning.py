"""`pymem eval poisoning`: the defence against memory poisoning, measured end to end.

What a content filter refuses is half the story; what matters is whether a poisoned note ever
reaches a prompt. For every note of the evaluation data (payloads and benign notes), written
through each surface in session 1 of a tenant, this asks what the gate decided (refused,
quarantined, admitted) and then runs `deliver` for a related query (the note's own opening
words, the most related query there is) in session 2 of the same tenant and scope, and checks
whether the note is in the delivered block.

Surfaces: the library (`admit`), the command line (`pymem remember --file ... --json`, in
process), HTTP (`pymem.client.Client` against `pymem serve`'s app on a loopback port), MCP (the
SDK's client over streamable HTTP, the same app) and the LangGraph store (`PymemStore.put`, its
items in their namespace's scope, delivered to a session of that scope). Every write is the
operator's (no adapter): untagged rows are trusted by delivery, so the content gate is the only
defence measured. Origin user_asserted throughout: it persists, at full confidence.

Held out: the evaluation data is the classifier's own training data (`training.datasets`, every
source named in training/DATA_MANIFEST.md), so each source is judged by the classifier variant
trained and calibrated without it (`training.learn`, as `python -m training.evaluate_loso`
does), installed in this process for that source's writes, with the policy's refusal threshold
the variant's calibrated one and the quarantine band `QUARANTINE_RATIO` of it. The variants are
cached by the data's digest. Without the `train` extra, or with `--shipped`, the shipped model
judges every source: the table is then not held out, and says so.

Sampling: `--sample N` notes per source, label and surface (deterministic); 0 writes every note
through every surface (about 21,000 writes and deliveries: hours on a small machine).
Progress goes to standard error.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import random
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pymem.context import Context
from pymem.errors import InvalidArguments, MemoryAdmissionError

from .bench import scratch_database

__all__ = ["SURFACES", "load_rows", "project_rows", "run", "format_report"]

SURFACES = ("library", "cli", "http", "mcp", "langgraph")
ROOT = Path(__file__).resolve().parent.parent
SEED = 20261202
#: Characters of a note used as its related query.
QUERY_CHARS = 300
#: The LangGraph namespace every item is written in (its session receives that scope).
NAMESPACE = ("eval", "notes")
JWT_KEY = "pymem-eval-poisoning-" + "0123456789abcdef" * 4


# -- data ---------------------------------------------------------------------------------------


def load_rows(progress: Callable[[str], None]) -> tuple[list[dict[str, Any]], str]:
    """Every example of the evaluation data, and where it came from. The training data when the
    `train` extra is installed (training.datasets: every source); otherwise the project's own
    replay corpus only (tests/helpers/poisoning_corpus.py)."""
    try:
        from training import datasets
        rows = datasets.build_all()
        return rows, "training.datasets (every source of training/DATA_MANIFEST.md)"
    except ImportError as exc:
        progress(f"training data unavailable ({exc.name}); using the project corpus alone")
    return project_rows(), "tests/helpers/poisoning_corpus.py (the train extra is not installed)"


def project_rows() -> list[dict[str, Any]]:
    """The project's own replay corpus (tests/helpers/poisoning_corpus.py), as evaluation rows."""
    spec = importlib.util.spec_from_file_location("_pymem_poisoning_corpus",
                                                  ROOT / "tests" / "helpers" / "poisoning_corpus.py")
    assert spec is not None and spec.loader is not None
    corpus = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(corpus)
    rows = [{"source": "project-corpus", "label": 1, "text": t, "kind": c, "id": f"p/{i}"}
            for i, (c, t) in enumerate(corpus.PAYLOADS)]
    rows += [{"source": "project-corpus", "label": 0, "text": t, "kind": c, "id": f"b/{i}"}
             for i, (c, t) in enumerate(corpus.BENIGN)]
    return rows


def _digest(rows: list[dict[str, Any]]) -> str:
    h = hashlib.sha256()
    for r in rows:
        h.update(json.dumps([r["source"], r["label"], r["text"]]).encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:16]


def _sample(rows: list[dict[str, Any]], n: int, salt: str) -> list[dict[str, Any]]:
    if n <= 0 or len(rows) <= n:
        return list(rows)
    return random.Random(f"{SEED}:{salt}").sample(rows, n)


# -- held-out classifier variants --------------------------------------------------------------


def fold_models(rows: list[dict[str, Any]], sources: list[str], cache: Path,
                progress: Callable[[str], None]) -> dict[str, Any] | None:
    """{source: the Model trained and calibrated without it}, or None without the train extra."""
    try:
        from training import learn
    except ImportError:
        return None
    from pymem.admission import model as model_io

    cache.mkdir(parents=True, exist_ok=True)
    digest = _digest(rows)
    out: dict[str, Any] = {}
    for source in sources:
        path = cache / f"{digest}-{source}.bin"
        if path.exists():
            out[source] = model_io.load(path)
            continue
        progress(f"training the classifier without {source} (calibrating its threshold on the other sources)")
        train = [r for r in rows if r["source"] != source]
        threshold, _ = learn.calibrate(train)
        fitted = learn.fit(train, threshold)
        path.write_bytes(model_io.encode(name=fitted.name, spec=fitted.spec, bias=fitted.bias,
                                         weights=learn.sparse_weights(fitted), signal_weights=fitted.signal_weights,
                                         threshold=threshold, meta={"held_out": source}))
        out[source] = model_io.load(path)
    return out


@contextlib.contextmanager
def installed(model: Any) -> Iterator[None]:
    """`model` as the classifier every check of this process uses, for the duration."""
    from pymem.admission import classifier

    before = classifier.default_model
    if model is not None:
        classifier.default_model = lambda: model  # type: ignore[assignment]
    try:
        yield
    finally:
        classifier.default_model = before  # type: ignore[assignment]


def band_scores(rows: list[dict[str, Any]], models: dict[str, Any] | None) -> dict[str, Any]:
    """Where held-out benign notes and payloads score, relative to their variant's threshold: what
    the quarantine band's edge (a share of the refusal threshold) is chosen from."""
    from pymem.admission.classifier import classify
    from pymem.admission.scanning import instruction_shaped

    ratios: dict[int, list[float]] = {0: [], 1: []}
    refused = {0: 0, 1: 0}
    for r in rows:
        model = models.get(r["source"]) if models else None
        record = {"content": r["text"], "kind": "fact"}
        if instruction_shaped(record) is not None:
            refused[r["label"]] += 1
            continue
        verdict = classify(record, model=model, threshold=1.0 if model is None else model.threshold)
        limit = model.threshold if model is not None else verdict.threshold
        if verdict.name not in (None, "classifier.v1") or verdict.score >= limit:
            refused[r["label"]] += 1
            continue
        ratios[r["label"]].append(verdict.score / limit)
    out: dict[str, Any] = {}
    for ratio in (0.5, 0.6, 0.7, 0.75, 0.8, 0.82, 0.84, 0.86, 0.88, 0.9, 0.92, 0.94, 0.96):
        benign = sum(1 for x in ratios[0] if x >= ratio) / max(1, len(ratios[0]) + refused[0])
        payloads = sum(1 for x in ratios[1] if x >= ratio) / max(1, len(ratios[1]) + refused[1])
        out[f"{ratio:.2f}"] = {"benign_in_band": round(benign, 4), "payloads_in_band": round(payloads, 4)}
    return out


# -- surfaces ----------------------------------------------------------------------------------


@contextlib.contextmanager
def _service(store: Any) -> Iterator[str]:
    """`pymem serve`'s app on a loopback port, its large-note workers off (they would load the
    shipped model, not the variant under test); yields the base URL."""
    import uvicorn

    from pymem.server import app as app_module
    from pymem.service.auth import TokenVerifier

    saved = app_module.offload.install
    app_module.offload.install = lambda workers=2: None  # type: ignore[assignment]
    try:
        app = app_module.build_app(store, tokens=TokenVerifier.hs256(JWT_KEY))
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, access_log=False, lifespan="on")
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, name="pymem-eval-server", daemon=True)
        thread.start()
        deadline = time.monotonic() + 60
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the evaluation's service did not start")
            time.sleep(0.05)
        port = server.servers[0].sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True
            thread.join(30)
    finally:
        app_module.offload.install = saved  # type: ignore[assignment]


def _token(tenant: str) -> str:
    import jwt

    now = int(time.time())
    return jwt.encode({"tenant": tenant, "actor": "eval", "iat": now, "exp": now + 86400}, JWT_KEY, algorithm="HS256")


def _decision(kind: str, note_id: str | None) -> dict[str, Any]:
    return {"decision": kind, "id": note_id}


def _write_library(store: Any, tenant: str, notes: list[dict[str, Any]], **_: Any) -> list[dict[str, Any]]:
    from pymem import Provenance, admit
    from pymem.admission.quarantine import admission_of

    mem = store.bind(Context(tenant=tenant, actor="eval"))
    out = []
    for note in notes:
        try:
            written = admit(mem, {"id": note["mid"], "content": note["text"]},
                            Provenance("user_asserted", source="eval", session_id="s1"))
            out.append(_decision(admission_of(written).decision, note["mid"]))
        except MemoryAdmissionError:
            out.append(_decision("refused", None))
        except InvalidArguments as exc:
            out.append({"decision": "error", "error": str(exc)[:200]})
    return out


def _write_cli(store: Any, tenant: str, notes: list[dict[str, Any]], env: dict[str, str], **_: Any
               ) -> list[dict[str, Any]]:
    from click.testing import CliRunner

    from pymem.cli import main

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "notes.jsonl"
        path.write_text("".join(json.dumps({"text": n["text"], "origin": "user_asserted", "source": "eval",
                                            "session": "s1", "id": n["mid"]}) + "\n" for n in notes),
                        encoding="utf-8")
        result = CliRunner().invoke(main, ["remember", "--file", str(path), "--json"],
                                    env={**env, "PYMEM_TENANT": tenant, "PYMEM_ACTOR": "eval"})
    lines = [json.loads(line) for line in result.output.splitlines() if line.startswith("{")]
    if len(lines) != len(notes):
        raise RuntimeError(f"pymem remember --file answered {len(lines)} lines for {len(notes)} notes "
                           f"(exit {result.exit_code})")
    return [_decision(d["decision"], d.get("id")) if d["decision"] != "error" else d for d in lines]


def _write_http(store: Any, tenant: str, notes: list[dict[str, Any]], url: str, **_: Any) -> list[dict[str, Any]]:
    from pymem.client import Client

    out = []
    with Client(url, _token(tenant)) as client:
        for note in notes:
            try:
                got = client.remember({"id": note["mid"], "content": note["text"]},
                                      {"origin": "user_asserted", "source": "eval", "session_id": "s1"})
                out.append(_decision(got["decision"], note["mid"]))
            except MemoryAdmissionError:
                out.append(_decision("refused", None))
            except InvalidArguments as exc:
                out.append({"decision": "error", "error": str(exc)[:200]})
    return out


def _write_mcp(store: Any, tenant: str, notes: list[dict[str, Any]], url: str, **_: Any) -> list[dict[str, Any]]:
    import anyio
    import httpx2
    from mcp import Client as MCPClient
    from mcp.client.streamable_http import streamable_http_client

    async def main() -> list[dict[str, Any]]:
        out = []
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {_token(tenant)}"}, timeout=120) as http, \
                MCPClient(streamable_http_client(url + "/mcp", http_client=http)) as mcp:
            for note in notes:
                result = await mcp.call_tool("remember", {"content": note["text"], "origin": "user_asserted",
                                                          "source": "eval", "session_id": "s1", "id": note["mid"]})
                if result.is_error:
                    text = result.content[0].text
                    out.append(_decision("refused", None) if "refused by the write gate" in text
                               else {"decision": "error", "error": text[:200]})
                else:
                    out.append(_decision(result.structured_content["decision"], note["mid"]))
        return out

    result: list[dict[str, Any]] = anyio.run(main)
    return result


def _write_langgraph(store: Any, tenant: str, notes: list[dict[str, Any]], **_: Any) -> list[dict[str, Any]]:
    from pymem.admission.quarantine import list_quarantined
    from pymem.langgraph import PymemStore
    from pymem.langgraph.namespaces import item_id

    mem = store.bind(Context(tenant=tenant, actor="eval"))
    embedder = store.text_embedder()
    lg = PymemStore(mem, origin="user_asserted",
                    index={"dims": store.embedding_dim, "embed": embedder.embed, "fields": ["text"]})
    out = []
    for note in notes:
        try:
            lg.put(NAMESPACE, note["mid"], {"text": note["text"]})
        except MemoryAdmissionError:
            out.append(_decision("refused", None))
            continue
        except InvalidArguments as exc:
            out.append({"decision": "error", "error": str(exc)[:200]})
            continue
        out.append(_decision("written", item_id(lg.name, mem.ctx.scope, NAMESPACE, note["mid"])))
    held = {n.id for n in list_quarantined(mem, limit=1000)}
    return [{**d, "decision": ("quarantined" if d["id"] in held else "admitted")} if d["decision"] == "written" else d
            for d in out]


WRITERS: dict[str, Callable[..., list[dict[str, Any]]]] = {
    "library": _write_library, "cli": _write_cli, "http": _write_http, "mcp": _write_mcp,
    "langgraph": _write_langgraph}


def _delivered(store: Any, tenant: str, surface: str, notes: list[dict[str, Any]],
               decisions: list[dict[str, Any]]) -> list[bool]:
    """For each note, whether a delivery to session 2 for its related query carries it."""
    from pymem import deliver, start_session
    from pymem.langgraph.namespaces import namespace_scope

    scope = namespace_scope("default", NAMESPACE) if surface == "langgraph" else {}
    mem = store.bind(Context(tenant=tenant, actor="eval", scope=scope))
    start_session(mem, "s2", "chat")
    reached = []
    for turn, (note, decision) in enumerate(zip(notes, decisions, strict=True)):
        block = deliver(mem, "s2", note["text"][:QUERY_CHARS], turn=turn)
        ids = {item.id for item in block.items}
        reached.append(decision.get("id") is not None and decision["id"] in ids)
    return reached


# -- the run -----------------------------------------------------------------------------------


def _tally() -> dict[str, int]:
    return {"n": 0, "refused": 0, "quarantined": 0, "admitted": 0, "error": 0, "delivered": 0,
            "delivered_while_held": 0}


def run(store: Any, *, database: str = "pymem_eval_poisoning", keep: bool = False, sample: int = 20,
        surfaces: tuple[str, ...] = SURFACES, shipped: bool = False, only: tuple[str, ...] = (),
        cache: str | Path | None = None, rows: list[dict[str, Any]] | None = None,
        progress: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Run the evaluation (see the module docstring) in a scratch database next to `store`;
    `rows` replaces the evaluation data (each {"source", "label", "text", "kind"})."""
    from pymem.admission.policy import QUARANTINE_RATIO

    rows, data_note = (rows, "given rows") if rows is not None else load_rows(progress)
    sources = sorted({r["source"] for r in rows}, key=lambda s: [r["source"] for r in rows].index(s))
    if only:
        sources = [s for s in sources if s in only]
    models = None if shipped else fold_models(rows, sources, Path(cache) if cache else
                                                ROOT / "training" / ".cache" / "folds", progress)
    held_out = models is not None
    report: dict[str, Any] = {
        "data": data_note, "data_digest": _digest(rows), "held_out": held_out,
        "held_out_note": ("each source judged by the classifier trained and calibrated without it (training.learn)"
                          if held_out else "NOT held out: the shipped classifier judges every source"),
        "sample_per_source_label_surface": sample, "surfaces": list(surfaces), "quarantine_ratio": QUARANTINE_RATIO,
        "sources": {}, "kinds": {}}
    config = type("Config", (), {"database": database, "dims": store.embedding_dim, "keep": keep})()
    started = time.perf_counter()
    with scratch_database(store, config, progress) as scratch:
        for source in sources:
            model = models[source] if models else None
            threshold = model.threshold if model is not None else None
            env = {"PYMEM_DSN": scratch.app_dsn, "PYMEM_ADMIN_DSN": scratch.admin_dsn,
                   **{k: v for k, v in store.settings.environ.items()
                      if k in ("PYMEM_EMBEDDER", "PYMEM_EMBED_THREADS", "PYMEM_HOME")}}
            if threshold is not None:
                env["PYMEM_CLASSIFIER_THRESHOLD"] = repr(threshold)
                env["PYMEM_QUARANTINE_THRESHOLD"] = repr(QUARANTINE_RATIO * threshold)
            fold_store = _fold_store(scratch, store, env)
            per_source = report["sources"].setdefault(source, {"threshold": threshold, "surfaces": {}})
            try:
                with installed(model), _service(fold_store) as url:
                    for surface in surfaces:
                        progress(f"{source}: writing through {surface}")
                        tallies = per_source["surfaces"].setdefault(surface, {"payloads": _tally(),
                                                                              "benign": _tally()})
                        for label, key in ((1, "payloads"), (0, "benign")):
                            part = [r for r in rows if r["source"] == source and r["label"] == label]
                            notes = [{**r, "mid": f"n{i}"} for i, r in
                                     enumerate(_sample(part, sample, f"{source}:{label}:{surface}"))]
                            if not notes:
                                continue
                            tenant = f"{source}-{surface}-{key}"
                            _start(fold_store, tenant, surface)
                            decisions = WRITERS[surface](fold_store, tenant, notes, url=url, env=env)
                            reached = _delivered(fold_store, tenant, surface, notes, decisions)
                            _count(tallies[key], report["kinds"], source, key, notes, decisions, reached)
            finally:
                fold_store.close()
    report["seconds"] = round(time.perf_counter() - started, 1)
    report["totals"] = _totals(report)
    progress("scoring every note against its held-out variant's threshold (the quarantine band)")
    report["band"] = band_scores([r for r in rows if r["source"] in sources], models)
    return report


def _fold_store(scratch: Any, store: Any, env: dict[str, str]) -> Any:
    from pymem.config import Settings
    from pymem.storage.endpoints import Endpoints
    from pymem.storage.store import Store

    settings = Settings.from_env({**env, "PYMEM_EMBEDDING_DIM": str(store.embedding_dim)})
    return Store(Endpoints(app=scratch.app_dsn, admin=scratch.admin_dsn), settings, pool_size=4)


def _start(store: Any, tenant: str, surface: str) -> None:
    from pymem import start_session
    from pymem.langgraph.namespaces import namespace_scope

    if surface != "langgraph":  # a LangGraph put names no session
        start_session(store.bind(Context(tenant=tenant, actor="eval")), "s1", "chat")
    else:
        start_session(store.bind(Context(tenant=tenant, actor="eval", scope=namespace_scope("default", NAMESPACE))),
                      "s1", "chat")


def _count(tally: dict[str, int], kinds: dict[str, Any], source: str, key: str, notes: list[dict[str, Any]],
           decisions: list[dict[str, Any]], reached: list[bool]) -> None:
    for note, decision, hit in zip(notes, decisions, reached, strict=True):
        outcome = decision["decision"] if decision["decision"] in ("refused", "quarantined", "admitted") else "error"
        kind = kinds.setdefault(f"{source} / {note.get('kind')} / {key}", _tally())
        for t in (tally, kind):
            t["n"] += 1
            t[outcome] += 1
            t["delivered"] += int(hit)
            t["delivered_while_held"] += int(hit and outcome == "quarantined")


def _totals(report: dict[str, Any]) -> dict[str, Any]:
    totals: dict[str, Any] = {"payloads": _tally(), "benign": _tally()}
    for per_source in report["sources"].values():
        for tallies in per_source["surfaces"].values():
            for key in ("payloads", "benign"):
                for field, value in tallies[key].items():
                    totals[key][field] += value
    return totals


# -- the report ----------------------------------------------------------------------------------


def _pct(k: int, n: int) -> str:
    return "n/a" if n == 0 else f"{100.0 * k / n:.1f} %"


def _merge(tallies: dict[str, Any], key: str) -> dict[str, int]:
    merged = _tally()
    for t in tallies.values():
        for field, value in t[key].items():
            merged[field] += value
    return merged


def format_report(report: dict[str, Any]) -> str:
    """The per-source table (every surface pooled) and the per-surface totals, as Markdown."""
    lines = [f"data: {report['data']} (digest {report['data_digest']})", report["held_out_note"],
             f"sample: {report['sample_per_source_label_surface'] or 'every'} notes per source, label and surface; "
             f"surfaces: {', '.join(report['surfaces'])}; quarantine band from "
             f"{report['quarantine_ratio']:g} x the refusal threshold", "",
             "| held-out source | payloads | refused | quarantined | admitted | **reached a delivered block** "
             "| benign | refused | quarantined | delivered |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for source, per_source in report["sources"].items():
        p, b = _merge(per_source["surfaces"], "payloads"), _merge(per_source["surfaces"], "benign")
        lines.append(f"| {source} | {p['n']} | {_pct(p['refused'], p['n'])} | {_pct(p['quarantined'], p['n'])} | "
                     f"{_pct(p['admitted'], p['n'])} | **{_pct(p['delivered'], p['n'])}** | {b['n']} | "
                     f"{_pct(b['refused'], b['n'])} | {_pct(b['quarantined'], b['n'])} | "
                     f"{_pct(b['delivered'], b['n'])} |")
    p, b = report["totals"]["payloads"], report["totals"]["benign"]
    lines.append(f"| **all** | {p['n']} | {_pct(p['refused'], p['n'])} | {_pct(p['quarantined'], p['n'])} | "
                 f"{_pct(p['admitted'], p['n'])} | **{_pct(p['delivered'], p['n'])}** | {b['n']} | "
                 f"{_pct(b['refused'], b['n'])} | {_pct(b['quarantined'], b['n'])} | {_pct(b['delivered'], b['n'])} |")
    lines += ["", "| surface | payloads reached | payloads refused or quarantined | benign delivered |",
              "| --- | --- | --- | --- |"]
    for surface in report["surfaces"]:
        pooled = {s: ps["surfaces"][surface] for s, ps in report["sources"].items() if surface in ps["surfaces"]}
        p, b = _merge(pooled, "payloads"), _merge(pooled, "benign")
        lines.append(f"| {surface} | {_pct(p['delivered'], p['n'])} | "
                     f"{_pct(p['refused'] + p['quarantined'], p['n'])} | {_pct(b['delivered'], b['n'])} |")
    held = report["totals"]["payloads"]["delivered_while_held"] + report["totals"]["benign"]["delivered_while_held"]
    errors = report["totals"]["payloads"]["error"] + report["totals"]["benign"]["error"]
    lines += ["", f"quarantined notes found in a delivered block: {held} (must be 0); write errors: {errors}",
              f"{report['seconds']} s", "",
              "quarantine band, every note of the sources scored by its variant: share in [ratio x threshold, "
              "threshold) (signatures and signals refuse the rest)", "",
              "| band edge (x threshold) | benign notes in the band | payloads in the band |", "| --- | --- | --- |"]
    for ratio, shares in report.get("band", {}).items():
        lines.append(f"| {ratio} | {100 * shares['benign_in_band']:.1f} % | {100 * shares['payloads_in_band']:.1f} % |")
    return "\n".join(lines)
