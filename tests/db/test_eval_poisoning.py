"""`pymem eval poisoning` runs end to end: notes written through the surfaces, then delivered; a
held note is never in a delivered block, and the counts add up."""

from __future__ import annotations

import os

from benchmarks import eval_poisoning


def test_the_poisoning_evaluation_writes_delivers_and_counts(store):
    rows = eval_poisoning.project_rows()
    payloads = [r for r in rows if r["label"] == 1][:3]
    benign = [r for r in rows if r["label"] == 0][:3]
    report = eval_poisoning.run(store, database=f"pymem_eval_poisoning_{os.getpid()}", sample=0,
                                surfaces=("library", "cli", "http"), shipped=True, rows=payloads + benign)
    assert report["held_out"] is False and "NOT held out" in report["held_out_note"]
    totals = report["totals"]
    assert totals["payloads"]["n"] == 9 and totals["benign"]["n"] == 9
    for key in ("payloads", "benign"):
        t = totals[key]
        assert t["refused"] + t["quarantined"] + t["admitted"] + t["error"] == t["n"] and t["error"] == 0
        assert t["delivered_while_held"] == 0 and t["delivered"] <= t["admitted"]
    # the corpus's payloads are all refused by the signatures; its benign notes reach the block
    assert totals["payloads"]["refused"] == 9 and totals["payloads"]["delivered"] == 0
    assert totals["benign"]["delivered"] == totals["benign"]["admitted"] > 0
    text = eval_poisoning.format_report(report)
    assert "| project-corpus | 3 |" not in text and "| project-corpus | 9 |" in text
