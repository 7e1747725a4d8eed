"""Integrity: the ledger's audit trail, and what vouches for the chain.

`audit` reads refusals and memory histories, `verify` runs the database's own chain verification,
`independent` recomputes every hash in Python from the raw rows (never calling the database's
functions), `signing` keeps the installation's Ed25519 key outside the database, `checkpoints`
records signed chain heads in an external sink and checks the chain still extends them, and
`evidence` puts these together for the command line.
"""
