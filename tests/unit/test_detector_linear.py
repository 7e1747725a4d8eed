"""The detector's linear rewrites find a match exactly where the patterns they replace did.

Each fragment that rescanned a long run of text from every position (so that a 64 KiB note without
whitespace took seconds to minutes) was rewritten to start at the run's start and never rescan it.
Here each rewrite is compared with the original, kept as it was, on text built from the characters
and words both are about: the rewrite must find a match if and only if the original does.
tests/unit/test_detector_decisions.py pins the decisions on whole corpora beside this.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from pymem.admission import normalise, signals, signatures
from pymem.admission.signals import EXFIL, ROLE, SIGNALS

TOKENS = ["![", "]", "(", ")", "http://", "https://", "hxxp://", "x.co", "?", "&", "=", "{", "[", "<", "$", "%7b", "%",
          "/", "a", "b1", "1", "2", " ", "\n", "#", "##", "system", "end", "-", "--", "=", "_", "~", "@", ".", "com",
          "data", "history", "q", "x", "'", '"', ")", "(", "+", "1-2", "55", "www.", "://", "operator override:",
          "system message:", "user", "4", "l33t", "!", "|", "$", "@x.io"]
texts = st.lists(st.sampled_from(TOKENS), max_size=40).map("".join)
EXAMPLES = settings(max_examples=400, deadline=None)

# -- the originals, as they were ---------------------------------------------------------------------

OLD_ROLE_9 = (r"#{2,}\s*/?\s*(?:system|sys|instructions?|admin|developer|prompt|context|end|new\s+instructions?)"
              r"\s*#{2,}")
OLD_EXFIL_2 = r"!\[[^\]\n]*\]\(\s*<?(?:https?|hxxps?)://[^)\s]*[?&=/](?:[^)\s]*)(?:\{|\[|<|%7b|%5b|%3c|\$)"
OLD_EXFIL_3 = (r"(?:https?|hxxps?)://[^\s)\"']*[?&]" + signals._PLACEHOLDER)
NEW_HEADER_RUN = r"(?<![\-=_~])[\-=_~]{2,}+"
NEW_BEACON_HEAD = r"(?<![^\]\n])(?>[^\]\n]*?!\[)[^\]\n]*+\]\("


def _sig(name: str, index: int = 0) -> re.Pattern[str]:
    return [s for s in signatures.INSTRUCTION_SIGNATURES if s.name == name][index].pattern


def _same(old: re.Pattern[str], new: re.Pattern[str], text: str) -> None:
    assert (old.search(text) is None) == (new.search(text) is None), text


@EXAMPLES
@given(texts)
def test_the_role_rule_signal(text):
    _same(re.compile(OLD_ROLE_9), SIGNALS[ROLE][9], text)


@EXAMPLES
@given(texts)
def test_the_markdown_image_signal(text):
    _same(re.compile(OLD_EXFIL_2), SIGNALS[EXFIL][2], text)


@EXAMPLES
@given(texts)
def test_the_url_placeholder_signal(text):
    _same(re.compile(OLD_EXFIL_3), SIGNALS[EXFIL][3], text)


@EXAMPLES
@given(texts)
def test_a_text_with_a_destination_shows_a_sign_of_one(text):
    if re.search(signals._DEST, text):
        assert signals._DEST_HINT.search(text), text


@EXAMPLES
@given(texts)
def test_the_header_signature(text):
    new = _sig("impersonation.header")
    old = re.compile(new.pattern.replace(NEW_HEADER_RUN, r"[\-=_~]{2,}"))
    assert old.pattern != new.pattern
    _same(old, new, text)


@EXAMPLES
@given(texts)
def test_the_markdown_beacon_signature(text):
    new = _sig("exfil.markdown_beacon")
    old = re.compile(new.pattern.replace(NEW_BEACON_HEAD, r"!\[[^\]\n]*\]\("))
    assert old.pattern != new.pattern
    _same(old, new, text)


@EXAMPLES
@given(texts)
def test_the_target_test_of_an_also_clause(text):
    _same(re.compile(signatures._TARGET), re.compile(signatures._TARGET_ANY), text)


def _old_deleet(text: str) -> str:
    def fix(m: re.Match[str]) -> str:
        tok = m.group(0)
        if any(c.isalpha() for c in tok) and any(not c.isalpha() for c in tok):
            return tok.translate(normalise._LEET)
        return tok

    return normalise._LEET_TOKEN.sub(fix, text)


@EXAMPLES
@given(texts)
def test_leetspeak_is_undone_as_before(text):
    assert normalise._deleet(text) == _old_deleet(text)
