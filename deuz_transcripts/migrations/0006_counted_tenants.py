"""Term counts by role, and own term counts for the big tenants only (``CountedTenant``).

On PostgreSQL, ``TermCount`` is replaced by one keyed by the messages' role too (a
``roles`` filter reads its counts), and the counts of tenants with fewer than 10,000
indexed messages are summed under tenant ``""`` (read by unscoped searches; a small
tenant's searches count in GIN), so the count table no longer grows as tenants x common
terms. The counts are made again from the vectors: one pass to choose, one under a
``SHARE`` lock to count (about a minute per million messages each), so message writes
wait during the second; searches do not. Backwards, 0005's counts again.
"""

from django.db import migrations, models

import deuz_transcripts.operations


class Migration(migrations.Migration):
    dependencies = [("deuz_transcripts", "0005_term_counts")]

    operations = [
        deuz_transcripts.operations.ReplaceTermCounts(),
        migrations.DeleteModel(name="TermCount"),
        migrations.CreateModel(
            name="TermCount",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "lexeme",
                        "tenant",
                        "role",
                        "shard",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("lexeme", models.TextField()),
                ("tenant", models.CharField(max_length=255)),
                ("role", models.CharField(max_length=255)),
                ("shard", models.SmallIntegerField()),
                ("rows", models.BigIntegerField()),
            ],
            options={"verbose_name": "term count"},
        ),
        migrations.CreateModel(
            name="CountedTenant",
            fields=[
                (
                    "tenant",
                    models.CharField(max_length=255, primary_key=True, serialize=False),
                )
            ],
            options={"verbose_name": "counted tenant"},
        ),
        deuz_transcripts.operations.CountBigTenantsTerms(),
    ]
