"""Stored term counts without a lock between writers (``TermCountDelta``).

On PostgreSQL the message table's triggers append delta rows instead of updating the
count rows under an advisory lock per (tenant, shard) held to COMMIT, so writers of one
big tenant no longer queue; readers add the pending deltas, and writes fold them in
(``postgresql.counts.deltas``). Each count's shards are summed into one row, under a
``SHARE`` lock on the message table (message writes wait, searches do not; no pass over
the messages). Backwards, the deltas are added into their counts and the locked
triggers come back.
"""

from django.db import migrations, models

import deuz_transcripts.operations


class Migration(migrations.Migration):
    dependencies = [("deuz_transcripts", "0008_stored_form")]

    operations = [
        migrations.CreateModel(
            name="TermCountDelta",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "lexeme",
                        "tenant",
                        "role",
                        "serial",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("lexeme", models.TextField()),
                ("tenant", models.CharField(max_length=255)),
                ("role", models.CharField(max_length=255)),
                ("serial", models.BigIntegerField()),
                ("rows", models.BigIntegerField()),
            ],
            options={"verbose_name": "term count delta"},
        ),
        deuz_transcripts.operations.CountTermDeltas(),
    ]
