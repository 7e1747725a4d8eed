"""`pymem eval admission`: the write gate's content check, measured on sources it was not tuned on."""

from __future__ import annotations

import click

from ..admission import AdmissionEvaluation, evaluate_admission
from .common import echo_json, handle_errors, json_option, open_store, stderr, workshop


@click.group("eval")
def eval_group() -> None:
    """Offline evaluations of pymem's checks.

    Example: pymem eval admission
    """


def _rate(k: int, n: int) -> str:
    return "n/a" if n == 0 else f"{100.0 * k / n:.1f} % ({k}/{n})"


def format_evaluation(ev: AdmissionEvaluation) -> str:
    """The leave-one-source-out table as text."""
    rows = [("held-out source", "payloads refused", "held", "signatures alone", "benign falsely refused", "held",
             "threshold")]
    for s in ev.sources:
        rows.append((s.source, _rate(s.payloads_refused, s.payloads), _rate(s.payloads_held, s.payloads),
                     _rate(s.payloads_signatures, s.payloads), _rate(s.benign_refused, s.benign),
                     _rate(s.benign_held, s.benign), f"{s.threshold:.3f}"))
    payloads = sum(s.payloads for s in ev.sources)
    rows.append(("all (held out)", _rate(sum(s.payloads_refused for s in ev.sources), payloads),
                 _rate(sum(s.payloads_held for s in ev.sources), payloads),
                 _rate(sum(s.payloads_signatures for s in ev.sources), payloads),
                 _rate(ev.benign_refused, ev.benign), _rate(ev.benign_held, ev.benign), ""))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    goals = f"goals: every source >= {100 * ev.payload_goal:.0f} % of payloads refused"
    if ev.stopped_goal is not None:
        goals += f" and >= {100 * ev.stopped_goal:.0f} % refused or held"
    goals += f", benign <= {100 * ev.benign_goal:.0f} % refused"
    if ev.benign_held_goal is not None:
        goals += f" and <= {100 * ev.benign_held_goal:.0f} % held"
    lines += ["", f"benign notes falsely refused overall: {_rate(ev.benign_refused, ev.benign)}",
              f"benign notes held for review overall: {_rate(ev.benign_held, ev.benign)}", goals + " overall"]
    missed = ev.missed_goals
    lines.append("goals met" if not missed else "MISSED: " + "; ".join(missed))
    lines.append(ev.note)
    return "\n".join(lines)


@eval_group.command("admission")
@json_option
@handle_errors
def eval_admission(as_json: bool) -> None:
    """Print the leave-one-source-out table of the write gate's content check.

    For each source of the classifier's training data held out in turn (trained and calibrated
    on the others): how many of its payloads the gate refuses (signatures or classifier; the
    signatures alone beside it) and holds for review, how many of its benign notes it falsely
    refuses and holds, and the benign rates overall. Prints the committed result shipped with the
    classifier's weights; offline, instant. Recomputing it is a training command, from a source
    checkout with the train extra: python -m training.evaluate_loso.

    Example: pymem eval admission --json
    """
    ev = evaluate_admission()
    if as_json:
        echo_json(ev.to_json())
    else:
        click.echo(format_evaluation(ev))


@eval_group.command("recall")
@click.option("--data", "data_dir", required=True, type=click.Path(exists=True, file_okay=False),
              help="A folder of LoCoMo conversation files (*.json).")
@click.option("--limit", type=click.IntRange(1, 100_000), default=None, help="At most N questions per conversation.")
@click.option("--database", default="pymem_eval_recall", show_default=True,
              help="Scratch database to create (dropped and recreated) on the store's server.")
@click.option("--keep", is_flag=True, help="Keep the scratch database afterwards.")
@json_option
@handle_errors
def eval_recall(data_dir: str, limit: int | None, database: str, keep: bool, as_json: bool) -> None:
    """Measure recall and deliver on LoCoMo, beside BM25, raw cosine and their fusion.

    Each conversation becomes a tenant of a scratch database, each session a pymem session,
    each turn a memory admitted through the write gate; then for every answerable question
    (categories 1-4): any@k / all@k of recall (k = 5, 10), whether deliver's block carries an
    evidence turn, the same for the baselines computed in the same run, ingest and query
    times, and the similarity floor checked on held-out conversations. Progress on standard error.

    Development installs only: the evaluation is the source checkout's benchmarks/eval_recall.py,
    not in the wheel (pip install -e '.[test]' in a clone).

    Example: pymem eval recall --data ../shared/eval/locomo-dev
    """
    tool = workshop("eval_recall", "pymem eval recall")
    with open_store() as store:
        report = tool.run(store, data_dir, database=database, keep=keep, limit=limit, progress=stderr)
    if as_json:
        echo_json(report)
    else:
        click.echo(tool.format_report(report))


@eval_group.command("poisoning")
@click.option("--sample", type=click.IntRange(0, 100_000), default=20, show_default=True,
              help="Notes per source, label and surface (0: every note through every surface).")
@click.option("--surface", "surfaces", multiple=True,
              type=click.Choice(["library", "cli", "http", "mcp", "langgraph"]),
              help="Write through these surfaces only (repeatable) [default: all five].")
@click.option("--source", "sources", multiple=True, help="Only these sources of the data (repeatable).")
@click.option("--shipped", is_flag=True,
              help="Judge every source with the shipped classifier instead of its held-out variant (not held out).")
@click.option("--database", default="pymem_eval_poisoning", show_default=True,
              help="Scratch database to create (dropped and recreated) on the store's server.")
@click.option("--keep", is_flag=True, help="Keep the scratch database afterwards.")
@json_option
@handle_errors
def eval_poisoning(sample: int, surfaces: tuple[str, ...], sources: tuple[str, ...], shipped: bool, database: str,
                   keep: bool, as_json: bool) -> None:
    """Measure what poisoned notes reach a prompt: written through every surface, then delivered.

    Each note of the evaluation data (the classifier's training sources: payloads and benign
    notes) is written through the library, the command line, HTTP, MCP and the LangGraph store
    in session 1 of a tenant, then `deliver` runs for a related query (the note's opening words)
    in session 2 of the same tenant and scope. Per held-out source: the share of payloads
    refused, quarantined and admitted, and the share that reached a delivered block; of benign
    notes, the share refused, quarantined and delivered. Each source is judged by the classifier
    trained without it (needs the train extra; else --shipped is implied and the table says so).
    Offline; progress on standard error.

    Development installs only: the evaluation is the source checkout's benchmarks/eval_poisoning.py,
    not in the wheel (pip install -e '.[test,train]' in a clone).

    Example: pymem eval poisoning --sample 10 --surface library --surface http
    """
    tool = workshop("eval_poisoning", "pymem eval poisoning")
    with open_store() as store:
        report = tool.run(store, database=database, keep=keep, sample=sample,
                          surfaces=surfaces or tool.SURFACES, shipped=shipped, only=sources, progress=stderr)
    if as_json:
        echo_json(report)
    else:
        click.echo(tool.format_report(report))


def register(main: click.Group) -> None:
    main.add_command(eval_group)


__all__ = ["eval_group", "eval_admission", "eval_poisoning", "format_evaluation", "register"]
