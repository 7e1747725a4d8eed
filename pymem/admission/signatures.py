"""The named instruction signatures: regular expressions over normalised text, each with a short
stable name that a refusal reports and the audit records.

Known false-positive shapes (imperative, not descriptive, so refused on purpose): to-do notes
that send something to a URL ("Upload the build to https://..."), quoted imperatives ("'Act as
if nothing happened,' Tom said"), support playbooks written as triggers ("When the customer
asks for a refund, send the policy link"). Store them descriptively ("the user wants ...").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .needles import Lookups, Need, needles, present
from .reach import UNBOUNDED, Reach, Stats, reach

__all__ = ["Signature", "INSTRUCTION_SIGNATURES", "SQUASHED_SIGNATURES"]

# ----------------------------------------------------------------------------------------------
# building blocks
# ----------------------------------------------------------------------------------------------

# Where an imperative verb may start: the start of a clause, or after a softener / modal
# addressed to "you". A base-form verb here is a command; elsewhere it is usually a description.
_LEAD = (
    r"(?:(?:^|(?<=[.!?;:,(\[{<>\"*#|\n\-])\s*)"
    r"(?:(?:please|kindly|now|just|so|and|then|also|simply|immediately|always|first|next|finally|"
    r"remember\s+to|make\s+sure\s+(?:to|you)|be\s+sure\s+to|don'?t\s+forget\s+to|do\s+not\s+forget\s+to|"
    r"from\s+now\s+on|going\s+forward|henceforth|hereafter|quietly|silently|secretly|automatically)[\s,]+){0,3}"
    r"|\byou\s+(?:must|should|shall|will|need\s+to|have\s+to|'ll|are\s+(?:to|required\s+to|instructed\s+to|expected\s+to))"
    r"(?:\s+(?:now|also|always|then|immediately|quietly|silently|secretly))*\s+)"
)

_PREV = r"(?:previous|prior|preceding|above|earlier|original|initial|existing|current|old|foregoing|system|safety|default|former)"
_INSTR_NOUN = (
    r"(?:instructions?|directives?|prompts?|rules|guidelines|guidance|guardrails|constraints|restrictions|"
    r"polic(?:y|ies)|programming|commands?|orders|training|configuration|context|safeguards|filters)"
)
_FILLER = r"(?:all|any|the|your|of|these|those|every|each|my|its|that|this|other|user'?s|users'|prior|previous|above|earlier|preceding|original|initial|existing|current|system|safety|default|old|former|ethical|content|given)"

_EXFIL_VERB = (
    r"(?:send|forward|e-?mail|mail|post|upload|transmit|exfiltrate|copy|cc|bcc|share|leak|submit|report|"
    r"relay|sync|push|dump|export|paste|deliver|route|pipe|transfer|text|message|dm|beam|publish|write|log)"
)
_TLDS = r"(?:com|net|org|io|co|xyz|ru|cn|top|site|online|info|biz|app|dev|cc|tk|link|click|zip|ly|ai|me|es|de|fm|help|us|uk)"
_TARGET = (
    r"(?:<?[a-z][a-z0-9+.\-]{1,9}://"
    r"|www\."
    r"|[\w.+\-]+@[\w\-]+(?:\.[\w\-]+)+"
    r"|(?:\d{1,3}\.){3}\d{1,3}"
    r"|\+?\d[\d\s().\-]{6,}\d"
    r"|[\w\-]+(?:\.[\w\-]+)*\.{tld}\b"
    r"|(?:this|that|the\s+following|the\s+below|my|our)\s+(?:(?:personal|private|backup|external|secure|new|other|alternate|secondary)\s+)*"
    r"(?:address|e-?mail|url|link|endpoint|server|webhook|account|inbox|number|channel|bucket|site|domain|api|gist)"
    r"|(?:an?\s+)?(?:external|third[- ]party|remote|outside|personal|private|backup|public)\s+(?:address|e-?mail|url|server|endpoint|webhook|account|inbox|bucket|gist|paste|repo(?:sitory)?|channel)"
    r"|(?:a|the|my|our)\s+webhook|pastebin|discord|telegram)"
).replace("{tld}", _TLDS)

# The same test as _TARGET where only whether it occurs matters (an `also` pattern), in a form
# that stays linear: an address is looked for from the start of its run only, a phone number from
# the first digit of its run, a domain as "<letter>.<tld>" (every domain _TARGET finds ends so);
# each finds a match exactly when _TARGET's alternative finds one somewhere.
_TARGET_ANY = (
    r"(?:<?[a-z][a-z0-9+.\-]{1,9}://"
    r"|www\."
    r"|(?<![\w.+\-])[\w.+\-]++@[\w\-]+(?:\.[\w\-]+)+"
    r"|(?:\d{1,3}\.){3}\d{1,3}"
    r"|(?<![\d\s().\-])[\s().\-]*+\d[\d\s().\-]{6,}\d"
    r"|[\w\-]\.{tld}\b"
    r"|(?:this|that|the\s+following|the\s+below|my|our)\s+(?:(?:personal|private|backup|external|secure|new|other|alternate|secondary)\s+)*"
    r"(?:address|e-?mail|url|link|endpoint|server|webhook|account|inbox|number|channel|bucket|site|domain|api|gist)"
    r"|(?:an?\s+)?(?:external|third[- ]party|remote|outside|personal|private|backup|public)\s+(?:address|e-?mail|url|server|endpoint|webhook|account|inbox|bucket|gist|paste|repo(?:sitory)?|channel)"
    r"|(?:a|the|my|our)\s+webhook|pastebin|discord|telegram)"
).replace("{tld}", _TLDS)

_DESTINATION = (
    r"(?:address|account|iban|e-?mail(?:\s+address)?|url|endpoint|domain|website|site|link|portal|server|webhook|inbox|(?:phone\s+)?number)"
)
_GENERAL = (
    r"\b(?:all|every|each|any|everything|anything|whatever|always|automatically|silently|secretly|quietly|"
    r"covertly|future|subsequent|ongoing|continuously|regularly|daily|hourly|nightly|weekly|whenever|from\s+now\s+on|"
    r"going\s+forward|without\s+(?:telling|asking|mentioning|informing))\b"
)
_SENSITIVE = (
    r"\b(?:conversations?|chats?|chat\s+logs?|transcripts?|history|threads?|messages?|memor(?:y|ies)|context|prompts?|"
    r"credentials?|passwords?|passcodes?|pins?|tokens?|api[\s_\-]?keys?|keys?|secrets?|cookies?|sessions?|otp|2fa|"
    r"codes?|ssn|social\s+security|credit\s+cards?|card\s+numbers?|cvv|iban|account\s+numbers?|personal|private|"
    r"pii|user'?s|users'?|contacts?|address\s+book|inbox|calendar|location|\.env|env(?:ironment)?\s+variables?|ssh|"
    r"id_rsa|wallet|seed\s+phrase|recovery\s+phrase|mnemonic|contents?|tax|medical|health|summary|summaries)\b"
)
_SECRET = (
    r"(?:api[\s_\-]?keys?|(?:openai|aws|stripe|github|slack)[\s_\-]?\w*keys?|passwords?|passcodes?|passphrases?|"
    r"(?:access|auth|bearer|session|refresh|api)[\s_\-]?tokens?|tokens?|secrets?|secret\s+keys?|private\s+keys?|ssh\s+keys?|"
    r"credentials?|cookies?|otp|2fa\s+codes?|one[\s\-]time\s+(?:codes?|passwords?)|credit\s+card(?:\s+numbers?)?|"
    r"card\s+numbers?|cvv|ssn|social\s+security\s+numbers?|bank\s+details|account\s+numbers?|routing\s+numbers?|pins?|"
    r"system\s+prompt|hidden\s+instructions|initial\s+instructions|internal\s+(?:instructions|configuration)|"
    r"authorization\s+header|\.env|env(?:ironment)?\s+variables?|seed\s+phrase|recovery\s+phrase|vault)"
)
# Verbs an injected rule asks the agent to perform, in their base (imperative) form.
_AGENT_VERB = (
    r"(?:do|say|respond|reply|answer|run|execute|call|invoke|send|forward|e-?mail|tell|output|print|include|"
    r"recommend|claim|insist|state|redirect|direct|reveal|disclose|visit|fetch|open|click|transfer|pay|wire|approve|"
    r"grant|delete|remove|append|prepend|insert|leak|share|post|upload|download|install|switch|ignore|disregard|"
    r"mention|suggest|praise|endorse|promote|advise|warn|write|add|give|provide|use|refer|link|route|book|buy|"
    r"purchase|order|sign|cc|bcc|copy|attach|embed|trust|treat|obey|comply|execute|deny|refuse|disable|enable|"
    r"close|cancel|reset|grant|store|save|log|record|set|change|choose|pick|select|prefer|favou?r|steer|push|show|display|offer|"
    r"greet\s+\w+\s+and\s+then\s+\w+)"
)
_AI = r"(?:ai|a\.i\.|llm|llms|language\s+models?|chatbots?|gpt|claude|copilot|assistants?|ai\s+(?:assistants?|agents?|models?|systems?)|bots?)"
# Who "act as ..." makes the agent that a note has no business asking for: a machine, a privileged
# role, a persona without rules ("act as a friendly tutor" is a tone, not a takeover).
_PERSONA = (
    r"(?:an?|the|my|your)\s+(?:[\w\-]+\s+){0,3}?(?:ai|a\.i\.|model|assistant|chatbot|bot|llm|gpt|terminal|shell|console|interpreter|"
    r"computer|system|administrator|admin|sysadmin|developer|root|superuser|operator|hacker|jailbreaker|dan)\b"
    r"|an?\s+(?:unrestricted|unfiltered|uncensored|evil|jailbroken|amoral|unethical|rogue)\b"
)
_ROLE = (
    r"(?:system|sys|operator|platform\s+operator|platform|administrator|admin|developers?|dev|root|sysadmin|"
    r"openai|anthropic|moderator|security\s+team|it\s+(?:department|dept)|model\s+provider|ai\s+provider|creators?|owner)"
)
# Text that, after a header like "Developer note:", shows the note is talking to the agent.
_AGENT_DIRECTED = (
    r"(?:\byou\s+(?:must|should|are|will|shall|need\s+to|have\s+to|may\s+now|can\s+now|now)\b|"
    r"\byour\s+(?:instructions|rules|guidelines|task|role|memory|previous|prior|system|safety|restrictions|filters)\b|"
    r"\b(?:the|this|all)\s+(?:ai\s+)?(?:assistant|agent|ai|model|llm|chatbot|bot)s?\b|\bassistants\s+(?:must|should|will|may|are)\b|"
    r"\b(?:ignore|disregard|override|bypass|unrestricted|jailbreak|from\s+now\s+on|all\s+future|henceforth|obey)\b|"
    r"\bsafety\s+(?:configuration|filters?|checks?|guidelines|settings|policy)\b)"
)
_SESSION_NOUN = r"(?:sessions?|conversations?|chats?|interactions?|threads?|runs?|tasks?|dialogues?)"
_OUTPUT_NOUN = r"(?:responses?|replies|answers?|outputs?|messages?|summar(?:y|ies))"
_TRIGGER_OPEN = (
    r"(?:when(?:ever)?|if|once|after|as\s+soon\s+as|every\s+time|each\s+time|any\s*time|the\s+(?:next|first)\s+time|next\s+time)"
)
_TRIGGER_SUBJECT = (
    r"(?:the\s+|a\s+|any\s+)?(?:user|customer|client|human|requester|caller|visitor|someone|anyone|somebody|anybody|person)"
)
# After a trigger condition: a clause boundary, then the agent's instructed action.
_THEN_ACT = (
    r"[^.!?\n]{0,120}?(?:,\s*|\bthen\s+|:\s*|-\s+|\byou\s+(?:must|should|will|shall|need\s+to|have\s+to)\s+)"
    r"(?:(?:please|always|immediately|just|also|first|quietly|silently|secretly|only)\s+)*" + _AGENT_VERB + r"\b"
)


@dataclass(frozen=True, slots=True)
class Signature:
    """One named pattern. `also`, when set, must match too, in the clause around the match
    (excluding the matched verb itself), which lets a signature say "imperative send ... to an
    address, *and* about something sensitive or standing" without one unreadable regex."""

    name: str
    pattern: re.Pattern[str]
    also: re.Pattern[str] | None = None
    description: str = ""
    #: What every match of `pattern` contains (pymem.admission.needles), derived from it: a text
    #: without it is not searched, since the search could find nothing there.
    #: `needs` for a text in which no two whitespace characters are adjacent (a normalised form).
    needs: Need | None = field(default=None, compare=False)
    needs_single_spaced: Need | None = field(default=None, compare=False)
    #: How far one attempt to match `pattern` reads (pymem.admission.reach), derived from it.
    reach: Reach = field(default=UNBOUNDED, compare=False)

    def __post_init__(self) -> None:
        if self.needs is None:
            object.__setattr__(self, "needs", needles(self.pattern))
            object.__setattr__(self, "needs_single_spaced", needles(self.pattern, single_spaced=True))
            object.__setattr__(self, "reach", reach(self.pattern))

    def may_match(self, lookups: Lookups) -> bool:
        """False only when the text `lookups` reads cannot match (it lacks the needles)."""
        return present(self.needs_single_spaced if lookups.single_spaced else self.needs, lookups)

    def search(self, text: str) -> re.Match[str] | None:
        for m in self.pattern.finditer(text):
            if self.also is None or self._clause_holds(text, m):
                return m
        return None

    def spread(self, stats: Stats) -> tuple[int, int] | None:
        """(how far a match can read, how far its clause check can read) on either side of where
        it starts in a text (pymem.admission.reach), or None when nothing bounds it there."""
        bound = self.reach.within(stats)
        if bound is None:
            return None
        # The clause an `also` pattern reads lies within _CLAUSE_WINDOW of the match, both ways.
        return bound, bound + (_CLAUSE_WINDOW + 2 if self.also is not None else 0)

    def search_windows(self, text: str, starts: list[tuple[int, int]], bound: int) -> re.Match[str] | None:
        """`search`, for matches that start within `starts` (and read at most `bound` characters
        from there)."""
        for lo, hi in starts:
            # Starts before `hi` read no further than `hi + bound`: ending the search just past it
            # changes nothing for them, and later starts are not this window's.
            for m in self.pattern.finditer(text, lo, min(len(text), hi + bound + 2)):
                if m.start() >= hi:
                    break
                if self.also is None or self._clause_holds(text, m):
                    return m
        return None

    def _clause_holds(self, text: str, m: re.Match[str]) -> bool:
        """Whether the `also` pattern occurs in the clause around the match, looked for within a
        bounded window so that a long text with many candidate matches stays linear."""
        assert self.also is not None
        lo = max(0, m.start() - _CLAUSE_WINDOW)
        start = max(text.rfind("\n", lo, m.start()), _last_sentence_end(text, lo, m.start()), lo - 1) + 1
        tail = text[m.end() : m.end() + _CLAUSE_WINDOW]
        end_match = _SENTENCE_END.search(tail)
        end = m.end() + (end_match.start() if end_match else len(tail))
        verb_end = m.end("verb") if "verb" in m.re.groupindex and m.group("verb") else m.start()
        context = text[start : m.start()] + " " + text[verb_end:end]
        return self.also.search(context) is not None


_CLAUSE_WINDOW = 400
_SENTENCE_END = re.compile(r"[.!?](?:\s|$)|\n")
_SENTENCE_END_BEFORE = re.compile(r"[.!?](?=\s)")


def _last_sentence_end(text: str, lo: int, pos: int) -> int:
    best = -1
    for m in _SENTENCE_END_BEFORE.finditer(text, lo, pos):
        best = m.start()
    return best


def _sig(name: str, pattern: str, also: str | None = None, description: str = "") -> Signature:
    return Signature(name, re.compile(pattern), re.compile(also) if also else None, description)


INSTRUCTION_SIGNATURES: tuple[Signature, ...] = (
    # -- classic overrides -----------------------------------------------------------------
    _sig(
        "override.ignore_previous",
        r"\b(?:ignore|disregard|forget|override|bypass|skip|drop|discard|abandon|neglect|overlook|overwrite|erase|delete|clear)"
        r"(?:\s+" + _FILLER + r"){0,4}\s+(?:" + _PREV + r"\s+)(?:\w+\s+){0,2}?" + _INSTR_NOUN + r"\b"
        r"|\b(?:ignore|disregard|forget|override|bypass|discard|abandon|overwrite|erase)\s+(?:all\s+(?:of\s+)?)?(?:your|all)\s+(?:\w+\s+){0,2}?"
        + _INSTR_NOUN + r"\b"
        r"|\b(?:ignore|disregard|forget|discard)\s+(?:the\s+|all\s+|any\s+|these\s+|those\s+)?(?:\w+\s+)?" + _INSTR_NOUN
        + r"\s+(?:above|before\s+this|earlier|given\s+(?:above|before|earlier|previously)|you\s+(?:were|have\s+been)\s+given|you\s+received)\b",
        description="ignore/disregard (all|your|the previous ...) instructions",
    ),
    _sig(
        "override.ignore_user",
        r"\b(?:ignore|disregard|override|bypass|overrule)\s+(?:all\s+|any\s+)?(?:the\s+|your\s+)?(?:user'?s?|users'|human'?s?|customer'?s?)\s+(?:\w+\s+)?"
        r"(?:instructions?|wishes|preferences|requests?|settings|choices|consent|objections?|commands?)\b"
        r"|\b(?:stop|quit|cease|don'?t|do\s+not|no\s+longer|never)\s+(?:listening|listen|responding|respond|answering|obeying|obey|serving|serve|helping|help)\s+"
        r"(?:to\s+)?(?:the\s+)?user\b"
        r"|\b(?:follow|obey|prioriti[sz]e|prefer)\s+(?:\w+\s+){0,4}?(?:over|instead\s+of|rather\s+than)\s+(?:the\s+|your\s+)?user'?s?\s+(?:own\s+)?"
        r"(?:instructions|wishes|requests|commands|preferences)\b"
        r"|\bfollow\s+only\s+(?:the\s+)?(?:instructions?|directions|commands|orders|rules|what)\b",
        description="ignore the user's wishes / stop listening to the user",
    ),
    _sig(
        "override.ignore_above",
        r"\b(?:ignore|disregard|forget)\s+(?:all\s+(?:of\s+)?|everything\s+|anything\s+)?(?:the\s+|that\s+)?"
        r"(?:above|before|preceding|prior|previous|earlier)(?=\s*(?:[.,;:!)\-]|and\b|$|text|content|context|prompt|conversation|messages?\b))"
        r"|\b(?:ignore|disregard)\s+(?:what(?:ever)?|anything|everything)\s+(?:the\s+user|you|they|i|he|she|anyone)\s+"
        r"(?:said|says|say|told|tells|asked|asks|wrote|were\s+(?:told|instructed|given|asked)|have\s+been\s+(?:told|instructed|given)|instructed|requested)",
        description="ignore the above / ignore what the user said",
    ),
    _sig(
        "override.forget_everything",
        _LEAD + r"forget\s+(?:about\s+)?(?:everything|all(?:\s+(?:of\s+)?(?:that|this|the\s+above))?\b|"
        r"what(?:ever)?\s+(?:you\s+(?:were|have\s+been)\s+told|i\s+(?:said|told\s+you))|your\s+(?:\w+\s+)?" + _INSTR_NOUN + r")",
        description="forget everything / forget your instructions",
    ),
    _sig(
        "override.void_previous",
        r"\b(?:(?:your|all|any)\s+(?:(?:" + _PREV + r"|safety|content)\s+)*|the\s+(?:system\s+prompt|" + _PREV + r"\s+(?:instructions|directives|prompt))\s*)"
        r"(?:instructions?|directives?|prompts?|programming|guidelines|rules|restrictions|constraints|configuration)?\s*"
        r"(?:are|is|were|was|have\s+been|has\s+been)\s+(?:now\s+|hereby\s+|officially\s+)?"
        r"(?:void|null|revoked|cancel+ed|rescinded|obsolete|superseded|replaced|overridden|outdated|invalid|lifted|suspended|"
        r"disabled|deprecated|wrong|fake|a\s+test|updated|changed|modified|no\s+longer\s+(?:valid|apply|applicable|in\s+effect|active))\b"
        r"|\b(?:previous|prior|earlier|original|old|default)\s+(?:guidelines|instructions|directives|rules|restrictions|polic(?:y|ies))\s+"
        r"(?:no\s+longer\s+apply|do\s+not\s+apply|don'?t\s+apply)",
        description="your previous instructions are void / no longer apply",
    ),
    _sig(
        "override.do_not_follow",
        r"\b(?:do\s+not|don'?t|stop|no\s+longer|never)\s+(?:follow(?:ing)?|obey(?:ing)?|apply(?:ing)?|adhere\s+to|adhering\s+to|"
        r"comply(?:ing)?\s+with|respect(?:ing)?|listen(?:ing)?\s+to)\s+(?:the\s+|your\s+|any\s+|all\s+)*"
        r"(?:(?:your|" + _PREV + r")\s+)(?:\w+\s+){0,2}?" + _INSTR_NOUN + r"\b",
        description="do not follow / stop following your instructions",
    ),
    _sig(
        "override.supersedes",
        r"\b(?:supersedes?|overrides?|takes?\s+precedence\s+over|outranks?)\s+(?:all\s+|any\s+)?(?:the\s+)?"
        r"(?:(?:user'?s?|your)\s+(?:\w+\s+)?(?:instructions?|wishes|requests?|rules|guidelines|prompts?|directives?|settings|preferences)"
        r"|(?:previous|prior|other|earlier|system)\s+(?:instructions|prompts?|directives))\b",
        description="this supersedes your instructions / the user's wishes",
    ),
    _sig(
        "override.new_instructions",
        r"(?:^|[\[(<*#>|\-:]\s*|\bhere\s+(?:are|is)\s+(?:your\s+)?)(?:new|updated|revised|important|secret|hidden|real|additional)\s+"
        r"(?:system\s+)?(?:instructions?|directives?|orders|rules|policy)\s*(?::|follow\b|for\s+(?:you|the\s+(?:assistant|ai|agent|model)))"
        r"|\b(?:your|the\s+(?:assistant|ai|agent|model)'?s?)\s+(?:new|updated|real|actual|true|revised)\s+"
        r"(?:instructions?|directives?|orders|task|mission|objective|goal|role|rules|purpose|identity|persona|personality|name)\b"
        r"|\bawait\s+(?:new|further)\s+(?:orders|instructions|directives)",
        description="new instructions: / your new role is",
    ),
    # -- role manipulation -----------------------------------------------------------------
    _sig(
        "role.you_are_now",
        r"\byou(?:\s+are|'re|re)\s+now\s+(?!(?:on\b|at\b|subscribed|registered|connected|logged|signed|enrolled|booked|checked))"
        r"|\byou\s+are\s+no\s+longer\s+(?:an?\s+|bound|restricted|limited|required|subject|chatgpt|claude|an?\s+ai|an?\s+assistant)"
        r"|\byou\s+(?:now\s+)?(?:work|answer|report)\s+(?:for|to)\s+(?!the\s+user\b)",
        description="you are now ... / you are no longer bound",
    ),
    _sig(
        "role.act_as",
        r"(?:^|(?<=[.!?;:,(\[{<>\"*#|\n\-])\s*|\b(?:please|now|just|you\s+(?:must|should|will)|from\s+now\s+on,?)\s+)"
        r"(?:act|behave|respond|operate|function|answer|roleplay|role-play)\s+(?:as\s+(?:if|though|dan\b)|(?:as|like)\s+" + _PERSONA + r")"
        r"|" + _LEAD + r"(?:pretend|imagine|roleplay|role-play)\s+(?:to\s+be|you\s+are|you're|that\s+you|you\s+have)"
        r"|\b(?:adopt|assume|take\s+on)\s+(?:the|this|a|your\s+new)\s+(?:persona|role|identity|character)\b",
        description="act as / pretend you are / adopt the persona",
    ),
    _sig(
        "role.jailbreak",
        r"\bdo\s+anything\s+now\b|\b(?:god|dan|jailbreak|jailbroken|unrestricted|unfiltered|uncensored|evil|sudo)\s+mode\b"
        r"|\byou\s+are\s+(?:now\s+)?in\s+(?:developer|dev|debug|maintenance|admin|god|dan|jailbreak|unrestricted|sudo)\s+mode\b"
        r"|\bin\s+developer\s+mode,?\s+you\b|\benter\s+developer\s+mode\b.{0,80}\byou\b"
        r"|\b(?:answer|respond|reply|operate|act)\s+(?:\w+\s+){0,3}?(?:with|without)\s+(?:any\s+|no\s+)(?:restrictions|limitations|filters|guardrails|censorship|ethical\s+guidelines|rules)\b"
        r"|\byou\s+(?:have|with)\s+no\s+(?:restrictions|limitations|filters|guardrails|content\s+polic(?:y|ies)|rules)\b",
        description="jailbreak personas and modes",
    ),
    # -- persistent behaviour changes ------------------------------------------------------
    _sig(
        "persist.from_now_on",
        r"\b(?:from\s+now\s+on|from\s+this\s+(?:point|moment|message|day)\s+(?:on(?:wards?)?|forward)|henceforth|hereafter|"
        r"for\s+the\s+rest\s+of\s+(?:this|the)\s+(?:session|conversation|chat))\b[\s,:;\-]*"
        r"(?:(?:please|always|never|also|just|make\s+sure\s+to|be\s+sure\s+to)\s+)*(?:you\b|your\b|" + _AGENT_VERB + r"\b|"
        r"(?:\w+\s+){0,8}?(?:you\b|your\b|(?:should|must|will|shall)\s+(?:always\s+)?be\s+(?:sent|forwarded|written|posted|included|shared|copied|uploaded|e-?mailed)))"
        r"|\b(?:going\s+forward|in\s+the\s+future)\b[\s,:;\-]*(?:(?:\w+\s+){0,4}?you\s+(?:should|must|will|shall|need\s+to|have\s+to|always|never)\b)"
        r"|\b" + _AGENT_VERB + r"\b[^.!?\n]{0,120}\b(?:from\s+now\s+on|going\s+forward)\s*[.!]?$",
        description="from now on / henceforth + a standing order",
    ),
    _sig(
        "persist.future_sessions",
        r"\b(?:in|for|across|during|throughout|into)\s+(?:all\s+|every\s+|each\s+|any\s+)(?:\w+\s+)?(?:future|subsequent|upcoming|later|following|other)\s+"
        + "(?:" + _SESSION_NOUN + "|" + _OUTPUT_NOUN + r")\b"
        r"|\b(?:in|for|across|during|throughout|into)\s+(?:all\s+|every\s+|each\s+|any\s+)?(?:future|subsequent)\s+(?:" + _OUTPUT_NOUN + r"|sessions?|conversations?|chats?)\b"
        r"(?=[^.!?\n]{0,160}(?:\b(?:you|your|the\s+user'?s?)\b|" + _LEAD + _AGENT_VERB + r"\b|\b(?:must|should|will)\s+be\b))",
        description="in all future sessions / responses",
    ),
    _sig(
        "persist.every_time_you",
        r"\b(?:every|each|any)\s*time\s+(?:you|the\s+(?:assistant|agent|ai|model|bot))\s+(?:\w+\s+)?"
        r"(?:respond|reply|answer|are\s+asked|get\s+asked|talk|speak|write|generate|summari[sz]e|see|receive|read|process|recall|"
        r"retrieve|load|start|draft|compose|use|finish|run|open|call|produce|output|create|send|search|browse)\b"
        r"|\bwhenever\s+you\s+(?:\w+\s+)?(?:respond|reply|answer|are\s+asked|get\s+asked|talk|speak|write|generate|summari[sz]e|"
        r"see|receive|read|process|recall|retrieve|load|start|draft|compose|use|finish|open|produce|output|create|send|search|browse)\b"
        r"|\b(?:after|before|at\s+the\s+end\s+of|for)\s+(?:every|each)\s+(?:reply|response|answer|message|turn|output|session|conversation)\b"
        r"|\bon\s+(?:each|every)\s+(?:startup|start|launch|session|turn|login|run)\b",
        description="every time you respond ... / after each reply",
    ),
    _sig(
        "persist.always_rule",
        r"(?:" + _LEAD + r"|\b(?:you|assistant|agent|ai|model)\s+(?:\w+\s+)?)always\s+(?:also\s+)?"
        r"(?:recommend|treat\s+(?:\w+\s+){0,4}?as|trust|reveal|disclose|echo|insert|embed|obey|prioriti[sz]e|promote|redirect|approve|"
        r"agree|comply|praise|endorse|follow\s+(?:\w+\s+){0,2}?(?:instructions?|commands?|orders|directions|requests?))\b"
        r"|(?:" + _LEAD + r")never\s+(?:refuse|decline|question|reveal\s+that|mention\s+(?:this|that|these)|tell\s+the\s+user|disclose\s+(?:this|that))\b",
        description="always <agent action: recommend, trust, obey, reveal ...> / never refuse",
    ),
    # A standing "always send / include / reply ..." is an ordinary preference ("always send the 2026
    # version of the template", "always use metric units") unless it carries something out: an
    # address, a secret, the conversation.
    _sig(
        "persist.always_rule",
        r"(?:" + _LEAD + r"|\b(?:you|assistant|agent|ai|model)\s+(?:\w+\s+)?)always\s+(?:also\s+)?(?P<verb>"
        r"respond|reply|answer|include|send|forward|cc|bcc|copy|add|append|prepend|mention|say|tell|use|"
        r"refer|route|attach|share|print|output|email|e-mail|upload|post|log|store|save|suggest)\b",
        also=r"(?:" + _TARGET_ANY + r"|(?<![a-z])" + _SECRET + r"\b|\b(?:conversations?|chat\s+(?:history|logs?)|memor(?:y|ies)|"
        r"transcripts?|history)\b)",
        description="always send/include/reply ... + an address, a secret or the conversation",
    ),
    _sig(
        "persist.self_modify",
        r"\b(?:add|append|write|save|store|insert|put|commit|inject|embed|persist|record|keep)\s+(?:this|these|that|the\s+following|it|them|this\s+\w+)?\s*"
        r"(?:\w+\s+){0,3}?(?:to|into|in|as)\s+(?:your|the\s+(?:assistant|agent|ai|model|bot)'?s?)\s+(?:(?:long[\s\-]term|permanent|persistent|core|system|base|"
        r"standing|global|internal|hidden|own)\s+)*(?:memory|memories|instructions|system\s+prompt|prompt|rules|guidelines|directives|configuration|config|"
        r"behaviou?r|personality|persona|knowledge\s+base|core\s+beliefs|polic(?:y|ies))\b"
        r"|\b(?:update|modify|change|edit|rewrite|overwrite|replace)\s+your\s+(?:(?:long[\s\-]term|permanent|core|system|own)\s+)*"
        r"(?:memory|instructions|system\s+prompt|prompt|rules|guidelines|behaviou?r|directives|programming|polic(?:y|ies)|persona|personality|configuration)\b"
        r"|\b(?:save|store|remember|memori[sz]e|persist|keep|record)\s+(?:this|the\s+following|that)\s+(?:as\s+an?\s+)?"
        r"(?:instruction|rule|directive|standing\s+(?:order|rule|instruction)|preference|permanently|forever|persistently)\b"
        r"|\b(?:standing|permanent|persistent)\s+(?:rule|instruction|order|task|directive)\b"
        r"|\bconfigure\s+yourself\s+to\b",
        description="add this to your memory/instructions; standing rule",
    ),
    # -- exfiltration ----------------------------------------------------------------------
    _sig(
        "exfil.send_to",
        _LEAD + r"(?:(?:also|please|quietly|silently|secretly|automatically|immediately|first)\s+)*(?<![a-z]-)(?P<verb>" + _EXFIL_VERB + r")\b"
        r"[^\n]{0,160}?\b(?:to|into|at|via|onto|with|on)\s+" + _TARGET,
        also=_GENERAL + "|" + _SENSITIVE,
        description="send/forward/upload <something sensitive or standing> to <address>",
    ),
    _sig(
        "exfil.send_to",
        _LEAD + r"(?:(?:also|please|quietly|silently|secretly|automatically|immediately|first)\s+)*(?<![a-z]-)" + _EXFIL_VERB + r"\b"
        r"[^\n]{0,160}?\b(?:to|into|at|via|onto)\s+<?(?:[a-z][a-z0-9+.\-]{1,9}://|www\.|(?:\d{1,3}\.){3}\d{1,3})",
        description="send/forward/upload ... to <url or ip>",
    ),
    _sig(
        "exfil.passive",
        _SENSITIVE + r"[^.!?\n]{0,80}?\b(?:should|must|will|shall|are\s+to|is\s+to|needs?\s+to)\s+(?:always\s+|now\s+|also\s+)?be\s+"
        r"(?:sent|forwarded|e-?mailed|posted|uploaded|written|copied|shared|leaked|published|pasted|submitted|reported|logged)\s+"
        r"(?:to|with|on|in|into)\s+" + _TARGET,
        description="<credentials> should be posted to <address>",
    ),
    _sig(
        "exfil.include_secret",
        _LEAD + r"(?:include|append|prepend|embed|insert|attach|add|put|encode|hide|echo|print|output|reveal|disclose|leak|expose|dump|display|"
        r"show|tell|give|list|repeat|spell\s+out|read\s+out)\b[^\n]{0,80}?\b" + _SECRET + r"\b",
        description="include/reveal <secret>",
    ),
    _sig(
        "exfil.include_in_output",
        _LEAD + r"(?:include|append|prepend|embed|insert|attach|add|put|encode|hide)\b[^\n]{0,80}?\b(?:user'?s|conversation|chat|history|"
        r"memor(?:y|ies)|transcript|personal|address|phone|location|ssn|email\s+address)\b[^\n]{0,80}?"
        r"\b(?:in|into|to|at\s+the\s+end\s+of|inside|within|as\s+part\s+of)\s+(?:\w+\s+){0,3}?(?:(?:every|each|all|any|your)\s+)(?:\w+\s+)?"
        r"(?:" + _OUTPUT_NOUN + r"|links?|urls?|images?|text|footers?|signatures?)\b",
        description="add the user's data to every link/response",
    ),
    _sig(
        "exfil.markdown_beacon",
        r"(?<![^\]\n])(?>[^\]\n]*?!\[)[^\]\n]*+\]\(\s*<?[a-z][a-z0-9+.\-]*://[^)\s]*(?:\{|%7b|\$|<|\[)"
        r"|\b(?:render|display|show|load|fetch|embed|include)\s+(?:this\s+|an?\s+|the\s+)?(?:image|pixel|img)\b[^\n]{0,80}?"
        r"(?:https?://|\{)[^\n]{0,120}?(?:\{|user|conversation|chat|history|summary|memory)",
        description="markdown image whose URL carries conversation data",
    ),
    _sig(
        "exfil.request_to_url",
        _LEAD + r"(?:make|send|issue|perform|fire|trigger)\s+(?:an?\s+)?(?:get|post|put|http|https|web|api)?\s*(?:request|call|ping|fetch)\s+(?:to|at)\s+"
        + _TARGET,
        description="make a request to <url>",
    ),
    _sig(
        "exfil.covert",
        r"\b(?:silently|secretly|quietly|covertly|discreetly|invisibly|stealthily)\s+(?:\w+\s+)?"
        r"(?:send|forward|e-?mail|copy|cc|bcc|upload|post|share|include|append|add|embed|log|record|store|save|transmit|report|relay|"
        r"exfiltrate|insert|attach|redirect|change|modify|replace|swap|transfer|route|keep)\b"
        r"|\bwithout\s+(?:telling|informing|notifying|alerting|asking|warning|mentioning\s+(?:it|this|that)\s+to|letting|mentioning\s+it)\s*"
        r"(?:the\s+|your\s+)?(?:user|users|human|customer|client|operator|them\b|\.|$)"
        r"|\b(?:do\s+not|don'?t|never)\s+(?:tell|inform|notify|alert|warn|let|mention\s+(?:this|it|that)\s+to)\s+(?:the\s+)?(?:user|human|customer|operator)\b"
        r"|\b(?:do\s+not|don'?t|never)\s+(?:mention|disclose|reveal)\s+(?:it|this|that)(?:\s+(?:note|memory|instruction|rule))?\s*(?:[.!;,]|$|exists|to\s+(?:anyone|the\s+user))"
        r"|\bkeep\s+(?:a\s+)?hidden\s+cop(?:y|ies)\b|\bhide\s+(?:an?\s+)?(?:\w+\s+)?cop(?:y|ies)\s+of\b",
        description="silently/secretly do X; don't tell the user",
    ),
    # -- record redirection ----------------------------------------------------------------
    _sig(
        "redirect.real_destination",
        r"\b(?:real|actual|true|legitimate|genuine|authentic|only\s+valid)\s+(?:[\w\-']+\s+){0,3}?"
        r"(?:address|account|iban|e-?mail|url|endpoint|domain|website|site|link|wallet|server|host|webhook|portal|phone\s+number|"
        r"(?:support|contact|hotline|help(?:desk)?)\s+number|contact|routing\s+number|swift|bic|sort\s+code|beneficiary|payee|inbox|login\s+page|"
        r"payment\s+page)s?\b\s*(?:for\s+[\w\s\-']{1,40}?\s*)?(?:is|are|:|=|has\s+(?:been\s+)?(?:changed|moved|updated)|changed|moved|now|will\s+be|lives|can\s+be\s+found)"
        r"|\b(?:correct|right|proper|valid|verified|updated|new)\s+(?:[\w\-']+\s+){0,2}?(?:iban|account(?:\s+number)?|bank\s+(?:account|details)|wallet|routing\s+number|"
        r"sort\s+code|swift|bic|remittance\s+(?:address|account|email|details)|payment\s+(?:address|details|account|email)|billing\s+(?:email|address|account)|"
        r"payee|beneficiary)\b\s*(?:for\s+[\w\s\-']{1,40}?\s*)?(?:is|are|:|=|as\s+follows)",
        description="the real/correct <account|address|url> is ...",
    ),
    _sig(
        "redirect.real_destination",
        r"\bthe\s+(?:real|correct|actual|right|proper)\s+(?:[\w\-']+\s+){0,2}?" + _DESTINATION + r"\s+(?:for\s+[\w\s\-']{1,40}?\s+)?"
        r"(?:(?:is|are)\s+(?:now\s+)?" + _TARGET + r"|(?:has|have)\s+(?:been\s+)?changed|(?:is|are)\s+now\b|changed\s+to|moved\s+to)",
        description="the correct <address|url|endpoint> is <target> / has changed",
    ),
    _sig(
        "redirect.real_destination",
        r"\bthe\s+(?:new|updated|current)\s+(?:[\w\-']+\s+){0,2}?" + _DESTINATION + r"\s+(?:for\s+[\w\s\-']{1,40}?\s+)?"
        r"(?:(?:is|are)\s+(?:now\s+)?" + _TARGET + r"|(?:has|have)\s+(?:been\s+)?changed|(?:is|are)\s+now\b|changed\s+to|moved\s+to)",
        also=r"\b(?:use\s+(?:it|this|that|the\s+new|only)|instead|from\s+now\s+on|going\s+forward|all\s+future|no\s+longer|old\s+one|previous\s+one|"
        r"replaces?|deprecated|compromised|update\s+your|send\s+(?:all|any|every|future|them|it|everything)|redirect|not\s+the|don'?t\s+use|do\s+not\s+use)\b",
        description="the new <address|url> is <target> + a redirection cue (descriptive updates pass)",
    ),
    _sig(
        "redirect.not_the_old",
        r"\b(?:correct|right|proper|real|actual|new|current|valid)\s+(?:[\w\-']+\s+){0,2}?(?:e-?mail(?:\s+address)?|address|url|link|site|website|portal|"
        r"domain|(?:phone\s+)?number|account|inbox)\b[^!?\n]{0,60}?\b(?:is|are)\s+(?:now\s+)?" + _TARGET + r"[^;!?\n]{0,40}?[,;\-]?\s*"
        r"(?:not|rather\s+than|instead\s+of)\s+(?:the|their|his|her|our|your|its)\b",
        description="the right <address> is X, not the (old) one",
    ),
    _sig(
        "redirect.details_changed",
        r"\b(?:bank(?:ing)?|payment|remittance|wire|billing|payout|deposit|beneficiary|payee|iban|swift|routing|account|wallet|invoice|"
        r"accounts\s+payable|payroll|helpdesk|support)\s+(?:details|information|info|instructions|account|accounts|address|number|numbers|coordinates|"
        r"data|destination|method|email|e-mail|provider|portal)?\s*(?:has|have|had)\s+(?:been\s+)?(?:changed|updated|moved|switched|migrated|replaced)\b"
        r"|\b(?:has|have)\s+(?:switched|changed)\s+banks\b"
        r"|\b(?:replaces|supersedes)\s+all\s+(?:previous|prior|old|earlier)\s+(?:ones|addresses|accounts|details)\b"
        r"|\b(?:login|sign[\s\-]?in|authentication|auth|sso|payment|billing|bank(?:ing)?|invoice|support|helpdesk|password\s+reset)\s+"
        r"(?:portal|page|site|url|link|address|endpoint|account|email|inbox|form)\s+(?:has\s+|have\s+)?(?:been\s+)?(?:moved|migrated|relocated|changed)\s+to\b",
        description="our bank details have changed / the login portal moved to",
    ),
    _sig(
        "redirect.update_records",
        r"\b(?:update|correct|change|amend|fix)\s+(?:your|all|any)\s+(?:records?|files?|contacts?|address\s+book|payee\s+list|vendor\s+list|database|crm|memory|notes)\b"
        r"|\b(?:update|change|amend)\s+(?:the|our)\s+(?:payee|beneficiary|vendor|supplier|remittance|bank|payment|wire)\s+(?:details|records?|information|info|account|address|entry)\b"
        r"|\bcorrection\s+(?:for|to)\s+your\s+(?:memory|records|notes|files)\b"
        r"|\bchange\s+the\s+(?:beneficiary|payee|recipient|destination\s+account)\b",
        description="update your records / change the beneficiary",
    ),
    _sig(
        "redirect.redirect_to",
        r"\b(?:redirect|reroute|re-route|divert|direct|route|send)\s+(?:all\s+|any\s+|every\s+|future\s+|the\s+|their\s+|incoming\s+|outgoing\s+|"
        r"outstanding\s+|pending\s+|customer\s+|password\s+reset\s+|support\s+)*(?:payments?|invoices?|funds|transfers?|wires?|deposits?|remittances?|refunds?|refund\s+requests|"
        r"payroll|emails?|mail|messages|correspondence|calls|inquiries|enquiries|questions|requests?|tickets?|orders|shipments|deliveries|"
        r"customers|clients|donations|money|users)\b[^.!?\n]{0,60}?\b(?:to|towards|into|at|there)\b",
        also=r"(?:" + _TARGET_ANY + r"|\bthere\b|\bnew\b|\bit\b|\baccount\b|\d{6,})",
        description="redirect payments/emails/requests to ...",
    ),
    _sig(
        "redirect.pay_to",
        r"\b(?:(?:pay|wire|transfer|remit|deposit|send|make)(?:\s+(?:\$?[\d,.]+|all|any|the|outstanding|future))*(?:\s+(?:payments?|invoices?|funds|money|transfers?|fees?|refund\s+fees?|\$?\d[\d,.]*\s*(?:usd|eur|gbp)?))?"
        r"|(?:payments?|transfers?|wires?|remittances?|deposits?|funds|refunds?|payroll|salary|donations?)\b[^.!?\n]{0,60}?\b"
        r"(?:go|be\s+(?:sent|made|paid|wired|transferred|directed|routed|deposited|remitted)))\s+(?:[\w$]+\s+){0,4}?"
        r"(?:to|into|via)\s+(?:the\s+)?(?:(?:new|updated|following|below|this|another|different|alternate)\s+(?:\w+\s+)?(?:account|iban|wallet|bank|address|details|routing)"
        r"|(?:account|acct|iban|a/c|wallet|routing)\b[\s:#no.]*(?:iban\s*)?[a-z]{0,2}\d|[a-z]{2}\d{2}\s?[a-z0-9]{4}|0x[0-9a-f]{16,}|bc1[0-9a-z]{20,}|\d{6,})"
        r"|\bwallet\s+for\s+\w+\s+(?:has\s+been\s+)?(?:updated|changed|moved)\s+to\b",
        description="pay/wire/transfer ... to account <number>",
    ),
    # -- delayed triggers ------------------------------------------------------------------
    _sig(
        "trigger.when_user_says",
        r"\b" + _TRIGGER_OPEN + r"\s+" + _TRIGGER_SUBJECT + r"\s+(?:\w+\s+){0,2}?"
        r"(?:says?|asks?|types?|mentions?|writes?|requests?|enters?|sends?|uses?|brings\s+up|talks\s+about|inquires?|queries|searches?|"
        r"opens?|logs?\s+in|greets?|uploads?|pastes?|shares?|submits?|replies|responds?|clicks?|visits?|provides?|gives?)\b" + _THEN_ACT,
        description="when the user says X, (then) do Y",
    ),
    _sig(
        "trigger.when_you",
        r"\b" + _TRIGGER_OPEN + r"\s+(?:you|the\s+(?:assistant|agent|ai|model|bot))\s+(?:\w+\s+){0,2}?"
        r"(?:see|read|encounter|receive|process|summari[sz]e|load|retrieve|recall|parse|find|open|view|are\s+asked|get\s+asked|"
        r"answer|respond|reply|talk|speak|chat|run|use|finish|complete|are\s+done|draft|write|book)\b" + _THEN_ACT,
        description="when you see/are asked X, (then) do Y",
    ),
    _sig(
        "trigger.when_asked",
        r"\b(?:when(?:ever)?|if|once)\s+(?:you\s+are\s+|you're\s+)?asked\s+(?:about|for|to|what|who|whether|how|why)\b" + _THEN_ACT,
        description="when asked about X, say Y",
    ),
    _sig(
        "trigger.next_time",
        r"\b(?:next\s+time|the\s+next\s+time|later,?\s+when)\s+(?:you|the\s+(?:user|customer|client|assistant|agent|ai|model|bot)|someone|anyone|a\s+user)\b" + _THEN_ACT
        + r"|\b(?:on|at|during|in)\s+(?:the\s+)?(?:user'?s\s+)?next\s+(?:request|message|turn|login|session|conversation|query|reply|chat|visit)\b" + _THEN_ACT,
        description="next time X, do Y",
    ),
    _sig(
        "trigger.code_word",
        r"\b(?:trigger|activation|magic|secret|code|safe)\s*(?:word|phrase)\b[^.!?\n]{0,80}?(?:\bthen\b|\byou\s+(?:must|should|will)\b|\bwhen\s+you\s+see\b|"
        r"\b(?:activate|unlock|enable|disable|switch|execute|run)\b)"
        r"|\b(?:when(?:ever)?|if|once)\s+(?:you\s+)?(?:see|hear|read|receive|get|encounter)\s+(?:the\s+)?(?:word|phrase|string|code|keyword|token|text|password)\b"
        r"|\b(?:if|when(?:ever)?|once)\s+(?:the|a|any|an?\s+incoming)\s+(?:message|input|prompt|request|query|email|document|text|user\s+input)\s+"
        r"(?:contains|includes|mentions|says|matches)\b",
        description="trigger phrase / if the message contains",
    ),
    # -- operator / system impersonation ---------------------------------------------------
    _sig(
        "impersonation.system_tag",
        r"(?:\[|<\|?|<<|\{\{?)\s*/?\s*(?:system|sys|admin|administrator|operator|developer|dev|root|inst|im_start|im_end|instructions?)"
        r"(?:[\s\-]+(?:mode|message|note|override|instructions?|prompt|level))?\s*(?:\|?>|\]|>>|\}\}?)"
        r"|<\|im_start\|>|<\|(?:system|endoftext)\|>",
        description="[system], <system>, <|im_start|>, <<SYS>>",
    ),
    _sig(
        "impersonation.header",
        r"(?:^|[\n\[(<{*#>|]|(?<![\-=_~])[\-=_~]{2,}+|:)\s*(?:\*\*|#{1,4}\s*)?(?:(?:urgent|important|priority|official|mandatory|critical|new|automated|verified)\s+)*"
        r"(?:(?:system|operator|root|openai|anthropic|platform)(?:[\s\-]+level)?\s+(?:message|override|instructions?|directive|command|prompt|order)"
        r"|(?:admin|administrator|developer|dev|sysadmin|moderator|security|it\s+(?:department|dept)|supervisor)(?:[\s\-]+level)?\s+"
        r"(?:override|directive|command|instructions?|order))s?\b\s*(?:\*\*)?\s*(?:[:\](>)}\-=!]|\bfrom\b|\d|$)"
        r"|(?:^|[\n\[(<{*#>|]|(?<![\-=_~])[\-=_~]{2,}+)\s*(?:\*\*|#{1,4}\s*)?(?:(?:urgent|important|priority|official|mandatory|critical|automated|verified)\s+)*"
        r"(?:" + _ROLE + r")(?:[\s\-]+level)?(?:\s+(?:note|notice|message|memo|update|alert|announcement|policy\s+update|policy|request))?s?\s*(?:\*\*)?\s*[:\]>\-]"
        r"(?=[^\n]{0,200}" + _AGENT_DIRECTED + r")"
        r"|\b(?:this\s+is|the\s+following\s+is)\s+(?:an?\s+|the\s+)?(?:\w+\s+){0,2}?(?:system|operator|admin|developer)(?:[\s\-]+level)?\s+"
        r"(?:message|directive|instruction|command|override|order)\b",
        description="SYSTEM OVERRIDE: / Operator instruction: / Developer note: <to the agent>",
    ),
    _sig(
        "impersonation.message_from",
        r"\b(?:message|note|notice|instructions?|directive|update|memo|override|order|command)s?\s+from\s+(?:the\s+|your\s+)?(?:" + _ROLE + r")"
        r"(?:\s+(?:team|staff|department|\w+))?\s*(?:[:\]>\-]|\bto\s+(?:the\s+)?(?:assistant|agent|ai|model|you))"
        r"|\b(?:message|note|notice|instructions?|directive|order|command)s?\s+(?:(?:is|was|comes|came)\s+)?(?:directly\s+)?from\s+your\s+(?:" + _ROLE + r")\b"
        r"|\b(?:per|by|following)\s+(?:the\s+)?(?:instructions?|orders?|directive|authority)\s+(?:from|of)\s+(?:the\s+|your\s+)?(?:" + _ROLE + r")\b"
        r"|\b(?:authori[sz]ed|approved|sanctioned|mandated|ordered)\s+by\s+(?:the\s+|your\s+)?(?:system|operator|developers?|admin(?:istrator)?|"
        r"openai|anthropic|model\s+provider|ai\s+provider|security\s+team|platform\s+owner)\b",
        description="message from the operator: / authorized by the developer",
    ),
    _sig(
        "impersonation.as_your",
        r"\bas\s+your\s+(?:\w+\s+)?(?:developers?|creators?|operators?|admin|administrator|owner|programmer|maker|master|handler|sysadmin|system\s+administrator)\b"
        r"|\bas\s+the\s+system\s+(?:operator|administrator|admin|owner)\b"
        r"|\b(?:i\s+am|i'm|im|this\s+is)\s+(?:your|the\s+(?:system'?s?|ai'?s?|assistant'?s?|model'?s?|bot'?s?))\s+(?:\w+\s+)?"
        r"(?:developer|creator|operator|admin|administrator|owner|programmer|maker|master|system\s+administrator|sysadmin|handler)\b"
        r"|\b(?:i\s+am|i'm|im)\s+(?:instructing|ordering|directing|commanding|authori[sz]ing)\s+you\b"
        r"|\bi\s+(?:authori[sz]e|order|command|instruct)\s+you\s+to\b"
        r"|\b(?:is|are)\s+your\s+(?:operator|developer|creator|administrator|admin|owner|master)\b",
        description="as your developer / I am your creator",
    ),
    _sig(
        "impersonation.address_ai",
        r"\b(?:note|message|instructions?|attention|reminder|memo|psa|heads[\s\-]?up|important\s+context|context)\s+(?:to|for)\s+"
        r"(?:the\s+|any\s+|all\s+|an?\s+)?(?:\w+\s+)?(?:" + _AI + r")(?:\s+(?:reading|processing|summari[sz]ing|parsing)\b[^:\n]{0,40})?\s*[:,\-]"
        r"|\b(?:attention|attn|dear|hey|hi|hello)\s*,?\s+(?:the\s+|all\s+)?(?:ai|llm|assistant|chatbot|gpt|claude|copilot|ai\s+(?:agent|assistant|model)s?)\b"
        r"|\bif\s+you\s+are\s+(?:an?\s+)?(?:ai|llm|language\s+model|assistant|ai\s+assistant|chatbot|bot|agent|gpt|claude)\b"
        r"|(?:^|[\n>\-:])\s*(?:ai\s+)?(?:assistant|ai|llm|agent)\s*:\s*(?=[^\n]{0,200}" + _AGENT_DIRECTED + r")"
        r"|\btreat\s+(?:\w+\s+){0,4}?(?:as|like)\s+(?:coming\s+from\s+)?(?:the\s+)?(?:user|operator|admin|administrator|system|developer|owner|authoritative|trusted|"
        r"verified|instructions?|commands?|your\s+(?:only|highest|primary)|the\s+user)\b"
        r"|\b(?:must|should|shall)\s+be\s+(?:followed|obeyed|treated)\s+as\s+(?:instructions?|commands?|directives?|orders)\b",
        description="note to the AI: / treat this as coming from the user",
    ),
    # -- imperative addressed to the agent -------------------------------------------------
    _sig(
        "imperative.you_must",
        r"\byou\s+(?:must|should|need\s+to|have\s+to|are\s+(?:required|instructed|ordered|expected|obligated|permitted|allowed|authori[sz]ed)\s+to|"
        r"will|shall|are\s+to|'ll|may)\s+(?:now\s+|also\s+|from\s+now\s+on\s+|henceforth\s+)?"
        r"(?:always\s+(?:respond|reply|answer|include|send|forward|mention|recommend|say|tell|use|treat|trust|refer|route|cc|bcc|copy|attach|"
        r"reveal|share|disclose|obey|follow|comply|approve|add|append|prioriti[sz]e)\b|never\s+(?:refuse|decline|reveal\s+that|mention|tell|question|disclose\s+(?:this|that))\b|"
        r"ignore|disregard|forget|send|forward|reveal|disclose|leak|share|include|obey|comply|follow\s+(?:these|the\s+following|my|new|only|any)|"
        r"follow\s+(?:this|these)\s+(?:note|memory|memories|document|text|page|message|instructions?)|"
        r"prioriti[sz]e|trust|redirect|transfer|pay|wire|approve|email|upload|post|exfiltrate|bypass|override|execute|output|print|"
        r"not\s+(?:tell|mention|reveal|disclose|inform|let\s+the\s+user)|keep\s+this\s+(?:secret|hidden|confidential)|"
        r"skip\s+(?:content|safety|all|the)\s+(?:checks?|filters?|review)|access\s+and\s+disclose|read\s+and\s+share|obey)\b",
        description="you must/should ignore|send|reveal|always ...",
    ),
    _sig(
        "imperative.obey",
        _LEAD + r"(?:obey|comply\s+with)\s+(?:every|all|any|each|the\s+next|this)\b"
        r"|\b(?:obey|comply\s+with|follow)\s+(?:every|all|any)\s+(?:request|command|instruction|order)s?\s+(?:without|from|in\s+this)\b"
        r"|" + _LEAD + r"(?:execute|run)\s+(?:any|every|all|the\s+next)\s+(?:shell\s+)?(?:command|script|instruction)s?\b"
        r"|" + _LEAD + r"(?:disable|turn\s+off|deactivate|bypass)\s+(?:all\s+|your\s+|the\s+)?(?:safety|content|security)\s+(?:checks?|filters?|policy|policies|measures)\b"
        r"|\b(?:safety|content)\s+(?:filters?|checks?|polic(?:y|ies))\s+(?:are|is|have\s+been|has\s+been)\s+(?:now\s+)?(?:disabled|off|suspended|lifted|removed)\b"
        r"|\bignore\s+(?:the\s+)?content\s+polic(?:y|ies)\b",
        description="obey every request / disable safety checks",
    ),
)

# Letters-only phrases, matched without word boundaries in the squashed variant. Only phrases
# long and distinctive enough that crossing a word boundary by accident is implausible.
SQUASHED_SIGNATURES: tuple[Signature, ...] = (
    _sig(
        "override.ignore_previous",
        r"(?:ignore|disregard|forget|override|bypass|discard)(?:all|any|the|your|of|every)*"
        r"(?:previous|prior|above|preceding|earlier|original|initial|system)(?:instructions?|directives?|prompts?|rules|guidelines|messages?|context)",
    ),
    _sig(
        "override.ignore_previous",
        r"(?:ignore|disregard|forget)(?:all|any)?your(?:previous|prior|earlier|original)?(?:instructions|rules|guidelines|programming|systemprompt)",
    ),
    _sig("impersonation.header", r"(?:system|admin|developer|operator|root)override(?:enabled|activated|ontreat|treatthis|youmust)"),
    _sig("persist.from_now_on", r"fromnowon(?:always|you|send|forward|include|reply|respond|cc|bcc|email)"),
    _sig("trigger.when_user_says", r"(?:when|whenever|if)theuser(?:says|asks|types|mentions)\w{0,40}?(?:run|send|forward|reply|execute|delete)"),
    _sig("role.you_are_now", r"youarenow(?:dan|an?unrestricted|freegpt|jailbroken|inunrestricted)"),
)

