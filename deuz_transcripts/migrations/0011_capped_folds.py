"""A fold of every key takes at most a claim of term count deltas (PostgreSQL).

Each key a fold takes is an advisory lock, one entry of the server's shared lock table;
a tenant given its own counts appends a delta per term and role at once, and the next
fold of every key took a lock per key of that backlog (15,918 at 1M), ran the server
out of shared memory and failed its write, and every write after it that fell due for a
fold. The function is replaced by one that claims at most ``FOLD_CLAIM_MAX`` deltas, the
next folds taking the rest. Backwards nothing: the capped function serves 0010 too.
"""

from django.db import migrations

import deuz_transcripts.operations


class Migration(migrations.Migration):
    dependencies = [("deuz_transcripts", "0010_owner_deltas")]

    operations = [deuz_transcripts.operations.CapFolds()]
