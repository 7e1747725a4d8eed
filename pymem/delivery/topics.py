"""A session's topic: a short line taken from the first *user* message, and nothing else.

Why only the user's words. The digest shows other sessions by topic; a topic written by the
assistant would put model text, possibly steered by whatever the model read, in front of every
later session. So the topic comes from the first message whose role is the user's, is shortened
deterministically (whitespace collapsed, control and format characters dropped, cut at a word
boundary), and is withheld entirely when it is instruction-shaped: a topic is shown to later
sessions, so it must not be able to speak to them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any, cast

from ..admission.scanning import instruction_shaped
from ..errors import InvalidArguments
from ..vocabulary import is_plain_text

__all__ = ["MAX_TOPIC", "derive_topic", "first_user_message", "topic_is_safe"]

#: Longest topic, in characters (the ellipsis included).
MAX_TOPIC = 80
#: Topics whose verdict a process keeps (see topic_is_safe), least recently used dropped first.
TOPIC_VERDICTS = 4096


def first_user_message(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The text of the first message whose role is "user" ({"role", "content"} mappings); None
    when there is none. Assistant, system and tool messages are skipped, never used."""
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise InvalidArguments("messages must be a list of {\"role\", \"content\"} objects")
    for message in messages:
        if not isinstance(message, Mapping):
            raise InvalidArguments("messages must be a list of {\"role\", \"content\"} objects")
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return cast("str | None", message["content"])
    return None


def _one_line(text: str) -> str:
    return " ".join("".join(c if is_plain_text(c) else " " for c in text).split())


def topic_is_safe(topic: str) -> bool:
    """A topic may be shown to other sessions only if it is not instruction-shaped (checked again
    at every delivery: the signatures may have grown since the session started).

    The signatures are fixed for the life of a process (tuples in pymem.admission.signatures), so
    the verdict on a given topic is too: a process keeps the last TOPIC_VERDICTS of them instead
    of scanning every digest line of every delivery again (that was most of a delivery's time)."""
    return _safe(topic)


@lru_cache(maxsize=TOPIC_VERDICTS)
def _safe(topic: str) -> bool:
    return instruction_shaped(topic) is None


def derive_topic(first_message: str | None) -> str | None:
    """The topic for a session whose first user message is `first_message` (None: no topic).

    One line of at most MAX_TOPIC characters, cut at the last space before the limit (or at the
    limit when there is none) with "…" appended; None when nothing printable is left or when the
    message is instruction-shaped."""
    if first_message is None:
        return None
    if not isinstance(first_message, str):
        raise InvalidArguments(f"the first user message must be a string, not {type(first_message).__name__}")
    if not topic_is_safe(first_message):
        return None
    text = _one_line(first_message)
    if len(text) > MAX_TOPIC:
        cut = text[: MAX_TOPIC - 1]
        space = cut.rfind(" ")
        text = (cut[:space] if space >= MAX_TOPIC // 2 else cut).rstrip() + "…"
    return text or None
