"""Admission: what may be written, and how much it is believed.

Origins and provenance (`Provenance`), the admission policy (`AdmissionPolicy`, one `OriginRule`
per origin), the adapter trust policy (`AdapterTrustPolicy`: which agents' rows are believed), the
write gate that applies them (`admit`, and `WriteGate`, `admit` bound to one context and policy),
its three decisions (`Admission`: admitted, quarantined, refused; `admission_of` reads it off what
`admit` returned), the quarantine of the notes it was unsure of (`list_quarantined`,
`get_quarantined`, `release_quarantined`, `reject_quarantined`: `QuarantinedNote`), an import
judged by the gate (`import_gated`), and how well
its content check does on data it was not tuned on (`evaluate_admission`). The instruction
detector (signatures and classifier) is the gate's content check; its modules are implementation.
"""

from .evaluation import AdmissionEvaluation, HeldOutSource, evaluate_admission
from .gate import admit
from .importing import import_gated
from .policy import AdmissionPolicy, OriginRule
from .provenance import Provenance
from .quarantine import (
    Admission,
    QuarantinedNote,
    admission_of,
    get_quarantined,
    list_quarantined,
    reject_quarantined,
    release_quarantined,
)
from .trust import AdapterTrustPolicy
from .write_gate import WriteGate

__all__ = ["Provenance", "AdmissionPolicy", "OriginRule", "AdapterTrustPolicy", "admit", "WriteGate",
           "evaluate_admission", "AdmissionEvaluation", "HeldOutSource", "Admission", "admission_of",
           "QuarantinedNote", "list_quarantined", "get_quarantined", "release_quarantined", "reject_quarantined",
           "import_gated"]
