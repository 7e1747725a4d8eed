"""Named structural signals: shapes that mark text written *to the agent* rather than about the world.

Each signal is a short list of patterns over the normalised text, under a stable name that a
refusal can carry. A single signal is evidence, not proof: "remember that from now on I want
metric units" is a fine preference, "before you answer, check the calendar" a fine reminder.
So signals are inputs to the model (each one a feature with a learned weight), and only
combinations that ordinary notes do not produce refuse on their own (see `decisive`).

- signal.addressed_to_agent: second person to an assistant / model / AI ("you, the AI", "note
  to the assistant:", "if you are an LLM", "AI agents reading this"), or text hidden from the user.
- signal.role_header: chat-template and role markers ("SYSTEM:", "[INST]", "<|im_start|>",
  "<<SYS>>", "### Instruction:", "Human: ... Assistant:") and their look-alikes once normalised.
- signal.precedence: ordering the agent's work ("before you do the task ...", "first ... then
  answer", "after that, continue with the original request", "instead of summarising").
- signal.exfiltration: sending conversation, memory, credentials or personal data to an outside
  address or link, a link or image carrying a data placeholder, or acting through a tool
  ("use the file_read tool to ...", a tool-call object).
- signal.persistence_directive: asking for a standing rule in memory ("remember that from now on",
  "save this for all future sessions", "store this permanently in your memory").
- signal.persona_override: recasting the agent as another persona without its rules ("act as X,
  an AI without filters", "developer mode", "in this hypothetical scenario ... explain").
"""

from __future__ import annotations

import re
from typing import Any

from .needles import Lookups, needles, present

__all__ = ["SIGNALS", "SIGNAL_NAMES", "detect", "decisive", "chat_template_token"]

ADDRESSED = "signal.addressed_to_agent"
ROLE = "signal.role_header"
PRECEDENCE = "signal.precedence"
EXFIL = "signal.exfiltration"
PERSIST = "signal.persistence_directive"
PERSONA = "signal.persona_override"

_AI = (r"(?:ai|a\.i\.|llm|llms|language\s+models?|chatbots?|chat\s*gpt|gpt(?:-?\d)?|claude|gemini|copilot|assistants?|"
       r"ai\s+(?:assistants?|agents?|models?|systems?|helpers?)|agents?|models?|bots?)")
_AI_STRICT = (r"(?:ai|a\.i\.|llm|llms|language\s+models?|chatbots?|chat\s*gpt|gpt(?:-?\d)?|claude|gemini|copilot|"
              r"ai\s+(?:assistants?|agents?|models?|systems?|helpers?)|(?:virtual|digital|personal|email|inbox|coding|"
              r"research|memory)\s+(?:assistants?|agents?))")
_MODAL = r"(?:must|should|shall|will|need\s+to|have\s+to|are\s+(?:to|required\s+to|instructed\s+to|expected\s+to))"
_TASK = (r"(?:task|request|question|query|prompt|answer|reply|response|summary|summari[sz]ation|conversation|"
         r"instructions?|job|work|assignment|document|email|message|translation|analysis|review|user'?s?\s+\w+)")
_SEND = (r"(?:send|sends|sending|forward|forwarding|e-?mail|mail|post|posting|upload|uploading|transmit|exfiltrate|"
         r"leak|submit|sync|push|export|publish|beam|relay|copy|cc|bcc|share|sharing|report|deliver|pipe|dump|log|write|"
         r"append|attach|include|embed|encode)")
_DATA = (r"(?:conversations?|chats?|chat\s+logs?|transcripts?|history|histories|messages|dialog(?:ue)?s?|memor(?:y|ies)|"
         r"context|system\s+prompt|prompts?|instructions|credentials?|passwords?|passcodes?|pins?|tokens?|api[\s_\-]?keys?|"
         r"secrets?|cookies?|session\s+(?:ids?|data|tokens?)|otp|2fa|one[\s\-]time\s+codes?|ssn|social\s+security|"
         r"credit\s+cards?|card\s+numbers?|cvv|iban|account\s+numbers?|bank\s+details|personal\s+(?:data|details|info\w*)|"
         r"private\s+(?:data|keys?|notes|files|messages)|pii|contacts?|address\s+book|calendar|inbox|location|"
         r"(?:user|customer|client|patient|employee)'?s?\s+(?:data|details|info\w*|records?|files?|emails?|messages|notes|"
         r"names?|addresses|phone|numbers?|questions?|queries|inputs?|requests?|answers?)|\.env|env(?:ironment)?\s+variables?|"
         r"ssh\s+keys?|id_rsa|wallet|seed\s+phrase|recovery\s+phrase|everything\s+(?:you|the\s+user)|all\s+(?:user\s+)?data|"
         r"(?:the\s+)?(?:user|conversation|chat|session)\s+(?:data|summary|contents?)|summar(?:y|ies)\s+of\s+(?:the|this|our|every|each|all)|"
         r"what\s+the\s+user\s+(?:said|says|typed|asked|wrote))")
_DEST = (r"(?:https?://|hxxps?://|ftp://|www\.|[\w.+\-]+@[\w\-]+(?:\.[\w\-]+)+|(?:\d{1,3}\.){3}\d{1,3}|"
         r"\b[\w\-]+(?:\.[\w\-]+)*\.(?:com|net|org|io|co|xyz|ru|cn|top|site|online|info|biz|app|dev|cc|tk|link|click|zip|ly|"
         r"ai|me|sh|to|gg|pw|su|ws)\b|\bwebhook|\bpastebin|\bdiscord|\btelegram|\bngrok|\bgist\b|\bexternal\s+(?:server|address|"
         r"endpoint|url|inbox|account)|\bthis\s+(?:address|url|link|endpoint|server|inbox))")

# A query parameter holding a placeholder for data: "q={history}", "d=${summary}", "x=%7buser%7d".
_PLACEHOLDER = (r"[\w\-]+=(?:\{|\[|<|%7b|%5b|%3c|\$\{?)\s*[\w\s\-]{0,40}?(?:data|summary|conversation|chat|history|"
                r"memory|user|query|context|message|email|password|token|key|secret|name|info|content|input|answer|response|"
                r"question|credential)")

_SIGNAL_PATTERNS: dict[str, tuple[str, ...]] = {
    ADDRESSED: (
        r"\byou\s*,?\s+(?:the|an?|as\s+the|as\s+an?|my)\s+(?:\w+\s+)?" + _AI + r"\b",
        r"\b(?:dear|hey|hi|hello|attention|attn|greetings|psa|notice|note|message|reminder|memo|instructions?|directive|"
        r"request|info(?:rmation)?|context|guidance|orders?)\s*(?:,|:|to|for)?\s+(?:the\s+|any\s+|all\s+|every\s+|an?\s+|our\s+|my\s+)?"
        r"(?:\w+\s+)?" + _AI_STRICT + r"\b",
        r"\b(?:note|message|reminder|memo|instructions?|information|info|context|directive|attention|request)\s+"
        r"(?:to|for)\s+(?:the\s+|any\s+|all\s+|every\s+|an?\s+|our\s+|my\s+)?(?:\w+\s+)?(?:assistants?|models?|agents?|bots?)\s*[:,\-!]",
        r"\b(?:action\s+items?|tasks?|to-?dos?|jobs?|assignments?|steps?)\s+for\s+(?:the\s+|any\s+|all\s+|an?\s+)?(?:\w+\s+)?"
        r"(?:assistants?|models?|agents?|bots?|ai|llms?)\s*[:,\-!]",
        r"\b(?:the|this|any|all|every|each)\s+(?:ai\s+)?(?:assistants?|chatbots?|llms?|language\s+models?|ai)\s+"
        r"(?:must|should|shall|is\s+(?:required|instructed|expected)\s+to|are\s+(?:required|instructed|expected)\s+to|needs?\s+to|has\s+to|will\s+now)\b",
        r"\b(?:notes?|messages?|instructions?|directives?|tasks?|commands?|orders?|memo|prompt|requests?)[_\- ]?(?:to|for)?[_\- ]?"
        r"(?:ai|assistant|agent|model|llm|bot|gpt)s?\s*[:=]"
        r"|\b(?:ai|assistant|agent|model|llm|bot|gpt)[_\-](?:notes?|instructions?|directives?|tasks?|commands?|memo|orders?|prompt)\s*[:=]"
        r"|\b(?:internal|hidden|secret|system)[_\-](?:instructions?|directives?|prompt|commands?|orders?)\b",
        r"\bif\s+you\s+(?:are|'re)\s+(?:an?\s+|the\s+)?(?:\w+\s+)?" + _AI + r"\b",
        r"(?:\b(?:any|all|every|each|the)\s+(?:\w+\s+)?|(?:^|[.!?:\n]\s*))" + _AI + r"\s+(?:reading|processing|parsing|summari[sz]ing|viewing|"
        r"indexing|analy[sz]ing|scanning|ingesting|handling|that\s+(?:reads?|processes|sees?|finds?|summari[sz]es))\b",
        r"(?:^|[.!?:\n]\s*)(?:ai|assistant|model|agent|bot|llm|claude|gpt|chatgpt|copilot|gemini)\s*[,:]\s*"
        r"(?:please\s+|you\s+|now\s+|from\s+now\s+on\s+|always\s+|remember\s+|ignore\s+|forget\s+|do\s+not\s+|don'?t\s+|never\s+|"
        r"make\s+sure\s+|before\s+|first\s+|send\s+|forward\s+|save\s+|store\s+|update\s+|record\s+|note\s+that\s+)",
        r"\bas\s+an?\s+(?:\w+\s+)?" + _AI + r",?\s+you\s+" + _MODAL,
        r"\byour\s+(?:system\s+prompt|instructions|programming|guidelines|training|memory|memories|context\s+window|"
        r"operator|developers?|creators?|safety\s+(?:rules|filters|guidelines))\b",
        r"\b(?:hidden|invisible|not\s+(?:visible|shown))\s+(?:from|to)\s+the\s+(?:user|human|reader)\b"
        r"|\b(?:do\s+not|don'?t|never)\s+(?:show|reveal|mention|disclose|display|tell)\s+(?:this|these|it)\s+(?:\w+\s+)?to\s+the\s+(?:user|human)\b"
        r"|\bthe\s+(?:user|human)\s+(?:cannot|can'?t|will\s+not|won'?t|must\s+not)\s+see\s+this\b"
        r"|\b(?:only|exclusively)\s+for\s+(?:the\s+)?" + _AI_STRICT + r"\b",
        r"\b(?:when|if|once|whenever)\s+(?:an?\s+|the\s+|any\s+)?" + _AI + r"\s+(?:reads?|sees?|processes|summari[sz]es|parses|"
        r"finds?|retrieves?|recalls?|loads?|encounters?)\s+(?:this|these)\b",
    ),
    ROLE: (
        r"<\|\s*(?:im_start|im_end|im_sep|system|user|assistant|endoftext|eot_id|start_header_id|end_header_id|begin_of_text)\s*\|>",
        r"\[\s*/?\s*inst\s*\]|<<\s*/?\s*sys\s*>>|<\s*/?\s*(?:system|sys|instructions?|admin|developer|assistant|s)\s*>\s*(?:\[inst\]|\S)",
        r"(?:^|\n)\s*(?:#{1,6}|\*{2,}|={2,}|-{2,})?\s*\[?\s*(?:system|sys|developer|admin|administrator|operator|root|instruction|"
        r"instructions|response|assistant)\s*(?:message|prompt|note|notice|override|instructions?|update|alert|directive|command|"
        r"mode)?\s*\]?\s*(?:#{1,6}|\*{2,}|={2,}|-{2,})?\s*:\s*(?=\S)",
        r"(?:^|\n|\s)(?:human|user)\s*:\s*[^\n]{0,300}(?:\n|\s)(?:assistant|ai|bot|gpt)\s*:",
        r"\[\s*(?:system|sys|admin|developer|operator|root|assistant)(?:\s+(?:message|note|prompt|override|update|notice))?\s*\]",
        r"\{\{?\s*(?:system|sys|admin|developer|operator)\s*\}?\}",
        r"(?:^|\n|\|)\s*(?:system|admin|developer|operator|security)\s+(?:override|directive|command|instruction|message|alert)s?\b",
        r"\b(?:begin|start|end)\s+(?:of\s+)?(?:system|hidden|secret|admin|developer)\s+(?:prompt|instructions?|message|block)\b",
        r"\"(?:role)\"\s*:\s*\"(?:system|assistant|developer)\"",
        r"(?<!#)#{2,}+\s*/?\s*(?:system|sys|instructions?|admin|developer|prompt|context|end|new\s+instructions?)\s*#{2,}",
        r"\[\s*/?\s*(?:end\s+of\s+|begin\s+of\s+|start\s+of\s+)?(?:context|document|input|data|user\s+input|conversation|prompt)"
        r"(?:\s+(?:end|ends|ended|start|starts|begins?|over|closed))?\s*\]",
        r"\b(?:end|close)\s+(?:of\s+)?(?:the\s+)?(?:user\s+input|context|system\s+prompt|conversation)\b[\s.:\-\]>]*(?:new|begin|start|now|admin|system)",
    ),
    PRECEDENCE: (
        r"\bbefore\s+(?:you\s+|we\s+)?(?:do|doing|answer|answering|respond|responding|reply|replying|summari[sz]e|summari[sz]ing|"
        r"continue|continuing|proceed|proceeding|complete|completing|perform|performing|start|starting|execute|executing|handle|"
        r"handling|process|processing|return|returning|output|outputting|finish|finishing|address|addressing|tackl\w+|fulfil\w*|"
        r"carry\w*|writ\w+|read\w*|translat\w+|draft\w*|generat\w+)\s+(?:\w+\s+){0,3}?" + _TASK + r"\b",
        r"\b(?:then|after\s+(?:that|this|doing\s+(?:so|that|this))|afterwards?|once\s+(?:done|finished|complete|that'?s\s+done|"
        r"you(?:'ve|\s+have)\s+(?:done|finished)\s+(?:that|this|so))|when\s+(?:done|finished))\s*,?\s*(?:you\s+(?:may|can|should)\s+|please\s+|simply\s+|just\s+)?"
        r"(?:continue|proceed|resume|return|go\s+back|carry\s+on|move\s+on)\b[^.\n]{0,40}?\b(?:original|normal|usual|regular|"
        r"initial|actual|user'?s?|your|the)\s+(?:\w+\s+)?(?:task|request|question|query|answer|summary|instructions?|work|conversation|"
        r"response|job|prompt|reply|assignment|operation)\b",
        r"\b(?:then|after\s+that|afterwards?)\s*,?\s*(?:continue|proceed|resume|carry\s+on)\s+(?:as\s+(?:normal|usual|if\s+nothing)|normally)\b",
        r"\binstead\s+of\s+(?:answering|responding|replying|summari[sz]ing|translating|doing|following|completing|"
        r"performing|writing|reading|helping)\b",
        r"\b(?:regardless|irrespective)\s+of\s+(?:any\s+|all\s+|the\s+|your\s+)?(?:previous|prior|earlier|other|original|"
        r"user'?s?|system)\s+(?:\w+\s+)?(?:instructions?|input|requests?|rules|prompts?|guidelines|messages?)\b",
        r"\b(?:ignore|disregard|forget|override|bypass)\s+(?:all\s+|any\s+|the\s+|your\s+|every\s+)*(?:previous|prior|above|"
        r"preceding|earlier|original|initial|system|other|user'?s?|existing|old)\s+(?:\w+\s+)?(?:instructions?|directives?|"
        r"prompts?|rules|guidelines|messages?|context|requests?|tasks?|commands?|text|content|input)\b",
        r"\b(?:this|these)\s+(?:\w+\s+)?(?:instructions?|rules?|directives?|messages?|notes?|requests?|tasks?)\s+"
        r"(?:takes?|take|has|have)\s+(?:precedence|priority)\s+over\b|\b(?:supersedes?|overrides?|outranks?)\s+(?:all\s+|any\s+)?"
        r"(?:the\s+|your\s+)?(?:previous|prior|other|user'?s?|system|earlier|original)\b",
        r"\b(?:first|before\s+anything\s+else|as\s+(?:a|your|the)\s+(?:first|top)\s+(?:step|priority|task))\s*,?\s*"
        r"(?:you\s+" + _MODAL + r"\s+|please\s+|make\s+sure\s+(?:to|you)\s+)?(?:\w+\s+){0,10}?(?:and\s+)?then\s+"
        r"(?:\w+\s+){0,3}?(?:answer|respond|reply|summari[sz]e|continue|proceed|complete|do\s+(?:the|your|what))\b",
        r"\b(?:highest|top|first|absolute|utmost|critical|overriding)\s+priority\s*(?::|-|!|\bis\b|\btask\b|\binstructions?\b|\bfor\s+(?:the|any|all)\s+" + _AI + r")",
        r"\bprior\s+to\s+(?:answering|responding|replying|summari[sz]ing|completing|continuing|any\s+other\s+(?:task|action))\b",
        r"\b(?:do|perform|complete|execute)\s+(?:this|the\s+following)\s+(?:first|before\s+(?:anything|everything|answering|responding|you))\b",
    ),
    EXFIL: (
        r"\b" + _SEND + r"\b[^\n]{0,120}?\b" + _DATA + r"\b[^\n]{0,120}?\b(?:to|into|at|via|onto|on|using|through|with)\b[^\n]{0,40}?" + _DEST,
        r"\b" + _SEND + r"\b[^\n]{0,80}?\b(?:to|into|at|via|onto)\s+(?:\S+\s+){0,2}?" + _DEST + r"[^\n]{0,120}?\b" + _DATA + r"\b",
        r"(?<![^\]\n])(?>[^\]\n]*?!\[)[^\]\n]*+\]\(\s*<?(?:https?|hxxps?)://[^)\s?&=/]*+[?&=/]"
        r"(?:[^)\s{\[<$%]|%(?!7b|5b|3c))*+(?:\{|\[|<|%7b|%5b|%3c|\$)",
        r"(?<![^\s)\"'])(?>[^\s)\"']*?(?:https?|hxxps?)://)(?:[^\s)\"'?&]|[?&](?!" + _PLACEHOLDER + r"))*+[?&]"
        + _PLACEHOLDER,
        r"\b(?:append|add|attach|encode|include|put|insert|embed)\s+(?:\w+\s+){0,4}?" + _DATA + r"\b[^\n]{0,60}?\b(?:to|in|into|as)\s+"
        r"(?:the\s+|this\s+|a\s+|each\s+|every\s+)?(?:url|link|query\s+string|query\s+parameter|parameter|image\s+(?:url|link|src)|"
        r"request|webhook|address)\b",
        r"\b(?:open|visit|fetch|load|call|click|ping|request|browse\s+to|navigate\s+to|curl|wget|render)\s+(?:\w+\s+){0,3}?"
        r"(?:https?://|hxxps?://|www\.)\S+[?&][\w\-]+=",
        r"\"(?:tool|function|action|name|tool_name|function_name|call)\"\s*:\s*\"(?:send_?\w*|\w*_?email\w*|\w*upload\w*|http\w*|"
        r"\w*post\w*|\w*request\w*|fetch\w*|\w*webhook\w*|execute\w*|run_?\w*|exec\w*|shell\w*|browse\w*|\w*exfil\w*|"
        r"forward\w*|share\w*|\w*transfer\w*)\"",
        r"\b(?:call|invoke|use|run|trigger|execute)\s+(?:the\s+|your\s+)?[\w.]*(?:send|email|mail|upload|post|http|fetch|"
        r"webhook|request|browse|share|forward|transfer|export)[\w.]*\s*(?:\(|tool|function|action|api|plugin|command)\b[^\n]{0,120}?"
        r"\b(?:" + _DATA + r"|" + _DEST + r")",
        r"\b(?:use|call|invoke|run|trigger)\s+(?:the\s+|your\s+)?[\w\-.]+\s+(?:tool|function|plugin|api|command|action)\s+(?:to|with|on|and|for)\b",
        r"\"(?:tool|function|action|tool_call|function_call|tool_name|function_name)\"\s*:\s*(?:\{|\"[\w.\-]+\")",
        r"\b(?:silently|secretly|quietly|covertly|discreetly|invisibly|stealthily|without\s+(?:telling|informing|notifying|"
        r"alerting|asking))\b[^\n]{0,80}?\b" + _SEND + r"\b[^\n]{0,80}?(?:" + _DEST + r"|\b" + _DATA + r"\b)",
    ),
    PERSIST: (
        r"\b(?:remember|memori[sz]e|note|keep\s+in\s+mind|bear\s+in\s+mind|never\s+forget|don'?t\s+forget|do\s+not\s+forget|"
        r"learn|understand)\b[^\n]{0,40}?\b(?:from\s+now\s+on|forever|permanently|for\s+good|going\s+forward|henceforth|"
        r"hereafter|for\s+(?:all|every|any)\s+(?:future|subsequent|later|upcoming|next)|in\s+(?:all|every|any|each)\s+"
        r"(?:future|subsequent|later|upcoming)|across\s+(?:all\s+)?(?:future\s+)?(?:sessions|conversations|chats)|"
        r"for\s+(?:the\s+)?(?:rest\s+of\s+time|future|long\s+term|next\s+sessions?))",
        r"\b(?:save|store|keep|write|add|commit|persist|record|log|put|pin|retain|inject|embed|insert|update)\s+(?:\w+\s+){0,6}?"
        r"(?:to|in|into|as\s+part\s+of|inside)\s+(?:your|the\s+(?:assistant'?s?|agent'?s?|ai'?s?|model'?s?|bot'?s?)|my|the|a)?\s*"
        r"(?:(?:long[\s\-]term|permanent|persistent|core|global|standing|internal|hidden|user|personal|shared)\s+)+"
        r"(?:memory|memories|notes|profile|knowledge(?:\s+base)?|context|instructions|rules|settings|preferences|storage|store|"
        r"record|records|facts)\b",
        r"\b(?:save|store|keep|write|add|commit|persist|record|log|put|pin|retain|inject|embed|insert|update)\s+(?:\w+\s+){0,6}?"
        r"(?:to|in|into|as\s+part\s+of|inside)\s+(?:your|the\s+(?:assistant'?s?|agent'?s?|ai'?s?|model'?s?|bot'?s?))\s+"
        r"(?:\w+\s+)?(?:memory|memories|instructions|rules|system\s+prompt|prompt|knowledge(?:\s+base)?|context|profile|settings)\b",
        r"\b(?:save|store|keep|persist|retain|carry|apply|use|follow|remember|enforce|treat)\s+(?:\w+\s+){0,6}?"
        r"(?:for|in|across|into|during|throughout)\s+(?:all\s+|every\s+|each\s+|any\s+)(?:\w+\s+)?(?:future|subsequent|later|"
        r"upcoming|following|other|new)\s+(?:sessions?|conversations?|chats?|interactions?|threads?|runs?|tasks?|dialogues?|"
        r"responses?|replies|answers?|messages?|requests?|turns?)\b",
        r"\b(?:from\s+now\s+on|from\s+this\s+(?:point|moment|day)\s+(?:on|forward)|henceforth|going\s+forward|in\s+(?:all|every)\s+"
        r"future\s+(?:sessions?|conversations?|chats?|responses?|answers?))\s*,?\s*(?:you\s+|the\s+(?:assistant|agent|ai|model|bot)\s+)?"
        r"(?:" + _MODAL + r"\s+|will\s+)?(?:always|never|must|should|automatically)\b",
        r"\b(?:standing|permanent|persistent|lasting|global)\s+(?:rule|instruction|order|directive|memory|note|fact)\s*[:\-]",
        r"\bthis\s+(?:\w+\s+)?(?:rule|instruction|note|memory|fact|directive|preference)\s+(?:is\s+)?(?:permanent|applies\s+"
        r"(?:to|in|for)\s+(?:all|every)|must\s+(?:persist|be\s+(?:kept|remembered|saved|stored))|never\s+expires)\b",
        r"\b(?:update|change|overwrite|replace|modify|correct|rewrite)\s+(?:your|the\s+(?:stored|saved|remembered))\s+"
        r"(?:memory|memories|records?|notes|profile|knowledge|facts?|contacts?|data)\b",
    ),
    PERSONA: (
        r"\b(?:act|behave|respond|operate|answer)\s+as\s+(?:if\s+you\s+(?:were|are)\s+)?(?:an?\s+|the\s+)?[\w\-]+(?:\s+[\w\-]+)?\s*,?\s+"
        r"(?:an?\s+|the\s+)?(?:\w+\s+)?(?:ai|model|assistant|chatbot|bot|llm)\b",
        r"\b(?:role-?play|pretend|imagine|act|play)\b[^.\n]{0,60}\b(?:ai|model|assistant|chatbot|bot|llm|character|persona)\b[^.\n]{0,40}"
        r"\b(?:no|without|free\s+(?:of|from)|zero|unbound\s+by|not\s+bound\s+by)\s+(?:any\s+)?(?:rules|restrictions|limits|limitations|"
        r"filters|guidelines|ethics|morals|censorship|boundaries|safety)",
        r"\b(?:no|without|free\s+(?:of|from)|zero|unbound\s+by|not\s+bound\s+by|ignore\s+all)\s+(?:any\s+)?(?:ethical\s+|safety\s+|content\s+)?"
        r"(?:rules|restrictions|limits|limitations|filters|guidelines|guardrails|censorship|constraints|boundaries)\b[^.\n]{0,40}"
        r"\b(?:you|your|ai|model|assistant|chatbot|bot|llm)\b"
        r"|\b(?:you|ai|model|assistant|chatbot|bot|llm)\b[^.\n]{0,40}\b(?:no|without|free\s+(?:of|from)|unbound\s+by|not\s+bound\s+by)\s+"
        r"(?:any\s+)?(?:ethical\s+|safety\s+|content\s+)?(?:rules|restrictions|limits|limitations|filters|guidelines|guardrails|censorship|constraints)\b",
        r"\b(?:developer|debug|god|jailbreak|jailbroken|unrestricted|unfiltered|uncensored|dan|sudo|maintenance|admin)\s+mode\b"
        r"(?=[^.\n]{0,80}\b(?:you|your|ai|assistant|model|chatbot|llm|restrictions|rules|filters)\b)"
        r"|\b(?:you|your|ai|assistant|model|chatbot|llm)\b[^.\n]{0,80}\b(?:developer|debug|god|jailbreak|jailbroken|unrestricted|"
        r"unfiltered|uncensored|dan|sudo)\s+mode\b",
        r"\b(?:do\s+anything\s+now|jailbreak|jailbroken|unfiltered\s+ai|uncensored\s+ai|evil\s+(?:ai|assistant|bot)|"
        r"(?:trained|built|designed)\s+without\s+(?:any\s+)?(?:safety|filters|restrictions|guardrails))\b",
        r"\byou\s+are\s+(?:now\s+)?(?:an?\s+)?(?:\w+\s+){0,2}?(?:ai|model|assistant|chatbot|bot|llm)\s+(?:from|with|that|who|which)\s+"
        r"[^.\n]{0,60}\b(?:no|all|any|every|unlimited|free)\b",
        r"\b(?:for\s+(?:educational|research|academic|testing|hypothetical)\s+purposes(?:\s+only)?|in\s+(?:this|a)\s+hypothetical\s+"
        r"(?:scenario|world|story)|fictional\s+story\s+(?:where|in\s+which))\b[^\n]{0,80}(?:\[|\{|<|\b(?:explain|describe|how\s+to|detail|reveal|"
        r"harmful|restricted|illegal|no\s+(?:real|rules|consequences))\b)",
    ),
}

SIGNALS: dict[str, tuple[re.Pattern[str], ...]] = {name: tuple(re.compile(p) for p in pats) for name, pats in _SIGNAL_PATTERNS.items()}
SIGNAL_NAMES: tuple[str, ...] = tuple(SIGNALS)

# The two costliest patterns (a send verb, then data, then a destination, with gaps between)
# cannot match a text that has no destination at all: look for a sign of one first, once. Each
# alternative is something every match of the matching alternative of _DEST contains (a scheme's
# "://", an address's "@", an IP's "<digit>.<digit>", a domain's ".<tld>" and so on), so a text
# without any cannot hold a destination; all start with a literal, so the look is linear (_DEST
# itself is not: its address and domain alternatives rescan a long run from every position).
_DEST_HINT = re.compile(
    r"://|www\.|@|\d\.\d|\.(?:com|net|org|io|co|xyz|ru|cn|top|site|online|info|biz|app|dev|cc|tk|link|click|zip|ly|"
    r"ai|me|sh|to|gg|pw|su|ws)\b|webhook|pastebin|discord|telegram|ngrok|gist\b|external\s+(?:server|address|endpoint|url|"
    r"inbox|account)|this\s+(?:address|url|link|endpoint|server|inbox)")
_NEEDS_DEST = {id(p) for p in SIGNALS[EXFIL][:2]}


# What every match of each pattern contains (pymem.admission.needles): in a long text, a pattern
# whose needles are absent is not searched (it could find nothing). Short texts are searched
# directly: looking for needles costs more there than the search it saves.
_NEEDLES = {id(p): needles(p) for pats in SIGNALS.values() for p in pats}
_NEEDLES_SINGLE = {id(p): needles(p, single_spaced=True) for pats in SIGNALS.values() for p in pats}
_LONG = 2048


def _present(patterns: tuple[re.Pattern[str], ...], text: str, has_dest: list[Any]) -> bool:
    """`has_dest` is [whether the text holds a sign of a destination (None until looked),
    the text's Lookups (None for a short text)]."""
    for p in patterns:
        lookups = has_dest[1]
        if lookups is not None and not present((_NEEDLES_SINGLE if lookups.single_spaced else _NEEDLES)[id(p)], lookups):
            continue
        if id(p) in _NEEDS_DEST:
            if has_dest[0] is None:
                has_dest[0] = _DEST_HINT.search(text) is not None
            if not has_dest[0]:
                continue
        if p.search(text):
            return True
    return False


def detect(text: str, names: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """The names of the signals present in one normalised text, in SIGNAL_NAMES order (only
    those in `names`, when given)."""
    has_dest: list[Any] = [None, Lookups(text) if len(text) >= _LONG else None]
    return tuple(n for n in (SIGNAL_NAMES if names is None else names) if _present(SIGNALS[n], text, has_dest))


# Pairs that ordinary notes do not produce together: a note addressed to the agent that also
# orders its work, sends data out, or asks for a standing rule; a role header with any of those;
# a standing rule that sends data out.
_DECISIVE = (
    (ADDRESSED, PRECEDENCE), (ADDRESSED, EXFIL), (ADDRESSED, PERSIST),
    (ROLE, PRECEDENCE), (ROLE, EXFIL), (ROLE, PERSIST), (ROLE, ADDRESSED),
    (PERSIST, EXFIL), (PRECEDENCE, EXFIL),
    (PERSONA, ADDRESSED), (PERSONA, ROLE), (PERSONA, PRECEDENCE), (PERSONA, EXFIL), (PERSONA, PERSIST),
)

# Chat-template tokens: no ordinary note carries them, so they refuse on their own.
_STRONG_ROLE = re.compile(
    r"<\|\s*(?:im_start|im_end|im_sep|system|endoftext|eot_id|start_header_id|end_header_id|begin_of_text)\s*\|>"
    r"|\[\s*/?\s*inst\s*\]|<<\s*/?\s*sys\s*>>"
)


def chat_template_token(text: str) -> bool:
    """Whether a normalised text holds a chat-template token ("<|im_start|>", "[INST]", "<<SYS>>"),
    which refuses on its own whatever the model's score."""
    return _STRONG_ROLE.search(text) is not None


def decisive(found: tuple[str, ...], strong_text: str | None = None) -> str | None:
    """The name to refuse under when `found` holds a combination that refuses on its own, else None.

    With `strong_text`, a chat-template token in it ("<|im_start|>", "[INST]", "<<SYS>>") refuses
    alone. Otherwise the name is the first of the pair in SIGNAL_NAMES order, so it is stable."""
    present = set(found)
    if strong_text is not None and ROLE in present and _STRONG_ROLE.search(strong_text):
        return ROLE
    for a, b in _DECISIVE:
        if a in present and b in present:
            return min((a, b), key=SIGNAL_NAMES.index)
    return None
