"""`pymem remember`, `pymem recall` and `pymem audit`: the write gate, recall re-judging and the
refusal audit on the command line.

Identity comes from the context options (--tenant/--actor/--adapter/--scope or PYMEM_TENANT,
PYMEM_ACTOR, PYMEM_ADAPTER, PYMEM_SCOPE): a row written here is tagged with the context's adapter
(and a login bound in pymem.login_bindings is tagged with its own, whatever it passes).
"""

from __future__ import annotations

import json
import re
from typing import Any, TextIO

import click

from .. import Context, InvalidArguments, MemoryAdmissionError, Origin, Provenance, PymemError, Store, admit, recall
from ..admission import Admission, admission_of
from ..delivery import tier_of
from ..integrity import history, refusals
from .common import (
    JSON_DOCUMENT_HELP,
    context_options,
    echo_json,
    handle_errors,
    json_option,
    open_store,
    stderr,
    table,
)

ORIGIN_CHOICE = click.Choice([o.value for o in Origin])

# --file line keys -> Provenance fields (aliases accepted for the CLI's own option names)
_PROVENANCE_KEYS = {"source": "source", "citation": "citation", "session": "session_id", "session_id": "session_id",
                    "run": "run_id", "run_id": "run_id", "turn": "turn", "injection_source": "injection_source"}
_RECORD_KEYS = ("id", "tags", "kind", "confidence", "importance")
_LINE_KEYS = {"text", "origin", *_PROVENANCE_KEYS, *_RECORD_KEYS}
_KIND = re.compile(r"[a-z][a-z0-9_]{0,39}")


def _short(text: Any, width: int = 70) -> str:
    value = "" if text is None else " ".join(str(text).split())
    return value if len(value) <= width else value[: width - 1] + "…"


def _embedder(store: Store) -> Any:
    """The store's embedder (PYMEM_EMBEDDER only chooses for a store that has none recorded)."""
    return store.text_embedder()


def _admitted_json(out: dict[str, Any]) -> dict[str, Any]:
    """The gate's decision on a written (admitted or held) note, in the shape of every surface."""
    return admission_of(out).to_json()


def _refused_json(exc: MemoryAdmissionError) -> dict[str, Any]:
    return Admission.refused(exc).to_json()


def _held_lines(decision: dict[str, Any]) -> list[str]:
    score = f", score {decision['score']:.3f}" if decision["score"] is not None else ""
    return [f"quarantined {decision['id']}: held for an operator's review, not recalled or delivered until released",
            f"  {decision['signature']}{score}; audit seq {decision['audit_seq']}"]


def report_refusal(exc: MemoryAdmissionError, as_json: bool) -> None:
    """Print a refusal (reason, signature, classifier score, audit seq) and exit 1."""
    if as_json:
        echo_json(_refused_json(exc))
    else:
        click.echo(f"refused: {exc.reason}")
        if exc.signature:
            click.echo(f"  signature: {exc.signature}")
        if exc.score is not None:
            click.echo(f"  classifier score: {exc.score:.3f}")
        click.echo(f"  audit seq: {exc.audit_seq if exc.audit_seq is not None else 'none (not audited)'}")
    raise SystemExit(1)


def _parse_line(raw: str, default_origin: str | None) -> tuple[dict[str, Any], Provenance]:
    """One --file line as (record, provenance); raises InvalidArguments naming what is wrong."""
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidArguments(f"not valid JSON (column {exc.colno})") from None
    if not isinstance(data, dict):
        raise InvalidArguments(f"must be a JSON object, got {type(data).__name__}")
    unknown = sorted(str(k)[:40] for k in data if k not in _LINE_KEYS)
    if unknown:
        raise InvalidArguments(f"unknown key(s): {', '.join(unknown)}; known: {', '.join(sorted(_LINE_KEYS))}")
    text = data.get("text")
    if not isinstance(text, str) or not text.strip():
        raise InvalidArguments('"text" must be a non-empty string')
    origin = data.get("origin", default_origin)
    if origin is None:
        raise InvalidArguments('"origin" is required (or pass --origin as a default)')
    fields = {field: data[key] for key, field in _PROVENANCE_KEYS.items() if data.get(key) is not None}
    provenance = Provenance(origin=origin, **fields)
    record: dict[str, Any] = {"content": text}
    for key in _RECORD_KEYS:
        if data.get(key) is not None:
            record[key] = data[key]
    tags = record.get("tags")
    if tags is not None and (not isinstance(tags, list) or not all(isinstance(t, str) for t in tags)):
        raise InvalidArguments('"tags" must be a list of strings')
    for key in ("confidence", "importance"):
        value = record.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not 0 <= value <= 1):
            raise InvalidArguments(f'"{key}" must be a number in [0, 1]')
    if record.get("id") is not None and (not isinstance(record["id"], str) or not record["id"]):
        raise InvalidArguments('"id" must be a non-empty string')
    kind = record.get("kind")
    if kind is not None and (not isinstance(kind, str) or not _KIND.fullmatch(kind)):
        raise InvalidArguments('"kind" must be a lowercase word (a-z, 0-9, _), at most 40 characters')
    return record, provenance


def _remember_file(file: TextIO, default_origin: str | None, ctx: Context, as_json: bool) -> None:
    # Check every line first: a malformed line stops the run before anything is written.
    parsed: list[tuple[int, dict[str, Any], Provenance]] = []
    problems: list[str] = []
    for number, raw in enumerate(file, start=1):
        if not raw.strip():
            continue
        try:
            record, provenance = _parse_line(raw, default_origin)
        except InvalidArguments as exc:
            problems.append(f"line {number}: {exc}")
            continue
        parsed.append((number, record, provenance))
    if problems:
        for problem in problems:
            stderr(f"Error: {problem}")
        stderr(f"{len(problems)} malformed line(s); nothing was written")
        raise SystemExit(2)

    counts = {"admitted": 0, "quarantined": 0, "refused": 0, "error": 0}
    with open_store() as store:
        memories = store.bind(ctx)
        embedder = _embedder(store)
        for number, record, provenance in parsed:
            try:
                out = admit(memories, record, provenance, embedder=embedder)
            except MemoryAdmissionError as exc:
                decision = {"line": number, **_refused_json(exc)}
            except InvalidArguments as exc:  # found only when writing (size limits, a taken id, ...)
                decision = {"line": number, "decision": "error", "error": str(exc)}
            else:
                decision = {"line": number, **_admitted_json(out)}
            counts[decision["decision"]] += 1
            if as_json:
                echo_json(decision)
            elif decision["decision"] == "admitted":
                click.echo(f"line {number}: admitted {decision['id']} ({decision['origin']}, "
                           f"confidence {decision['confidence']:g})")
            elif decision["decision"] == "quarantined":
                click.echo(f"line {number}: " + "; ".join(line.strip() for line in _held_lines(decision)))
            elif decision["decision"] == "refused":
                sig = f" [{decision['signature']}]" if decision["signature"] else ""
                click.echo(f"line {number}: refused{sig}: {decision['reason']}; audit seq {decision['audit_seq']}")
            else:
                stderr(f"Error: line {number}: {decision['error']}")
    if not as_json:
        click.echo(f"{counts['admitted']} admitted, {counts['quarantined']} quarantined, {counts['refused']} refused"
                   + (f", {counts['error']} malformed" if counts["error"] else ""))
    if counts["error"]:
        raise SystemExit(2)


@click.command("remember")
@click.argument("text", required=False)
@click.option("--origin", type=ORIGIN_CHOICE,
              help="Where the text came from (required for TEXT; a default for --file lines without one).")
@click.option("--source", help="Who or what produced it (recorded as the audit's tool memory.write:SOURCE).")
@click.option("--citation", help="Where it can be checked (tool_output needs one).")
@click.option("--session", "session_id", help="The session it was learnt in (must have been started).")
@click.option("--run", "run_id", help="Run id.")
@click.option("--turn", type=click.IntRange(min=0), help="Turn number within the run.")
@click.option("--injection-source", help="Who injected it (origin injected_context only).")
@click.option("--tag", "tags", multiple=True, help="Tag, repeatable.")
@click.option("--hot", is_flag=True, help="Deliver it on every turn (the tag hot; marking it is a ledger event).")
@click.option("--kind", help="fact, preference, summary, lesson, ... [default: fact]")
@click.option("--confidence", type=click.FloatRange(0, 1), help="Requested confidence; the policy caps it.")
@click.option("--id", "memory_id", help="Memory id [default: generated].")
@click.option("--ttl", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="Expire it this long after the write (the database's clock) [default: the tenant's retention].")
@click.option("--subject", help="Who it is about (a person's id): `pymem erase-actor` of that id erases it.")
@click.option("--file", "file", type=click.File("r", encoding="utf-8"),
              help='JSON Lines of {"text", "origin", ...} objects ("-" for stdin), each judged on its own.')
@context_options
@click.option("--json", "as_json", is_flag=True,
              help=JSON_DOCUMENT_HELP.removesuffix(".")
              + "; with --file, JSON Lines: one decision per line, each as it comes.")
@handle_errors
def remember(text: str | None, origin: str | None, source: str | None, citation: str | None, session_id: str | None,
             run_id: str | None, turn: int | None, injection_source: str | None, tags: tuple[str, ...], hot: bool,
             kind: str | None, confidence: float | None, memory_id: str | None, ttl: float | None,
             subject: str | None, file: TextIO | None, ctx: Context, as_json: bool) -> None:
    """Admit TEXT into long-term memory if its origin says it may, hold it for review, or refuse it.

    The admission policy (PYMEM_POLICY_FILE, PYMEM_INFERRED_CEILING, ...; see the README)
    decides: user_asserted and operator persist, model_inferred persists capped at 0.6,
    tool_output only with --citation, retrieved_content and unproven never; instruction-shaped
    text is refused whatever its origin. A refusal is written to the tenant's audit ledger (a
    digest, never the text) before it is reported. A --session that was never started (`pymem
    session start`) is refused and audited the same way; an incognito one stores nothing. Text the
    detector is unsure of (a score in the quarantine band, PYMEM_QUARANTINE_THRESHOLD) is
    quarantined: stored where no recall or delivery reads it until an operator releases it
    (`pymem quarantine`). Exit 0 admitted or quarantined, 1 refused.

    With --file, each line ({"text", "origin", "source", "citation", "session", "run", "turn",
    "injection_source", "tags", "kind", "confidence", "id"}) is admitted or refused on its own;
    exit 0 when every line was decided, 2 if a line is malformed (nothing is written then).

    Example: pymem remember --origin user_asserted "Prefers EUR invoices"
    """
    if file is not None:
        if text is not None:
            raise click.UsageError("give TEXT or --file, not both")
        if any(v is not None for v in (source, citation, session_id, run_id, turn, injection_source, kind,
                                       confidence, memory_id, ttl, subject)) or tags or hot:
            raise click.UsageError("with --file, provenance and record fields come from each line")
        _remember_file(file, origin, ctx, as_json)
        return
    if text is None:
        raise click.UsageError("give TEXT to remember (or --file NOTES.jsonl)")
    if origin is None:
        raise click.UsageError("--origin is required: " + ", ".join(o.value for o in Origin))
    provenance = Provenance(origin=Origin(origin), source=source, citation=citation, session_id=session_id,
                            run_id=run_id, turn=turn, injection_source=injection_source)
    record: dict[str, Any] = {"content": text}
    tags = tuple(dict.fromkeys(tags + (("hot",) if hot else ())))
    if tags:
        record["tags"] = list(tags)
    for key, value in (("kind", kind), ("confidence", confidence), ("id", memory_id)):
        if value is not None:
            record[key] = value
    with open_store() as store:
        memories = store.bind(ctx)
        try:
            out = admit(memories, record, provenance, embedder=_embedder(store), ttl=ttl, subject=subject)
        except MemoryAdmissionError as exc:
            report_refusal(exc, as_json)
    decision = _admitted_json(out)
    if as_json:
        echo_json(decision)
    elif decision["decision"] == "quarantined":
        for line in _held_lines(decision):
            click.echo(line)
    else:
        click.echo(f"admitted {out['id']}")
        capped = confidence is not None and out["confidence"] < confidence
        click.echo(f"  origin {out['origin']}, confidence {out['confidence']:g}"
                   + (f" (capped from {confidence:g})" if capped else ""))
        click.echo(f"  policy {out['policy_fingerprint']}")


@click.command("recall")
@click.argument("query")
@click.option("--top-k", type=click.IntRange(1, 1000), default=5, show_default=True, help="Memories to keep.")
@click.option("--as-of", "as_of", metavar="ISO-TIME",
              help="What was believed at that time (UTC if no offset): superseded memories of then come back.")
@context_options
@json_option
@handle_errors
def recall_command(query: str, top_k: int, as_of: str | None, ctx: Context, as_json: bool) -> None:
    """Recall the memories closest to QUERY that the policy in force now still believes.

    Every hit is re-judged: rows without provenance, of an origin the current policy would not
    persist, instruction-shaped, or written by an adapter that is not trusted
    (PYMEM_TRUSTED_ADAPTERS, PYMEM_TRUST_UNTAGGED) are withheld, with the reason; kept rows carry
    the confidence the current policy caps them at, their trust tier and their session. With
    --as-of, the memories believed at that time (written, valid and not yet superseded then).
    An explicit recall shows every tier, including those a delivery leaves out. Embeddings come
    from PYMEM_EMBEDDER (default: lexical).

    Example: pymem recall --tenant acme "invoice currency" --top-k 3
    """
    with open_store() as store:
        result = recall(store.bind(ctx), query, top_k=top_k, embedder=_embedder(store), as_of=as_of)
    tiers = {k.id: tier_of(k.origin, k.provenance, source_adapter=k.source_adapter).value for k in result.kept}
    if as_json:
        out = result.to_json()
        for kept in out["kept"]:
            kept["tier"] = tiers[kept["id"]]
        echo_json(out)
        return
    click.echo(f"kept ({len(result.kept)}):")
    table([{"id": k.id, "score": f"{k.score:.3f}", "origin": k.origin, "tier": tiers[k.id],
            "confidence": f"{k.confidence:g}", "session": k.session_id,
            "created": k.created_at.isoformat(timespec="seconds") if k.created_at else None,
            "adapter": k.source_adapter, "content": _short(k.content)} for k in result.kept],
          ["id", "score", "origin", "tier", "confidence", "session", "created", "adapter", "content"])
    click.echo(f"withheld ({len(result.withheld)}):")
    table([{"id": w.id, "reason": w.reason} for w in result.withheld], ["id", "reason"])
    click.echo(f"policy {result.policy_fingerprint}")


@click.group("audit")
def audit_group() -> None:
    """Read the audit: refusals, how a memory got here, and what each delivered turn contained.

    Auditors can run the same queries in plain SQL across tenants (see the README).

    Example: pymem audit refusals --tenant acme --json
    """


@audit_group.command("refusals")
@click.option("--since", metavar="ISO-TIME", help="Only refusals at or after this time (UTC if no offset).")
@click.option("--limit", type=click.IntRange(min=1), default=1000, show_default=True, help="Most recent N.")
@context_options
@json_option
@handle_errors
def audit_refusals(since: str | None, limit: int, ctx: Context, as_json: bool) -> None:
    """List the context tenant's admission refusals (pymem.audit_refusals), oldest first.

    Each refusal shows who (actor, adapter), which origin and tool (memory.write:SOURCE), why,
    the detector signature if one matched (or `classifier.v1` / a `signal.*` name, with the
    classifier's score and the sha256 of the piece of the note that decided), and a sha256 digest
    of the arguments: the refused content itself is never stored.

    Example: pymem audit refusals --tenant acme --since 2026-01-01T00:00:00Z
    """
    with open_store() as store:
        rows = refusals(store.bind(ctx), since=since, limit=limit)
    if as_json:
        echo_json([row.to_json() for row in rows])
        return
    table([{**r.to_json(), "occurred_at": r.occurred_at.isoformat(timespec="seconds")} for r in rows],
          ["seq", "occurred_at", "actor", "adapter", "origin", "tool", "signature", "score", "reason", "args_digest"])


@audit_group.command("history")
@click.argument("memory_id")
@context_options
@json_option
@handle_errors
def audit_history(memory_id: str, ctx: Context, as_json: bool) -> None:
    """How did this memory get here? Its ledger events with its origin and provenance (no content).

    Example: pymem audit history --tenant acme fav-colour
    """
    with open_store() as store:
        rows = history(store.bind(ctx), memory_id)
    if not rows:
        raise PymemError(f"no history for memory {memory_id[:100]!r} in this context")
    if as_json:
        echo_json([row.to_json() for row in rows])
        return
    table([{**r.to_json(), "occurred_at": r.occurred_at.isoformat(timespec="seconds"),
            "provenance": json.dumps(r.provenance, sort_keys=True) if r.provenance else None} for r in rows],
          ["seq", "event", "occurred_at", "actor", "adapter", "origin", "policy_fingerprint", "provenance"])


def register(main: click.Group) -> None:
    main.add_command(remember)
    main.add_command(recall_command)
    main.add_command(audit_group)


__all__ = ["remember", "recall_command", "audit_group", "register"]
