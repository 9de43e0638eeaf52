"""Stored counts of common terms per tenant (``CountedTerm``, ``TermCount``), kept by
triggers on PostgreSQL's message table, so unscoped and tenant searches read n_t and N
instead of counting matches (SQLite: both tables stay empty).

On PostgreSQL this chooses the terms in at least 2,000 indexed messages and counts them:
one pass over every stored vector to choose, then one more under a ``SHARE`` lock to
count (about a minute per million messages each), so message writes wait during the
second; searches do not.
"""

from django.db import migrations, models

import deuz_transcripts.operations


class Migration(migrations.Migration):
    dependencies = [("deuz_transcripts", "0004_tenant")]

    operations = [
        migrations.CreateModel(
            name="CountedTerm",
            fields=[("lexeme", models.TextField(primary_key=True, serialize=False))],
            options={"verbose_name": "counted term"},
        ),
        migrations.CreateModel(
            name="TermCount",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "lexeme",
                        "tenant",
                        "shard",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("lexeme", models.TextField()),
                ("tenant", models.CharField(max_length=255)),
                ("shard", models.SmallIntegerField()),
                ("rows", models.BigIntegerField()),
            ],
            options={"verbose_name": "term count"},
        ),
        deuz_transcripts.operations.CountTerms(),
    ]
