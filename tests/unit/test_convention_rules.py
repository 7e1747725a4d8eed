"""What contradicts what, and the ruleset hash (no database)."""

from __future__ import annotations

import random

import pytest

from pymem import InvalidArguments
from pymem.conventions.rules import (
    check_commit,
    check_rule_text,
    check_subject,
    check_symbol,
    contradicts,
    core_words,
    is_negative,
    ruleset_hash,
)


@pytest.mark.parametrize("a,b,expected", [
    ("Indent recipes with tabs", "Never indent recipes with tabs", True),
    ("Always indent recipes with tabs", "Do not indent recipes with tabs", True),
    ("Don't log request bodies", "Log request bodies", True),
    ("Indent recipes with tabs", "Indent recipes with tabs", False),          # same polarity: a repeat
    ("Never indent recipes with tabs", "Never use tabs", False),             # same polarity
    ("Indent recipes with tabs", "Never indent Python files with tabs", False),  # another core
    ("Do not never indent with tabs", "Never indent with tabs", True),      # a double negation is positive
])
def test_contradiction_on_one_subject(a, b, expected):
    assert contradicts("Makefile", None, a, "Makefile", None, b) is expected
    assert contradicts("Makefile", None, b, "Makefile", None, a) is expected  # symmetric


def test_other_subjects_or_symbols_never_contradict():
    a, b = "Indent recipes with tabs", "Never indent recipes with tabs"
    assert not contradicts("Makefile", None, a, "docs/Makefile", None, b)
    assert not contradicts("src/*.py", "x.f", a, "src/*.py", "x.g", b)
    assert not contradicts("src/*.py", "x.f", a, "src/*.py", None, b)


def test_polarity_and_core_words():
    assert is_negative("Never retry") and not is_negative("Retry")
    assert is_negative("Don\u2019t retry")  # a typographic apostrophe is an apostrophe
    assert core_words("You must always retry, never panic") == {"you", "retry", "panic"}


RULES = [{"subject": f"src/m{i}.py", "subject_symbol": None, "rule_sha256": f"{i:064x}", "base_commit": "a" * 40,
          "assertion": "pytest", "version": 1 + i % 2, "status": "active", "id": f"cv-{i}", "filed_at": i}
         for i in range(6)]


def test_the_ruleset_hash_ignores_order_ids_and_times():
    shuffled = [dict(r, id=f"other-{n}", filed_at=100 - n) for n, r in enumerate(random.Random(7).sample(RULES, 6))]
    assert ruleset_hash(RULES) == ruleset_hash(shuffled)
    assert ruleset_hash([]) == ruleset_hash([])
    for field, value in (("version", 9), ("status", "retired"), ("base_commit", "b" * 40), ("assertion", "make"),
                         ("subject", "x"), ("rule_sha256", "f" * 64), ("subject_symbol", "s")):
        changed = [dict(RULES[0], **{field: value}), *RULES[1:]]
        assert ruleset_hash(changed) != ruleset_hash(RULES), field


def test_checks():
    assert check_rule_text("  Indent   with\ttabs ") == "Indent with tabs"
    assert check_subject("./src\\app.py") == "src/app.py"
    assert check_commit("A" * 40) == "a" * 40
    assert check_symbol(None) is None and check_symbol("pkg.mod:Class") == "pkg.mod:Class"
    for bad in (lambda: check_subject("/abs"), lambda: check_subject("a/../b"), lambda: check_commit("a" * 39),
                lambda: check_symbol("1abc"), lambda: check_rule_text("x" * 2001), lambda: check_rule_text(None)):
        with pytest.raises(InvalidArguments):
            bad()
