"""`pymem session ...`, `pymem deliver`, `pymem supersede`, `pymem erase`, `pymem inspect ...` and
`pymem audit injections`: sessions, the block an agent receives, and the memory inspector."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

import pymem

from .. import (
    Context,
    MemoryAdmissionError,
    Origin,
    Provenance,
    PymemError,
    end_session,
    erase,
    start_session,
    supersede,
)
from ..delivery import (
    erase_session,
    inspect_memories,
    inspect_memory,
    list_sessions,
    memory_injections,
    recall_session,
    replace_summary,
    session_injections,
)
from ..lessons import deliver_with_lessons
from ..vocabulary import SURFACES
from .common import (
    PymemCommandError,
    command_settings,
    context_options,
    echo_json,
    from_settings,
    handle_errors,
    json_option,
    open_store,
    stderr,
    table,
)
from .memory_commands import ORIGIN_CHOICE, _admitted_json, _embedder, _short, audit_group, report_refusal

if TYPE_CHECKING:
    from datetime import datetime

    from ..delivery import Session

SURFACE_CHOICE = click.Choice(list(SURFACES))


def _when(value: datetime | None) -> str | None:
    return value.isoformat(timespec="seconds") if value else None


def _session_table(sessions: list[Session]) -> None:
    table([{"id": s.id, "surface": s.surface, "started": _when(s.started_at), "ended": _when(s.ended_at),
            "summary": "yes" if s.has_summary else "", "topic": _short(s.topic, 50)} for s in sessions],
          ["id", "surface", "started", "ended", "summary", "topic"])


@click.group("session")
def session_group() -> None:
    """Start, end, list, show and erase sessions.

    A memory written on behalf of a session must name a session started here (there is no
    default session); an incognito session stores nothing and is never listed.

    Example: pymem session start chat-42 --surface chat --first-message "Help with invoices"
    """


@session_group.command("start")
@click.argument("session_id", metavar="ID")
@click.option("--surface", type=SURFACE_CHOICE, required=True, help="Where the session runs.")
@click.option("--incognito", is_flag=True, help="Store nothing from this session, and inject nothing into it.")
@click.option("--first-message",
              help="The user's first message: the topic is taken from it (never from assistant text).")
@context_options
@json_option
@handle_errors
def session_start(session_id: str, surface: str, incognito: bool, first_message: str | None, ctx: Context,
                  as_json: bool) -> None:
    """Start session ID in the context's tenant and scope.

    Example: pymem session start chat-42 --surface chat --first-message "Help with Initech's invoices"
    """
    with open_store() as store:
        session = start_session(store.bind(ctx), session_id, surface, incognito=incognito, first_message=first_message)
    if as_json:
        echo_json(session.to_json())
        return
    flag = " (incognito: nothing from it is stored)" if session.incognito else ""
    click.echo(f"started {session.id} on {session.surface} at {_when(session.started_at)}{flag}")
    if session.topic:
        click.echo(f"  topic {session.topic}")


@session_group.command("end")
@click.argument("session_id", metavar="ID")
@click.option("--summary", help="The session's summary (returned on demand by `pymem session show`; never injected).")
@context_options
@json_option
@handle_errors
def session_end(session_id: str, summary: str | None, ctx: Context, as_json: bool) -> None:
    """End session ID, storing its summary if given (dropped for an incognito session).

    An instruction-shaped summary is refused (exit 1) and the refusal audited; the session stays open.

    Example: pymem session end chat-42 --summary "Agreed to invoice Initech in EUR"
    """
    with open_store() as store:
        try:
            session = end_session(store.bind(ctx), session_id, summary=summary)
        except MemoryAdmissionError as exc:
            report_refusal(exc, as_json)
    if as_json:
        echo_json(session.to_json())
        return
    kept = "with its summary" if session.has_summary else "without a summary"
    click.echo(f"ended {session.id} at {_when(session.ended_at)}, {kept}")


@session_group.command("list")
@click.option("--limit", type=click.IntRange(1, 10000), default=100, show_default=True, help="Most recent N.")
@context_options
@json_option
@handle_errors
def session_list(limit: int, ctx: Context, as_json: bool) -> None:
    """List the context's sessions, newest first (incognito and erased sessions never appear).

    Example: pymem session list --tenant acme --json
    """
    with open_store() as store:
        sessions = list_sessions(store.bind(ctx), limit=limit)
    if as_json:
        echo_json([s.to_json() for s in sessions])
        return
    _session_table(sessions)


@session_group.command("show")
@click.argument("session_id", metavar="ID")
@context_options
@json_option
@handle_errors
def session_show(session_id: str, ctx: Context, as_json: bool) -> None:
    """Show one session and its stored summary (what an agent's recall_session(ID) returns).

    Example: pymem session show chat-42
    """
    with open_store() as store:
        found = recall_session(store.bind(ctx), session_id)
    if as_json:
        echo_json(found.to_json())
        return
    click.echo(f"session {found.id} ({found.surface}), started {_when(found.started_at)}"
               + (f", ended {_when(found.ended_at)}" if found.ended_at else ", open"))
    click.echo(f"  topic: {found.topic or '(none)'}")
    if found.withheld:
        click.echo(f"  summary withheld: {found.withheld}")
    else:
        click.echo(f"  summary: {found.summary or '(none)'}")


@session_group.command("summary")
@click.argument("session_id", metavar="ID")
@click.argument("summary")
@context_options
@json_option
@handle_errors
def session_summary(session_id: str, summary: str, ctx: Context, as_json: bool) -> None:
    """Set or replace session ID's summary (a ledger event; the old text is not kept).

    Example: pymem session summary chat-42 "Initech is invoiced in USD from January"
    """
    with open_store() as store:
        session = replace_summary(store.bind(ctx), session_id, summary)
    if as_json:
        echo_json(session.to_json())
        return
    click.echo(f"summary of {session.id} replaced")


@session_group.command("erase")
@click.argument("session_id", metavar="ID")
@click.option("--reason", required=True, help="Why (kept in the ledger; 1-300 characters).")
@context_options
@json_option
@handle_errors
def session_erase(session_id: str, reason: str, ctx: Context, as_json: bool) -> None:
    """Erase session ID's topic and summary; the id stays, so its memories and records still resolve.

    Example: pymem session erase chat-42 --reason "user asked to forget this conversation"
    """
    with open_store() as store:
        seq = erase_session(store.bind(ctx), session_id, reason)
    if as_json:
        echo_json({"session_id": session_id, "erased": True, "ledger_seq": seq})
        return
    click.echo(f"erased the topic and summary of {session_id}; reason at ledger seq {seq}")


@click.command("deliver")
@click.option("--session", "session_id", required=True, metavar="ID", help="The session whose turn this is.")
@click.option("--query", required=True, help="The user's message: what the recalled section is for.")
@click.option("--turn", type=click.IntRange(min=0), help="Turn number [default: one after the last recorded].")
@click.option("--budget", type=click.IntRange(1, 1_000_000), default=1000, show_default=True,
              help="Token budget of the whole block.")
@click.option("--top-k", type=click.IntRange(1, 1000), default=5, show_default=True, help="Recalled memories.")
@click.option("--floor", type=click.FloatRange(-1, 1),
              help="Similarity floor [default: PYMEM_SIMILARITY_FLOOR or 0.35].")
@click.option("--lesson-tag", "lesson_tags", multiple=True, metavar="TAG",
              help="A tag of the task at hand (repeatable): add the lessons for it.")
@click.option("--role", help="The role of the agent taking the task (with --lesson-tag; some roles get no lessons).")
@context_options
@json_option
@handle_errors
def deliver_command(session_id: str, query: str, turn: int | None, budget: int, top_k: int, floor: float | None,
                    lesson_tags: tuple[str, ...], role: str | None, ctx: Context, as_json: bool) -> None:
    """Print exactly the block an agent receives for this turn, and record the injection.

    The block is one envelope of reference data: a digest of the other sessions (id, time,
    surface, topic), the hot memories, and the memories recalled for QUERY (re-judged, above the
    similarity floor, ranked by similarity, trust tier and recency), within the token budget.
    With --lesson-tag, the lessons for a task with those tags come too (as `pymem lessons
    for-task` picks them, for --role), in a section of their own. The turn's injection record
    (ids, the lessons named as such, and the block's sha256) goes into the ledger; its seq is
    printed on stderr (in the JSON with --json). An incognito session receives nothing.

    Example: pymem deliver --session chat-43 --query "which currency does Initech pay in?" --lesson-tag billing --role coder
    """  # noqa: E501 (the example is one command line, as it is pasted)
    if role is not None and not lesson_tags:
        raise click.UsageError("--role goes with --lesson-tag")
    with open_store() as store:
        delivery = deliver_with_lessons(store.bind(ctx), session_id, query, lesson_tags or None, role=role, turn=turn,
                                        budget=budget, top_k=top_k, floor=floor, embedder=_embedder(store))
    if as_json:
        echo_json(delivery.to_json())
        return
    if delivery.incognito:
        stderr(f"session {session_id} is incognito: nothing delivered, nothing recorded")
        return
    click.echo(delivery.text)
    lessons = f", {len(delivery.lessons)} lessons" if lesson_tags else ""
    stderr(f"injection record: ledger seq {delivery.injection_seq} (turn {delivery.turn}, {delivery.tokens} of "
           f"{delivery.budget} tokens, {len(delivery.items)} memories{lessons}, {len(delivery.digest)} sessions"
           + (f", {delivery.truncated} left out)" if delivery.truncated else ")"))
    if delivery.lessons:
        stderr(f"  lessons: {', '.join(lesson.id for lesson in delivery.lessons)}")


@click.command("supersede")
@click.argument("old_id", metavar="OLD_ID")
@click.argument("text")
@click.option("--origin", type=ORIGIN_CHOICE, required=True, help="Where the new text came from.")
@click.option("--session", "session_id", help="The session it was learnt in.")
@click.option("--source", help="Who or what produced it.")
@click.option("--citation", help="Where it can be checked (tool_output needs one).")
@context_options
@json_option
@handle_errors
def supersede_command(old_id: str, text: str, origin: str, session_id: str | None, source: str | None,
                      citation: str | None, ctx: Context, as_json: bool) -> None:
    """Replace memory OLD_ID by TEXT without overwriting it: the old row is marked superseded.

    The new memory goes through the write gate (exit 1 if refused, and nothing changes); the old
    one keeps its text, gets invalidated_at and superseded_by, and `pymem recall --as-of` a time
    before the change still finds it.

    Example: pymem supersede 6f1c... "Initech now pays in USD" --origin user_asserted --session chat-43
    """
    provenance = Provenance(origin=Origin(origin), session_id=session_id, source=source, citation=citation)
    with open_store() as store:
        try:
            out = supersede(store.bind(ctx), old_id, text, provenance, embedder=_embedder(store))
        except MemoryAdmissionError as exc:
            report_refusal(exc, as_json)
    if as_json:
        echo_json({**_admitted_json(out), "supersedes": old_id})
        return
    click.echo(f"admitted {out['id']}, superseding {old_id}")


@click.command("erase")
@click.argument("memory_id", metavar="ID")
@click.option("--reason", required=True, help="Why (kept in the ledger; 1-300 characters).")
@context_options
@json_option
@handle_errors
def erase_command(memory_id: str, reason: str, ctx: Context, as_json: bool) -> None:
    """Erase memory ID: content, record and embedding go, its hash stays (the chain still verifies).

    The erasure and its reason are ledger events; the memory never returns in a recall, a
    delivery, an export or the inspector.

    Example: pymem erase 6f1c... --reason "user asked to forget it"
    """
    with open_store() as store:
        seq = erase(store.bind(ctx), memory_id, reason)
    if as_json:
        echo_json({"id": memory_id, "erased": True, "ledger_seq": seq})
        return
    click.echo(f"erased {memory_id}; reason at ledger seq {seq}")


@click.group("inspect", invoke_without_command=True)
@click.option("--web", is_flag=True, help="Serve the inspector's web pages (at /inspector) until interrupted.")
@click.option("--host", default="127.0.0.1", show_default=True, help="With --web: the address to listen on.")
@click.option("--port", type=click.IntRange(1, 65535), default=8090, show_default=True,
              help="With --web: the port to listen on.")
@click.option("--tenant", default=from_settings("PYMEM_TENANT"),
              help="With --web: the tenant of the tokens it prints [env: PYMEM_TENANT].")
@click.option("--actor", default=from_settings("PYMEM_ACTOR"),
              help="With --web: the actor of the tokens it prints [env: PYMEM_ACTOR].")
@click.option("--checkpoints", metavar="PATH", help="With --web: the signed checkpoints file to show (pymem anchor).")
@click.pass_context
@handle_errors
def inspect_group(click_ctx: click.Context, web: bool, host: str, port: int, tenant: str | None, actor: str | None,
                  checkpoints: str | None) -> None:
    """The memory inspector: what the tenant remembers, where each memory came from, where it went.

    With --web, its web pages on this machine's store (the embedded server without PYMEM_DSN):
    memories with search and filters, each memory's provenance, supersession chain, ledger
    history and turns; sessions and the block each turn received; the quarantine; refusals; the
    chain's integrity. Tokens are verified with PYMEM_JWT_KEY (or PYMEM_JWT_PUBLIC_KEY); without
    one, with a key made for this run. It prints an operator's and an auditor's token for
    --tenant and --actor to sign in with.

    Example: pymem inspect --web --tenant acme --actor alice --port 8090
    """
    if click_ctx.invoked_subcommand is not None:
        if web:
            raise click.UsageError("--web serves the pages; it takes no subcommand")
        return
    if not web:
        click.echo(click_ctx.get_help())
        return
    if not tenant or not actor:
        raise click.UsageError("--web needs --tenant and --actor (or PYMEM_TENANT and PYMEM_ACTOR) for its tokens")
    try:
        serve_inspector = pymem.serve_inspector
    except ImportError as exc:
        raise PymemCommandError(str(exc), exit_code=2) from exc
    serve_inspector(tenant, actor, host, port, settings=command_settings(), checkpoints=checkpoints)


@inspect_group.command("memories")
@click.option("--session", "session_id", metavar="ID", help="Only memories written in this session.")
@click.option("--hot", "hot_only", is_flag=True, help="Only hot memories (delivered every turn).")
@click.option("--superseded", is_flag=True, help="Include superseded memories.")
@click.option("--limit", type=click.IntRange(1, 10000), default=100, show_default=True, help="Most recent N.")
@context_options
@json_option
@handle_errors
def inspect_memories_command(session_id: str | None, hot_only: bool, superseded: bool, limit: int, ctx: Context,
                             as_json: bool) -> None:
    """List the context's live memories, newest first, with tier, session and supersession.

    Example: pymem inspect memories --session chat-42 --superseded
    """
    with open_store() as store:
        rows = inspect_memories(store.bind(ctx), session_id=session_id, hot_only=hot_only,
                                include_superseded=superseded, limit=limit)
    if as_json:
        echo_json([r.to_json() for r in rows])
        return
    table([{"id": r.id, "created": _when(r.created_at), "tier": r.tier, "session": r.session_id,
            "hot": "hot" if r.hot else "", "superseded_by": r.superseded_by, "text": _short(r.text, 50)} for r in rows],
          ["id", "created", "tier", "session", "hot", "superseded_by", "text"])


@inspect_group.command("memory")
@click.argument("memory_id", metavar="ID")
@context_options
@json_option
@handle_errors
def inspect_memory_command(memory_id: str, ctx: Context, as_json: bool) -> None:
    """Show one memory: its text, provenance, ledger history and every turn it entered.

    Example: pymem inspect memory 6f1c...
    """
    with open_store() as store:
        m = inspect_memory(store.bind(ctx), memory_id)
    if as_json:
        echo_json(m.to_json())
        return
    click.echo(f"memory {m.id} ({m.kind}{', hot' if m.hot else ''}), created {_when(m.created_at)}")
    click.echo(f"  origin {m.origin}, tier {m.tier}, session {m.session_id or '(none)'}, "
               f"adapter {m.source_adapter or '(operator)'}")
    if m.invalidated_at:
        click.echo(f"  superseded at {_when(m.invalidated_at)} by {m.superseded_by}")
    click.echo(f"  provenance {json.dumps(m.provenance, sort_keys=True) if m.provenance else '(none)'}")
    click.echo(f"  text: {m.text}")
    click.echo("history:")
    table([{"seq": h.seq, "event": h.event, "at": _when(h.occurred_at), "actor": h.actor, "adapter": h.adapter}
           for h in m.history], ["seq", "event", "at", "actor", "adapter"])
    click.echo("injected into:")
    table([{"seq": i.seq, "session": i.session_id, "turn": i.turn, "section": i.section, "at": _when(i.occurred_at)}
           for i in m.injections], ["seq", "session", "turn", "section", "at"])


@click.command("injections")
@click.option("--session", "session_id", metavar="ID", help="What this session's turn had injected.")
@click.option("--turn", type=click.IntRange(min=0), help="That turn [default: the last recorded one].")
@click.option("--memory", "memory_id", metavar="ID", help="Which turns this memory entered.")
@context_options
@json_option
@handle_errors
def audit_injections(session_id: str | None, turn: int | None, memory_id: str | None, ctx: Context,
                     as_json: bool) -> None:
    """What did a turn see? Which turns did a memory enter? (pymem.audit_injections)

    With --session: the injection record of a turn (the last one unless --turn): the ids of
    every memory and digest session in its block and the block's sha256. With --memory: every
    turn the memory entered, and in which section.

    Example: pymem audit injections --session chat-43 --turn 0 --json
    """
    if (session_id is None) == (memory_id is None):
        raise click.UsageError("give --session ID (and optionally --turn N) or --memory ID")
    if memory_id is not None and turn is not None:
        raise click.UsageError("--turn goes with --session")
    with open_store() as store:
        memories = store.bind(ctx)
        if memory_id is not None:
            by_memory = memory_injections(memories, memory_id)
        else:
            assert session_id is not None  # exactly one of the two was given (checked above)
            rows = session_injections(memories, session_id, turn=turn)
    if memory_id is not None:
        if as_json:
            echo_json([r.to_json() for r in by_memory])
            return
        table([{"seq": r.seq, "session": r.session_id, "turn": r.turn, "section": r.section,
                "at": _when(r.occurred_at)} for r in by_memory], ["seq", "session", "turn", "section", "at"])
        return
    if as_json:
        echo_json([r.to_json() for r in rows])
        return
    if not rows:
        raise PymemError(f"no injection record for session {(session_id or '')[:100]!r} in this context")
    for r in rows:
        click.echo(f"seq {r.seq}: session {r.session_id} turn {r.turn} at {_when(r.occurred_at)}, {r.tokens} of "
                   f"{r.budget} tokens ({r.counter}), {r.truncated} left out")
        click.echo(f"  memories: {', '.join(r.memory_ids) or '(none)'}")
        click.echo(f"  hot: {', '.join(r.hot_ids) or '(none)'}")
        click.echo(f"  lessons: {', '.join(r.lesson_ids) or '(none)'}")
        click.echo(f"  digest sessions: {', '.join(r.digest_sessions) or '(none)'}")
        click.echo(f"  block sha256: {r.block_sha256}")


def register(main: click.Group) -> None:
    main.add_command(session_group)
    main.add_command(deliver_command)
    main.add_command(supersede_command)
    main.add_command(erase_command)
    main.add_command(inspect_group)
    audit_group.add_command(audit_injections)


__all__ = ["register"]
