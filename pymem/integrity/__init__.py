"""Integrity: reading the ledger's audit trail and verifying the hash chain."""
