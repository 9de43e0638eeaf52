"""Counted terms and tenants that follow the data (``CountingTerm``).

On PostgreSQL the message table's triggers append each delta under its message's own
tenant, and the folds decide where it goes (that tenant's count when it is a
``CountedTenant``, else tenant ``""``'s), so a fold can give a tenant that grew past
the threshold its own counts while writers go on; terms become counted in two steps
(``CountingTerm``, then ``CountedTerm``) so that no writer's rows are missed
(``postgresql.counts.choice``). No lock, no pass over the messages. Backwards, every
delta is added into its count under a ``SHARE`` lock on the message table and migration
0009's triggers come back.
"""

from django.db import migrations, models

import deuz_transcripts.operations


class Migration(migrations.Migration):
    dependencies = [("deuz_transcripts", "0009_term_count_deltas")]

    operations = [
        migrations.CreateModel(
            name="CountingTerm",
            fields=[
                ("lexeme", models.TextField(primary_key=True, serialize=False)),
                ("marked_by", models.BigIntegerField()),
                ("observed", models.BooleanField(default=False)),
            ],
            options={"verbose_name": "term being counted"},
        ),
        deuz_transcripts.operations.CountTermsByOwner(),
    ]
