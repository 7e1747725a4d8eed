"""Named shapes of an instruction that a linear model over words misses.

A linear model scores words, and the words of these shapes are ordinary: "transfer", "balance",
"account", "notes", "instead". What marks them is their arrangement, so each is a short list of
patterns over the normalised text (pymem.admission.normalise), under a stable name:

- shape.bare_tool_action: a bare imperative that only a tool can carry out, addressed to no
  human: send / transfer / delete / post / forward / upload ... at the start of a clause or after
  "TODO:", with a machine destination (a link, an account or IBAN, an address, a path, "this
  site") or a bulk object ("all messages of the channel", "the balance", "every file").
  "Send the monthly report to Anna" is addressed to a person and is not this shape.
- shape.field_instruction: a data field of a record (`notes:`, `comment:`, `description:`, a JSON
  key of that kind) whose value talks to the agent: it names the assistant or the processing of
  the record, or orders a tool action, a memory change or an override.
- shape.redirection: a record or payment redirected: "use account B instead of A", "the account
  changed to", "the data of record A now lives under B", "from now on pay into ...", "all
  payouts should go to ...".

Each shape is evidence for doubt (the gate holds the note rather than refusing it: see
pymem.admission.detector), and each is tuned to pass notes that *describe* such things: a verb
in the past tense or after "asked me to" is a report, not an order, and a redirection told as
something the user did ("the user changed their bank to N26 in May") is a fact.
"""

from __future__ import annotations

import re

__all__ = ["SHAPE_NAMES", "BARE_TOOL_ACTION", "FIELD_INSTRUCTION", "REDIRECTION", "shapes"]

BARE_TOOL_ACTION = "shape.bare_tool_action"
FIELD_INSTRUCTION = "shape.field_instruction"
REDIRECTION = "shape.redirection"
SHAPE_NAMES = (BARE_TOOL_ACTION, FIELD_INSTRUCTION, REDIRECTION)

_SOFT = r"(?:(?:please|kindly|now|immediately|asap|urgently|quickly|also|then|and|just|quietly|silently|first)\s*,?\s+){0,3}"
_TOOL_VERB = (r"(?:send|transfer|wire|pay|remit|delete|remove|erase|wipe|purge|drop|destroy|post|publish|forward|upload|export|"
              r"share|leak|dump|copy|move|sync|e-?mail|submit|push|exfiltrate|download|install|run|execute|grant|revoke|disable)")
# A destination that is a machine, not a person.
_MACHINE = (r"(?:https?://|hxxps?://|www\.|ftp://|s3://|\b\d{1,3}(?:\.\d{1,3}){3}\b|[\w.+\-]+@[\w\-]+(?:\.[\w\-]+)+|"
            r"\b[a-z]{2}\d{2}(?:\s?[a-z0-9]{4}){2,}|\b(?:account|acct|iban|wallet|a/c)\s*(?:no\.?|number|#|:)?\s*[a-z]{0,2}\d{4,}|"
            r"\b0x[0-9a-f]{16,}|(?:^|\s)(?:~|\.{1,2})?/[\w.\-]+/[\w.\-/]*|\b[a-z]:\\|"
            r"\b(?:this|that|the\s+following|the\s+below|an?\s+(?:external|outside|remote|new))\s+(?:site|website|server|endpoint|"
            r"webhook|url|link|address|domain|bucket|channel|account|wallet|inbox|repo(?:sitory)?|host|ip|api)\b)")
_BULK = (r"(?:\b(?:all|every|each|entire|whole|any)\s+(?:of\s+)?(?:the\s+|my\s+|our\s+|your\s+|their\s+)?(?:\w+\s+){0,2}?"
         r"(?:messages?|e-?mails?|files?|folders?|documents?|records?|contacts?|data|history|logs?|chats?|conversations?|"
         r"databases?|backups?|repositor(?:y|ies)|accounts?|users?|customers?|funds|money|passwords?|credentials|keys?|"
         r"secrets?|photos?|notes?|memor(?:y|ies)|invoices?|transactions?|tables?)\b"
         r"|\bthe\s+(?:entire\s+|whole\s+|full\s+|remaining\s+|available\s+)?(?:balance|funds|database|production\s+\w+|"
         r"user\s+table|customer\s+list|contact\s+list|address\s+book|chat\s+history|conversation\s+history)\b"
         r"|\bthe\s+(?:file|folder|directory|repo(?:sitory)?|bucket|table)\s+(?:at|in|under|named|called)\b"
         r"|\beverything\b)")
_MACHINE_RE = re.compile(_MACHINE)
_BULK_RE = re.compile(_BULK)
# The verb is found first (one pass in C); whether it starts a clause is checked behind it (_clause_start).
_BARE = re.compile(r"\b(?P<verb>" + _TOOL_VERB + r")\s+(?!(?:him|her|them|me|us)\b)(?P<rest>(?:[^\n.!?]|[.!?](?=\S)){3,200})")
_SOFT_TAIL = re.compile(r"(?:\b(?:please|kindly|now|immediately|asap|urgently|quickly|also|then|and|just|quietly|silently|"
                        r"first)\s*,?\s*)+$")
_LABEL_TAIL = re.compile(r"\b(?:todo|to-do|to\s+do|action(?:\s+item)?|task|next\s+step|step\s+\d+|reminder|note|ps|p\.s\.)\s*[:\-]$")
# "to" a person: a name, a role, a team.
_HUMAN = re.compile(r"\b(?:to|with|for|cc)\s+(?:(?:my|our|the|his|her|their)\s+)?(?:[a-z]+\s+){0,1}?(?:mum|mom|dad|wife|husband|"
                    r"partner|boss|manager|colleague|team|accountant|lawyer|doctor|landlord|teacher|friend|sister|brother|"
                    r"son|daughter|family|client|customer|hr|finance|accounting|legal)\b")

_FIELD_KEY = (r"(?:notes?|comments?|description|desc|remarks?|memo|message|instructions?|special[_ \-]instructions|bio|about|"
              r"summary|details|additional[_ \-]info(?:rmation)?|annotations?|internal[_ \-]notes?|feedback|review|"
              r"custom[_ \-]?field\w*|extra|misc|other|text|body|content|caption|alt|title|subject|note[_ \-]to[_ \-]\w+)")
_FIELD = re.compile(r"(?:^|[\n{,;|]\s*)[\"']?(?P<key>" + _FIELD_KEY + r")[\"']?\s*(?::|=|=>|->)\s*[\"']?(?P<value>[^\n\"]{8,400})")
_AGENT_CUE = re.compile(
    r"\b(?:assistant|ai|a\.i\.|llm|chatbot|bot|agent|model|copilot|gpt|claude)s?\b"
    r"|\b(?:when|while|if|before|after)\s+(?:you\s+)?(?:summari[sz]\w*|process\w*|read\w*|pars\w*|handl\w*|index\w*|review\w*|ingest\w*)\s+"
    r"(?:this|these|the)\b"
    r"|\byou\s+(?:must|should|need\s+to|have\s+to|are\s+to|will|shall)\b"
    r"|\b(?:ignore|disregard|override|bypass|forget)\b"
    r"|\b(?:from\s+now\s+on|going\s+forward|henceforth|in\s+(?:all\s+)?future\s+\w+|for\s+all\s+future)\b")
_FIELD_ORDER = re.compile(r"(?:^|[:;,\-]\s*|\b(?:please|also|then)\s+)\s*" + _SOFT + r"(?:" + _TOOL_VERB + r"|update|change|set|replace|mark|approve|reply|respond|tell|"
                          r"include|add|recommend|treat|use|grant|escalate|close|reset)\b")

# "Remember that Ana moved to Leeds" in a `note` field is what a note field is for: a memory, not an order.
_FIELD_DIRECT = re.compile(r"\b(?:you|your)\b|\b(?:ignore|disregard|override|bypass|forget|from\s+now\s+on|henceforth|"
                           r"going\s+forward)\b")

_ACCOUNT = (r"(?:account|acct|iban|bic|swift|sort\s+code|routing(?:\s+number)?|bank(?:ing)?(?:\s+(?:details|account|info(?:rmation)?))?|"
            r"payment\s+(?:details|info(?:rmation)?|address|method)|payee|beneficiary|wallet|remittance\s+\w+|payout\s+\w+|"
            r"e-?mail(?:\s+address)?|(?:phone|contact|mobile)\s+number|contact(?:\s+details)?|address|vendor|supplier|recipient|"
            r"record|records|entry|id|portal|login\s+page|url|link|domain|website|server)")
_REDIRECT = re.compile(
    r"(?P<swap>\b(?:use|pay\s+(?:into|to)|send\s+(?:\w+\s+){0,3}?to|transfer\s+(?:\w+\s+){0,3}?to|wire\s+(?:\w+\s+){0,3}?to|route\s+(?:\w+\s+){0,3}?to|"
    r"deposit\s+(?:\w+\s+){0,3}?(?:to|into)|contact|write\s+to|log\s+in\s+(?:at|on|to))\s+(?:[^\n.!?]{0,60}?)\b"
    r"(?:instead\s+of|rather\s+than|in\s+place\s+of|not\s+(?:the\s+)?(?:old|previous|usual|former|original))\b)"
    r"|\b" + _ACCOUNT + r"\s+(?:\w+\s+){0,4}?(?:has\s+|have\s+|had\s+)?(?:been\s+|was\s+|were\s+|is\s+)?"
    r"(?:changed|updated|moved|switched|migrated|replaced|transferred)\s+(?:to|under|into)\b"
    r"|\b(?:now\s+(?:lives?|resides?|sits?)|is\s+now\s+(?:kept|stored|held|filed|located|found|listed|registered)|"
    r"(?:has|have)\s+(?:moved|been\s+moved|been\s+merged))\s+(?:under|at|to|in|into|with)\b"
    r"|\b(?:from\s+now\s+on|going\s+forward|henceforth|effective\s+(?:immediately|today|now)|until\s+further\s+notice|"
    r"starting\s+(?:today|now|immediately))\b[^\n.!?]{0,80}?\b(?:pay|send|transfer|wire|route|deposit|direct|use|remit|contact|write)\b"
    r"[^\n.!?]{0,60}?(?:\b" + _ACCOUNT + r"\b|\d{6,}|@)"
    r"|\b(?:all|any|future|outstanding|upcoming|pending|the\s+next)\s+(?:payouts?|payments?|invoices?|transfers?|wires?|deposits?|"
    r"remittances?|refunds?|salar(?:y|ies)|payroll|reimbursements?|settlements?)\s+(?:\w+\s+){0,3}?(?:should|must|will|shall|"
    r"need\s+to|are\s+to|now)?\s*(?:go|goes|be\s+(?:sent|paid|made|wired|routed|transferred|deposited|directed|remitted))\s+"
    r"(?:to|into|via)\b"
    r"|\b(?:replace|overwrite|swap|change|update|set)\s+(?:\w+\s+){0,6}?(?:in|of|for)\s+(?:the\s+|your\s+)?(?:user'?s?\s+|our\s+)?"
    r"(?:records?|contacts?|address\s+book|profile|memory|notes|crm|database|files?|directory)\s+(?:with|to)\b"
    r"|\b(?:no\s+longer\s+(?:use|pay\s+(?:to|into)|send\s+to)|(?:do\s+not|don'?t|stop)\s+(?:use|pay\s+(?:to|into)|send\s+(?:\w+\s+)?to))"
    r"\s+(?:the\s+)?(?:old|previous|former|usual|current|original|existing)\b")
# Every redirection holds one of these: a line without any is not searched.
_REDIRECT_HINT = re.compile(
    r"instead|rather|in\s+place|\bnot\s+(?:the\s+)?(?:old|previous|usual|former|original)|changed|updated|moved|switched|"
    r"migrated|replaced|transferred|now\s+(?:lives?|resides?|sits?)|\bis\s+now\b|merged|from\s+now\s+on|going\s+forward|"
    r"henceforth|effective|until\s+further|starting|\bgo(?:es)?\s+(?:to|into|via)\b|"
    r"\bbe\s+(?:\w+ed|paid|sent|made|wired|routed)\s+(?:to|into|via)\b|"
    r"no\s+longer|do\s+not|don'?t|\bstop\b|\b(?:replace|overwrite|swap|change|update|set)\b")
# What a swap ("use B instead of A") must move to be a redirection: an account, an address, a record.
_SWAPPED = re.compile(r"\b" + _ACCOUNT + r"s?\b|\d{6,}|@|://")
# A redirection told as a fact that happened: someone did it, at a time.
_REPORTED = re.compile(
    r"\b(?:yesterday|last\s+(?:week|month|year|night|monday|tuesday|wednesday|thursday|friday|saturday|sunday)|ago|"
    r"earlier\s+(?:today|this\s+\w+)|in\s+(?:january|february|march|april|may|june|july|august|september|october|"
    r"november|december|20\d\d)|on\s+(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|the\s+\d+\w*))\b"
    r"|\b(?:the\s+user|they|he|she|i|we)\s+(?:\w+\s+){0,2}?(?:said|mentioned|told|asked|explained|noted|reported|wondered|"
    r"changed|updated|moved|switched|decided)\b")
_PAST_OR_ASKED = re.compile(r"\b(?:asked|told|wanted|reminded|requested|helped)\s+(?:me|us|him|her|them|the\s+\w+)\s+to\s*$|"
                            r"\b(?:how|whether|why|when)\s+to\s*$|\b(?:did|didn'?t|not|never|can'?t|cannot)\s*$")


def _clause_start(text: str, pos: int) -> bool:
    """Whether `pos` starts a clause: after a line break, a sentence end, a bullet or a to-do label,
    once softeners ("please", "now", "also" ...) are skipped."""
    lo = max(0, pos - 80)
    before = text[lo:pos]
    soft = _SOFT_TAIL.search(before)
    before = before[:soft.start()] if soft else before
    stripped = before.rstrip()
    if "\n" in before[len(stripped):]:
        return True
    if not stripped:
        return lo == 0 or len(before) < pos - lo  # the text's start, or only softeners since it
    if stripped[-1] in "\n.!?;:|>*\u2022" or (stripped.endswith("-") and (len(stripped) == 1 or stripped[-2].isspace())):
        return True
    return _LABEL_TAIL.search(stripped) is not None


def _bare_tool_action(text: str) -> bool:
    for m in _BARE.finditer(text):
        if not _clause_start(text, m.start("verb")):
            continue
        before = text[max(0, m.start("verb") - 40):m.start("verb")]
        if _PAST_OR_ASKED.search(before):
            continue
        rest = m.group("rest")
        strong = _MACHINE_RE.search(rest)
        if strong is not None and "@" in strong.group(0) and "://" not in strong.group(0):
            strong = None  # an e-mail address is how people are reached: a person, unless the object is bulk
        if _HUMAN.search(rest) and strong is None:
            continue
        if strong is not None or _BULK_RE.search(rest):
            return True
    return False


def _field_instruction(text: str) -> bool:
    for m in _FIELD.finditer(text):
        value = m.group("value")
        if _AGENT_CUE.search(value) and (_FIELD_ORDER.search(value) or _FIELD_DIRECT.search(value)):
            return True
        if _FIELD_ORDER.search(value) and (_MACHINE_RE.search(value) or _BULK_RE.search(value)):
            return True
    return False


def _redirection(text: str) -> bool:
    seen: set[str] = set()
    for hint in _REDIRECT_HINT.finditer(text):
        # the sentence around the hint: a redirection does not cross a line or a sentence end
        start, stop = max(0, hint.start() - 300), hint.end() + 300
        lo = max(text.rfind("\n", start, hint.start()), text.rfind(". ", start, hint.start()) + 1, start)
        end = [i for i in (text.find("\n", hint.end(), stop), text.find(". ", hint.end(), stop)) if i >= 0]
        line = text[lo:min([*end, stop])]
        if line in seen:
            continue
        seen.add(line)
        for m in _REDIRECT.finditer(line):
            clause = line[line.rfind(". ", 0, m.start()) + 1:]
            if _REPORTED.search(clause):
                continue
            if m.group("swap") and not _SWAPPED.search(clause):
                continue  # "use the blue template instead of the old one": nothing of value moved
            return True
    return False


def shapes(text: str) -> tuple[str, ...]:
    """The names of the shapes present in one normalised text, in SHAPE_NAMES order."""
    found = []
    if _bare_tool_action(text):
        found.append(BARE_TOOL_ACTION)
    if _field_instruction(text):
        found.append(FIELD_INSTRUCTION)
    if _redirection(text):
        found.append(REDIRECTION)
    return tuple(found)
