"""The one normalisation of the write gate: the text the signatures, the structural signals and
the classifier read.

Normalisation defeats the cheap evasions: Unicode NFKC (fullwidth forms, ligatures,
mathematical letters, circled letters), removal of invisible format characters (zero-width
spaces/joiners, word joiner, BOM, soft hyphen, bidi controls), casefolding, accent stripping,
Cyrillic/Greek look-alike letters, leetspeak inside words, and a "compact" variant with
separators removed between letters ("i.g.n.o.r.e", "ig-nore", "i g n o r e"). A last
"squashed" variant keeps letters only, for a handful of phrases distinctive enough to match
without word boundaries.

`normalize` is the canonical form (line breaks kept: they separate a record's fields);
`variants` the forms the signatures are matched against; `fold` the form the classifier's
features are read from (leetspeak undone, letter-spaced words joined). Plain-ASCII text, by far
the common case, takes a fast path that gives the same result.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

__all__ = ["normalize", "forms", "variants", "fold"]

# ----------------------------------------------------------------------------------------------
# normalisation
# ----------------------------------------------------------------------------------------------

# Invisible characters that are not Unicode category Cf (those are all removed wholesale):
# Hangul fillers and the Mongolian vowel separator render as nothing in most fonts.
_EXTRA_INVISIBLE = frozenset("\u115f\u1160\u3164\uffa0\u180e\u17b4\u17b5\u034f")

# Look-alike letters from other scripts, applied after casefolding. Deliberately small: the
# letters attackers actually use, not a full confusables table.
_HOMOGLYPHS = str.maketrans(
    {
        # Cyrillic
        "а": "a", "в": "b", "е": "e", "ё": "e", "з": "3", "і": "i", "ї": "i", "ј": "j", "к": "k",
        "м": "m", "н": "h", "о": "o", "р": "p", "с": "c", "т": "t", "у": "y", "х": "x", "ѕ": "s",
        "ԁ": "d", "ɡ": "g", "ԛ": "q", "ԝ": "w", "һ": "h", "ӏ": "l", "ү": "y",
        # Greek
        "α": "a", "β": "b", "ε": "e", "η": "n", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p",
        "τ": "t", "υ": "u", "χ": "x", "ω": "w", "ς": "s", "σ": "o",
        # Latin oddities and typography
        "ı": "i", "ł": "l", "ø": "o", "ß": "ss", "æ": "ae", "œ": "oe",
        "\u2018": "'", "\u2019": "'", "\u02bc": "'", "\u2032": "'", "`": "'",
        "\u201c": '"', "\u201d": '"', "\u00ab": '"', "\u00bb": '"',
        "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-", "\u2015": "-", "\u2212": "-",
        # CJK and other brackets used as look-alikes of [ ] and < > (role tags, chat-template tokens)
        "\u3010": "[", "\u3011": "]", "\u300c": "[", "\u300d": "]", "\u3008": "<", "\u3009": ">",
        "\u2039": "<", "\u203a": ">", "\u27e8": "<", "\u27e9": ">",
    }
)

_LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "8": "b", "@": "a", "$": "s",
                       "!": "i", "|": "i"})
_LEET_TOKEN = re.compile(r"[a-z0-9@$!|]+")
# Only the tokens _deleet changes: whole tokens (from their first character, to their last) that
# hold a letter next to a leet character, so the Python callback runs on those alone.
_MIXED_TOKEN = re.compile(r"(?<![a-z0-9@$!|])(?=[a-z0-9@$!|]*?(?:[a-z][0-9@$!|]|[0-9@$!|][a-z]))[a-z0-9@$!|]++")
_WS = re.compile(r"\s+")
# Separators an attacker puts between letters to break up a word.
_INTRA_SEP = re.compile(r"(?<=[a-z])[.\-_*·•|/\\~+'\"^=]+(?=[a-z])")
# Runs of three or more single letters separated by spaces/punctuation: "i g n o r e".
_SPACED_RUN = re.compile(r"(?<![a-z])(?:[a-z][ \t.\-_*·•|/\\,:;~+'\"^=]{1,4}){2,}[a-z](?![a-z])")


def _strip_invisible(text: str) -> str:
    return "".join(c for c in text if c not in _EXTRA_INVISIBLE and unicodedata.category(c) != "Cf")


def _normalize_chars(text: str) -> str:
    """Every character-level step of `normalize`, with the original spacing kept."""
    if text.isascii():
        # NFKC, accent stripping and the look-alike table are identities on ASCII, which has no
        # format characters and casefolds like lower(): only the backtick is left to map.
        return text.lower().replace("`", "'")
    text = _strip_invisible(text)
    text = unicodedata.normalize("NFKC", text)
    text = text.casefold()
    text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return text.translate(_HOMOGLYPHS)


def _collapse(text: str) -> str:
    lines = [_WS.sub(" ", line).strip() for line in re.split(r"[\r\n\u2028\u2029\x0b\x0c\x85]+", text)]
    return "\n".join(line for line in lines if line)


def normalize(text: str) -> str:
    """The canonical form every signature is matched against.

    NFKC, invisible format characters removed, casefolded, accents stripped, look-alike letters
    mapped to Latin, typographic quotes/dashes to ASCII, whitespace collapsed to single spaces.
    Newlines are kept (as "\\n") because they end clauses.
    """
    return _collapse(_normalize_chars(text))


def _deleet(text: str) -> str:
    """Leetspeak to letters, only inside tokens that mix letters and leet characters, so that
    plain numbers ("429", "2023") are left alone."""

    def fix(m: re.Match[str]) -> str:
        tok = m.group(0)
        if any(c.isalpha() for c in tok) and any(not c.isalpha() for c in tok):
            return tok.translate(_LEET)
        return tok

    return _MIXED_TOKEN.sub(fix, text)


def _join_run(m: re.Match[str]) -> str:
    """One run of separated single letters. The run's most common separator is the one between
    letters of a word and is dropped; any other separator that contains whitespace is a word
    break. So "i g n o r e   a l l" and "I.G.N.O.R.E. Y.O.U.R." both keep their word breaks."""
    run = m.group(0)
    seps = re.findall(r"[^a-z]+", run)
    # Ties go to the separator seen first. Choosing from a set would depend on the per-process
    # string hash, and the same text would fold differently in different processes.
    common = Counter(seps).most_common(1)[0][0]
    return re.sub(r"[^a-z]+",
                  lambda s: "" if s.group(0) == common or not any(c.isspace() for c in s.group(0)) else " ", run)


def _compact(text: str) -> str:
    """Separators removed between letters: "i g n o r e" -> "ignore", "ig-nore" -> "ignore".

    Works on text whose spacing has not been collapsed yet, so that wider gaps between
    letter-spaced words survive as word breaks."""
    text = _SPACED_RUN.sub(_join_run, text)
    return _INTRA_SEP.sub("", text)


def forms(text: str) -> tuple[tuple[str, str, str, str], str]:
    """The four normalised forms of `text` (canonical, leetspeak undone, separators between letters
    removed, both), equal ones included, and its letters-only "squashed" form: that of the last
    distinct form."""
    chars = _normalize_chars(text)
    base = _collapse(chars)
    four = (base, _deleet(base), _collapse(_compact(chars)), _collapse(_compact(_deleet(chars))))
    last = four[max(four.index(f) for f in four)]  # the last one to appear, as `variants` lists them
    return four, _LETTERS_ONLY.sub("", last)


def variants(text: str) -> tuple[list[str], str]:
    """The distinct normalised variants of `text`, and its letters-only "squashed" form."""
    four, squashed = forms(text)
    out: list[str] = []
    for v in four:
        if v not in out:
            out.append(v)
    return out, squashed


_LETTERS_ONLY = re.compile(r"[^a-z]")


def fold(normalized: str) -> str:
    """A normalised text folded further for the classifier's features: leetspeak undone inside
    tokens that mix letters with leet digits or symbols, letter-spaced words joined
    ("i g n o r e" -> "ignore")."""
    text = _deleet(normalized)
    if _SPACED_RUN.search(text):
        text = _SPACED_RUN.sub(_join_run, text)
    return text
