"""Convention receipts: review corrections as signed, commit-pinned rules in the chain.

`file_review_correction` files a feedback lesson and a receipt signed with the installation's
key (pymem.conventions.receipts); `active_conventions` returns the rules in force and their
ruleset hash; `retire_convention` and `check_conventions` end rules by appended events. What
"contradicts" means, and what the ruleset hash covers, is stated in pymem.conventions.rules;
how a symbol is resolved in a repository, in pymem.conventions.repository. `pymem verify`
checks every receipt's signature and anchor (pymem.integrity.receipt_audit).
"""

from .receipts import (
                       ActiveConventions,
                       Convention,
                       ConventionCheck,
                       FiledCorrection,
                       active_conventions,
                       check_conventions,
                       file_review_correction,
                       retire_convention,
)

__all__ = ["ActiveConventions", "Convention", "ConventionCheck", "FiledCorrection", "active_conventions",
           "check_conventions", "file_review_correction", "retire_convention"]
