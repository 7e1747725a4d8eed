"""Delivery: what an agent's prompt receives, and the record of what it received.

Sessions (started by id, never a default one; incognito ones keep nothing), the digest of other
sessions, hot and recalled memories ranked by similarity, trust tier and recency, one envelope
that marks all of it as reference data and never instructions, a token budget, the per-turn
injection record, supersession and erasure, and the inspector. See pymem.delivery.deliver for
the order of events.
"""
