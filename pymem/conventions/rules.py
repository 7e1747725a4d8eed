"""What a review rule says, when two rules contradict, and the ruleset hash: pure functions.

A rule's text is kept as written, with runs of whitespace made single spaces and the ends
stripped; its hash is the sha256 of that text (UTF-8).

Contradiction, deterministically. Two rules contradict when all of these hold:

1. they bind the same subject (the same path or glob, compared as stored) and the same symbol
   (both none, or equal);
2. their polarities differ: a rule is negative when its words contain an odd number of negating
   words (`NEGATIONS`: not, no, never, avoid, don't, cannot, ...), positive otherwise, so
   "Never use tabs" is negative and "Do not never use tabs" positive;
3. what they are about is the same: the Jaccard index of their core words, that is their words
   without negating words and without the modal filler in `FILLER` (always, must, should, do,
   ...), is above 0.8, the bar two lessons' texts must clear to be near-duplicates.

So "Always use tabs in Makefiles" and "Never use tabs in Makefiles" contradict; "Use tabs" and
"Never use tabs in Python files" do not (different core), nor do two rules on different subjects.
Words are runs of letters and digits (an apostrophe inside a word keeps it one word), casefolded.

The ruleset hash is over what each rule in force demands and nothing else: for every rule its
subject, symbol, rule-text hash, pinned base commit, assertion, version and status, each rule as
canonical JSON, the rules sorted by that text, under a format name, hashed with sha256 and written
`sha256:<hex>`. Receipt ids, filing times, keys and signatures are left out, so two
installations whose rules in force agree compute the same hash whatever order they were filed in.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any, cast

from ..errors import InvalidArguments
from ..vocabulary import MAX_TAG, canonical_json, is_plain_text

__all__ = ["NEGATIONS", "FILLER", "RULESET_FORMAT", "MAX_RULE_CHARS", "MAX_ASSERTION_CHARS", "normalise_rule",
           "rule_words", "is_negative", "core_words", "contradicts", "ruleset_hash", "check_rule_text",
           "check_subject", "check_symbol", "check_commit", "check_assertion", "demand"]

NEGATIONS = frozenset({"not", "no", "never", "avoid", "don't", "dont", "doesn't", "doesnt", "mustn't", "mustnt",
                       "shouldn't", "shouldnt", "cannot", "can't", "cant", "won't", "wont", "forbid", "forbidden"})
FILLER = frozenset({"always", "must", "should", "shall", "do", "does", "please"})
RULESET_FORMAT = "pymem.ruleset.v1"
MAX_RULE_CHARS = 2000
MAX_ASSERTION_CHARS = 1000
MAX_SUBJECT_CHARS = MAX_TAG  # the subject is also the feedback lesson's tag
CORE_THRESHOLD = Fraction(4, 5)

_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?")
_SYMBOL = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:]{0,199}$")
_COMMIT = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")


def normalise_rule(text: str) -> str:
    return " ".join(text.split())


def rule_words(text: str) -> list[str]:
    return [w.casefold() for w in _WORD.findall(text.replace("\u2019", "'"))]


def is_negative(text: str) -> bool:
    return sum(1 for w in rule_words(text) if w in NEGATIONS) % 2 == 1


def core_words(text: str) -> frozenset[str]:
    return frozenset(w for w in rule_words(text) if w not in NEGATIONS and w not in FILLER)


def _core_similarity(a: str, b: str) -> Fraction:
    x, y = core_words(a), core_words(b)
    union = x | y
    return Fraction(len(x & y), len(union)) if union else Fraction(0)


def contradicts(subject_a: str, symbol_a: str | None, rule_a: str, subject_b: str, symbol_b: str | None,
                rule_b: str) -> bool:
    """The contradiction rule of the module docstring."""
    return (subject_a == subject_b and symbol_a == symbol_b and is_negative(rule_a) != is_negative(rule_b)
            and _core_similarity(rule_a, rule_b) > CORE_THRESHOLD)


def demand(rule: Mapping[str, Any]) -> dict[str, Any]:
    """What a rule demands: the fields the ruleset hash covers (rule_sha256 as hex)."""
    return {"subject": rule["subject"], "subject_symbol": rule["subject_symbol"], "rule_sha256": rule["rule_sha256"],
            "base_commit": rule["base_commit"], "assertion": rule["assertion"], "version": rule["version"],
            "status": rule["status"]}


def ruleset_hash(rules: Iterable[Mapping[str, Any]]) -> str:
    """sha256 over the sorted demands of `rules` (see the module docstring)."""
    demands = sorted((demand(r) for r in rules), key=canonical_json)
    body = canonical_json({"format": RULESET_FORMAT, "rules": demands})
    return "sha256:" + hashlib.sha256(body.encode("utf-8")).hexdigest()


# -- checks --------------------------------------------------------------------------------------

def _plain(value: Any, what: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidArguments(f"{what} must be a non-empty string")
    if len(value) > limit or not is_plain_text(value):
        raise InvalidArguments(f"{what} must be one line of at most {limit} characters, without control or format "
                               "characters")
    return value


def check_rule_text(text: Any) -> str:
    if isinstance(text, str):
        text = normalise_rule(text)
    return _plain(text, "the rule", MAX_RULE_CHARS)


def check_subject(subject: Any) -> str:
    """A path or glob relative to the repository root, with forward slashes."""
    subject = _plain(subject, "the subject", MAX_SUBJECT_CHARS).strip().replace("\\", "/")
    while subject.startswith("./"):
        subject = subject[2:]
    if not subject or subject.startswith("/") or ".." in subject.split("/"):
        raise InvalidArguments("the subject must be a path or glob relative to the repository, without '..'")
    return cast("str", subject)


def check_symbol(symbol: Any) -> str | None:
    if symbol is None:
        return None
    if not isinstance(symbol, str) or not _SYMBOL.match(symbol):
        raise InvalidArguments("a symbol is an identifier, optionally dotted (letters, digits, _, . and :), at most "
                               "200 characters")
    return symbol


def check_commit(commit: Any) -> str:
    """A full commit id: 40 (SHA-1) or 64 (SHA-256) hex digits, kept lowercase."""
    if not isinstance(commit, str) or not _COMMIT.match(commit.strip().lower()):
        raise InvalidArguments("the base commit must be a full commit SHA (40 or 64 hex digits)")
    return commit.strip().lower()


def check_assertion(assertion: Any) -> str:
    return _plain(assertion, "the assertion", MAX_ASSERTION_CHARS).strip()
