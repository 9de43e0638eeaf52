"""Own term counts for the big tenants only (``CountedTenant``): on PostgreSQL, the
counts of tenants with fewer than 10,000 indexed messages are summed under tenant ``""``
(read by unscoped searches; a small tenant's searches count in GIN), so the count table
no longer grows as tenants x common terms.

On PostgreSQL this reads every stored vector twice (once to choose, once under a
``SHARE`` lock to count: about a minute per million messages each), so message writes
wait during the second; searches do not. Backwards, every tenant's counts again.
"""

from django.db import migrations, models

import deuz_transcripts.operations


class Migration(migrations.Migration):
    dependencies = [("deuz_transcripts", "0005_term_counts")]

    operations = [
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
