"""Integrity: what vouches for the ledger from outside the database.

`signing` keeps the installation's Ed25519 key (outside the database), `checkpoints` records signed
chain heads in an external sink and checks the chain still extends them, and `independent`
recomputes every hash in Python from the raw rows, never calling the database's own functions.
"""
