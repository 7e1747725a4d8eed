"""Admission: origins and provenance, the admission policy, adapter trust, the instruction detector
and the write gate that applies them."""
