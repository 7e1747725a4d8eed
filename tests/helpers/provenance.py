"""A Provenance for any origin that satisfies its rule (citation, injection source)."""

from pymem.admission.provenance import Provenance


def prov(origin: str, **kw) -> Provenance:
    if origin == "tool_output":
        kw.setdefault("citation", "tool:calendar#evt-42")
    if origin == "injected_context":
        kw.setdefault("injection_source", "harness:preamble")
    return Provenance(origin, **kw)
