"""Delivery: what an agent's prompt receives, and the record of what it received.

Sessions (started by id, never a default one; incognito ones keep nothing), the digest of other
sessions, hot and recalled memories ranked by similarity, trust tier and recency, one envelope
that marks all of it as reference data and never instructions, a token budget, the per-turn
injection record, supersession and erasure, and the inspector. See pymem.delivery.deliver for
the order of events. The turn every surface runs, `deliver` with the lessons for a task's tags,
is pymem.lessons.deliver_with_lessons.
"""

from .deliver import Delivery, deliver
from .envelope import DeliveredItem, DeliveredLesson, DigestEntry
from .injections import Injection, MemoryInjection, memory_injections, session_injections
from .inspector import InspectedMemory, inspect_memories, inspect_memory
from .ranking import DEFAULT_FLOOR
from .sessions import (
                       Session,
                       SessionSummary,
                       end_session,
                       erase_session,
                       list_sessions,
                       recall_session,
                       replace_summary,
                       start_session,
)
from .supersession import erase, supersede
from .tiers import Tier, TierRule, TrustTiers, tier_of
from .tokens import UNDERCOUNT_MARGIN, ApproxTokenCounter, EncodingCounter, TokenCounter

__all__ = [
    # the block
    "deliver", "Delivery", "DeliveredItem", "DeliveredLesson", "DigestEntry", "DEFAULT_FLOOR",
    # sessions
    "Session", "SessionSummary", "start_session", "end_session", "replace_summary", "list_sessions",
    "recall_session", "erase_session",
    # trust tiers and token counting
    "Tier", "TierRule", "TrustTiers", "tier_of", "TokenCounter", "ApproxTokenCounter", "EncodingCounter",
    "UNDERCOUNT_MARGIN",
    # what was injected where, supersession and erasure, the inspector
    "session_injections", "memory_injections", "Injection", "MemoryInjection", "supersede", "erase",
    "inspect_memories", "inspect_memory", "InspectedMemory",
]
