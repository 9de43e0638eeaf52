"""Per-tenant term counts (``TermCount``), kept by triggers on PostgreSQL's message table
and filled from the vectors already stored, so unscoped and tenant searches read n_t and
N instead of counting matches (SQLite: the table stays empty).

Filling reads every stored vector once (about a minute per million messages) under a
``SHARE`` lock: message writes wait meanwhile, searches do not.
"""

from django.db import migrations, models

import deuz_transcripts.operations


class Migration(migrations.Migration):
    dependencies = [("deuz_transcripts", "0004_tenant")]

    operations = [
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
