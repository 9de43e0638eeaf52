"""A soak of deuz_transcripts under sustained mixed load while the infrastructure misbehaves.

``python -m soak --db postgres --seconds 60`` (or ``--db sqlite``): real processes write,
append, delete, search (Python API and the JSON endpoint behind gunicorn) and backfill,
while faults are injected at seeded random moments; every acknowledged operation goes to a
per-process fsynced ledger, and the invariants are checked from those ledgers while the
run goes and against the database at its end. See docs/guarantees.md, "Soak".
"""
