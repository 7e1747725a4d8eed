"""`pymem lessons ...`, `pymem conventions ...` and `pymem facts ...`: lessons, convention receipts
and facts shared between the tasks of a run, on the command line."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from .. import Context, MemoryAdmissionError
from ..conventions import active_conventions, check_conventions, file_review_correction, retire_convention
from ..errors import ConventionConflict
from ..facts import follow, publish, subscribe
from ..lessons import file_lesson, lessons_for_task, list_lessons
from ..vocabulary import LESSON_TYPES, ORIGINS
from .common import context_options, echo_json, handle_errors, json_lines_option, json_option, open_store, stderr, table
from .memory_commands import _embedder, _short, report_refusal

if TYPE_CHECKING:
    from datetime import datetime

    from ..conventions import Convention
    from ..facts import Fact

TYPE_CHOICE = click.Choice(list(LESSON_TYPES), case_sensitive=False)
ORIGIN_CHOICE = click.Choice(list(ORIGINS))


def _when(value: datetime | None) -> str | None:
    return value.isoformat(timespec="seconds") if value else None


# -- lessons -------------------------------------------------------------------------------------

@click.group("lessons")
def lessons_group() -> None:
    """File lessons, list them, and print the lessons block for a task.

    A lesson is a short note one task leaves for the next, found by its tags. Its confidence
    decays at read time with a half-life set by its type (user 365 days, feedback 180, reference
    90, project 30, episode 7); filing a near-duplicate confirms the lesson on file instead.

    Example: pymem lessons file "Webhook retries must be idempotent" --tag webhooks --type project
    """


@lessons_group.command("file")
@click.argument("text")
@click.option("--tag", "tags", multiple=True, required=True, help="A tag the lesson is found by (repeatable).")
@click.option("--type", "memory_type", type=TYPE_CHOICE, required=True, help="The lesson's type (sets its decay).")
@click.option("--confidence", type=click.FloatRange(0, 1), help="How far it is believed (the policy caps it).")
@click.option("--source-task", metavar="ID", help="The task that learned it.")
@click.option("--origin", type=ORIGIN_CHOICE, default="model_inferred", show_default=True,
              help="Where it came from (the admission policy decides from this).")
@context_options
@json_option
@handle_errors
def lessons_file(text: str, tags: tuple[str, ...], memory_type: str, confidence: float | None,
                 source_task: str | None, origin: str, ctx: Context, as_json: bool) -> None:
    """File lesson TEXT through the write gate, or confirm its near-duplicate.

    A lesson of the same type, scope and writer whose tags overlap by a Jaccard index of at least
    0.75 and whose words by more than 0.8 is confirmed instead: its version goes up and its
    confidence becomes the larger of the two. A refused lesson exits 1 (audited, nothing stored).

    Example: pymem lessons file "Run migrations with a lock timeout" --tag db --tag migrations --type project --source-task T-17
    """  # noqa: E501 (the example is one command line, as it is pasted)
    with open_store() as store:
        try:
            filed = file_lesson(store.bind(ctx), text, tags, memory_type, confidence, source_task, origin=origin,
                                embedder=_embedder(store))
        except MemoryAdmissionError as exc:
            report_refusal(exc, as_json)
    if as_json:
        echo_json(filed.to_json())
    elif filed.merged:
        click.echo(f"confirmed lesson {filed.id}: version {filed.version}, confidence {filed.confidence:.2f} "
                   f"(tags {filed.tag_similarity:.2f}, words {filed.word_similarity:.2f} alike)")
    else:
        click.echo(f"filed lesson {filed.id} ({filed.memory_type}, confidence {filed.confidence:.2f})")


@lessons_group.command("list")
@click.option("--type", "memory_type", type=TYPE_CHOICE, help="Only lessons of this type.")
@click.option("--tag", help="Only lessons with this tag.")
@click.option("--limit", type=click.IntRange(1, 10000), default=100, show_default=True, help="Most recent N.")
@context_options
@json_option
@handle_errors
def lessons_list(memory_type: str | None, tag: str | None, limit: int, ctx: Context, as_json: bool) -> None:
    """List the context's lessons, last filed first, with their confidence now (decayed for age).

    Reading never rewrites the stored confidence; a lesson last filed more than a day ago is stale.

    Example: pymem lessons list --tag migrations --json
    """
    with open_store() as store:
        found = list_lessons(store.bind(ctx), memory_type=memory_type, tag=tag, limit=limit)
    if as_json:
        echo_json([lesson.to_json() for lesson in found])
        return
    table([{"id": x.id, "type": x.memory_type, "version": x.version, "stored": f"{x.confidence:.2f}",
            "now": f"{x.decayed_confidence:.2f}", "filed": _when(x.filed_at), "stale": "yes" if x.stale else "",
            "tags": ",".join(x.tags), "text": _short(x.content, 50)} for x in found],
          ["id", "type", "version", "stored", "now", "filed", "stale", "tags", "text"])


@lessons_group.command("for-task")
@click.option("--tag", "tags", multiple=True, required=True, help="A tag of the task (repeatable).")
@click.option("--role", help="The role of the agent taking the task (some roles never receive lessons).")
@click.option("--limit", type=click.IntRange(1, 100), default=5, show_default=True, help="At most this many lessons.")
@click.option("--budget", type=click.IntRange(1, 1_000_000), default=5000, show_default=True,
              help="Token budget of the block.")
@context_options
@json_option
@handle_errors
def lessons_for_task_command(tags: tuple[str, ...], role: str | None, limit: int, budget: int, ctx: Context,
                             as_json: bool) -> None:
    """Print the lessons block a task tagged TAG would receive.

    The lessons sharing a tag with the task, re-judged like recalled memories, ranked by shared
    tags plus confidence after decay, the best five inside the reference-data envelope, each with
    its type, tags, confidence, source task and a staleness note, within the budget (a notice says
    how many were left out). Roles in PYMEM_LESSONS_EXCLUDED_ROLES (default manager, planner) get
    nothing.

    Example: pymem lessons for-task --tag db --tag migrations --role coder
    """
    with open_store() as store:
        found = lessons_for_task(store.bind(ctx), tags, role=role, limit=limit, budget=budget)
    if as_json:
        echo_json(found.to_json())
        return
    if found.excluded_role:
        stderr(f"role {found.role} receives no lessons (PYMEM_LESSONS_EXCLUDED_ROLES)")
        return
    click.echo(found.text)
    stderr(f"{len(found.lessons)} lesson(s) of {found.candidates} candidate(s), {found.tokens} of {found.budget} tokens"
           + (f", {found.truncated} left out for the budget" if found.truncated else "")
           + (f", {len(found.withheld)} withheld" if found.withheld else ""))


# -- conventions ------------------------------------------------------------------------------------

@click.group("conventions")
def conventions_group() -> None:
    """File review corrections as signed, commit-pinned rules; list, retire and check them.

    Each correction is a feedback lesson plus a receipt signed with the installation's key and
    chained in the ledger; `pymem verify` checks every receipt's signature and anchor.

    Example: pymem conventions file "Indent Makefile recipes with tabs" --subject Makefile --base-commit 3f2a... --assertion "make lint-tabs"
    """  # noqa: E501 (the example is one command line, as it is pasted)


def _rule_line(rule: Convention) -> str:
    symbol = f" {rule.subject_symbol}" if rule.subject_symbol else ""
    return (f"{rule.id} v{rule.version} {rule.status}: {rule.subject}{symbol} @ {rule.base_commit[:12]} | "
            f"{_short(rule.rule_text, 60)} | check: {_short(rule.assertion, 40)}")


@conventions_group.command("file")
@click.argument("rule")
@click.option("--subject", required=True, metavar="PATH", help="The path or glob the rule applies to.")
@click.option("--base-commit", required=True, metavar="SHA", help="The full commit SHA the rule was stated against.")
@click.option("--assertion", required=True, metavar="CMD",
              help="The command that checks the rule (never run by pymem).")
@click.option("--symbol", metavar="NAME", help="The symbol it is about; the rule expires when it no longer resolves.")
@click.option("--tag", "tags", multiple=True, help="More tags for its lesson (repeatable).")
@click.option("--source-task", metavar="ID", help="The review or task the correction came from.")
@context_options
@json_option
@handle_errors
def conventions_file(rule: str, subject: str, base_commit: str, assertion: str, symbol: str | None,
                     tags: tuple[str, ...], source_task: str | None, ctx: Context, as_json: bool) -> None:
    """File review correction RULE: a feedback lesson and a signed receipt.

    The same correction again raises the receipt's version. A correction that contradicts a rule
    in force (same subject and symbol, opposite polarity, the same words otherwise) is refused
    with both receipt ids (exit 1), and nothing is filed.

    Example: pymem conventions file "Name migrations NNNN_slug.sql" --subject "sql/migrations/*.sql" --base-commit 3f2a9c... --assertion "pytest tests/migration"
    """  # noqa: E501 (the example is one command line, as it is pasted)
    with open_store() as store:
        try:
            filed = file_review_correction(store.bind(ctx), rule, subject, base_commit, assertion, symbol, tags=tags,
                                           source_task=source_task, embedder=_embedder(store))
        except MemoryAdmissionError as exc:
            report_refusal(exc, as_json)
        except ConventionConflict as exc:
            if as_json:
                echo_json({"decision": "refused", "reason": str(exc), "receipt_id": exc.receipt_id,
                           "conflicting_id": exc.conflicting_id})
                raise SystemExit(1) from exc
            raise
    if as_json:
        echo_json(filed.to_json())
        return
    verb = "confirmed" if filed.confirmed else "filed"
    click.echo(f"{verb} {_rule_line(filed.receipt)}")
    click.echo(f"  lesson {filed.lesson.id} (version {filed.lesson.version}); signed by "
               f"{filed.receipt.public_key[:16]}…")


@conventions_group.command("list")
@context_options
@json_option
@handle_errors
def conventions_list(ctx: Context, as_json: bool) -> None:
    """List the rules in force and print their ruleset hash.

    The hash covers what each rule demands (subject, symbol, rule-text hash, pinned commit,
    assertion, version, status), never ids or filing times: two installations with the same rules
    in force print the same hash.

    Example: pymem conventions list --json
    """
    with open_store() as store:
        active = active_conventions(store.bind(ctx))
    if as_json:
        echo_json(active.to_json())
        return
    for rule in active.rules:
        click.echo(_rule_line(rule))
    if not active.rules:
        click.echo("(no rules in force)")
    click.echo(f"ruleset_hash {active.ruleset_hash}")


@conventions_group.command("retire")
@click.argument("receipt_id", metavar="ID")
@click.option("--reason", default="retired by hand", show_default=True, help="Why (one line, kept in the ledger).")
@context_options
@json_option
@handle_errors
def conventions_retire(receipt_id: str, reason: str, ctx: Context, as_json: bool) -> None:
    """Take rule ID out of force: a convention.retired event; the receipt itself stays.

    Only the adapter that filed it, or the operator, may retire it.

    Example: pymem conventions retire cv-3b1f... --reason "the team moved to spaces"
    """
    with open_store() as store:
        rule = retire_convention(store.bind(ctx), receipt_id, reason)
    if as_json:
        echo_json(rule.to_json())
        return
    click.echo(f"retired {_rule_line(rule)}")


@conventions_group.command("check")
@click.option("--repo", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="The git repository whose HEAD the rules' symbols must resolve in.")
@context_options
@json_option
@handle_errors
def conventions_check(repo: Path, ctx: Context, as_json: bool) -> None:
    """Expire every rule in force whose symbol no longer resolves at HEAD of the repository.

    A symbol resolves when its last component occurs as a whole word in a file matching the
    rule's subject in HEAD's tree. Each expired rule gets a convention.expired event naming the
    commit. Assertions are never run.

    Example: pymem conventions check --repo .
    """
    with open_store() as store:
        checked = check_conventions(store.bind(ctx), repo)
    if as_json:
        echo_json(checked.to_json())
        return
    for rule in checked.expired:
        click.echo(f"expired {_rule_line(rule)}: {rule.ended_reason}")
    for rule in checked.not_ended:
        click.echo(f"no longer resolves, but filed by another adapter: {_rule_line(rule)}")
    click.echo(f"checked {checked.checked} rule(s) with a symbol at {checked.head_commit[:12]}: "
               f"{len(checked.expired)} expired")


# -- facts ----------------------------------------------------------------------------------------

@click.group("facts")
def facts_group() -> None:
    """Publish facts for the other tasks of a run, and read or follow them.

    Example: pymem facts publish api-schema users "id, email" --run r-1 --producer-task t-7
    """


def _fact_line(fact: Fact) -> str:
    by = fact.source_adapter or "operator"
    task = f" task {fact.producer_task}" if fact.producer_task else ""
    return f"{_when(fact.published_at)} {fact.tag}/{fact.key} by {by}{task}: {fact.value}"


@facts_group.command("publish")
@click.argument("tag")
@click.argument("key")
@click.argument("value")
@click.option("--run", "run_id", metavar="RUN", help="The run whose tasks may read it (required unless --tenant-wide).")
@click.option("--producer-task", metavar="ID", help="The task publishing it.")
@click.option("--tenant-wide", is_flag=True, help="For every run of the tenant, not the tasks of one run.")
@context_options
@json_option
@handle_errors
def facts_publish(tag: str, key: str, value: str, run_id: str | None, producer_task: str | None, tenant_wide: bool,
                  ctx: Context, as_json: bool) -> None:
    """Publish fact KEY = VALUE under TAG, tagged with the context's adapter.

    Example: pymem facts publish api-schema users "id, email, created_at" --run r-1 --producer-task t-7
    """
    with open_store() as store:
        fact = publish(store.bind(ctx), tag, key, value, "tenant" if tenant_wide else "run", run_id=run_id,
                       producer_task=producer_task)
    if as_json:
        echo_json(fact.to_json())
        return
    click.echo(f"published {fact.id} ({fact.tag}/{fact.key}, content hash {fact.content_hash[:16]}…)")


@facts_group.command("subscribe")
@click.argument("tag")
@click.option("--run", "run_id", metavar="RUN", help="The run whose facts to read (required unless --tenant-wide).")
@click.option("--from-adapter", "adapters", multiple=True, metavar="A",
              help="Read only facts these adapters published (repeatable; untagged facts are then excluded).")
@click.option("--tenant-wide", is_flag=True, help="Read the tenant-wide facts instead of one run's.")
@click.option("--follow", "following", is_flag=True, help="Keep printing new facts as they are published.")
@click.option("--timeout", type=click.FloatRange(min=0),
              help="With --follow: stop after this many seconds without a new fact [default: never].")
@context_options
@json_lines_option
@handle_errors
def facts_subscribe(tag: str, run_id: str | None, adapters: tuple[str, ...], tenant_wide: bool, following: bool,
                    timeout: float | None, ctx: Context, as_json: bool) -> None:
    """Print the facts published under TAG for the run (oldest first), one per line.

    --from-adapter is a strict allow-list. --follow streams new facts as they are published
    (Postgres LISTEN/NOTIFY on a connection of its own; nothing is polled) until interrupted.

    Example: pymem facts subscribe api-schema --run r-1 --from-adapter agent-a --follow
    """
    allow = list(adapters) if adapters else None
    scope = "tenant" if tenant_wide else "run"
    with open_store() as store:
        memories = store.bind(ctx)
        if not following:
            facts = subscribe(memories, tag, scope, run_id=run_id, read_only_from_adapters=allow)
            for fact in facts:
                echo_json(fact.to_json()) if as_json else click.echo(_fact_line(fact))
            return
        with follow(memories, tag, scope, run_id=run_id, read_only_from_adapters=allow, timeout=timeout) as stream:
            try:
                for fact in stream:
                    echo_json(fact.to_json()) if as_json else click.echo(_fact_line(fact))
            except KeyboardInterrupt:
                pass


def register(main: click.Group) -> None:
    main.add_command(lessons_group)
    main.add_command(conventions_group)
    main.add_command(facts_group)


__all__ = ["register", "lessons_group", "conventions_group", "facts_group"]
