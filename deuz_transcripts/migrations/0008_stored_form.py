"""The stored forms a database's message rows may be in (``StoredForm``, check W004).

A database that already holds messages records ``unrecorded``: which rules wrote them is
not known, so W004 asks for one ``backfill_transcripts`` (it rewrites only the rows of
another form, then records the form in force). A new database records nothing until
its first write. The same on every vendor.
"""

from typing import Any

from django.db import migrations, models

from deuz_transcripts.stored_form import UNRECORDED


def record_unrecorded(apps: Any, schema_editor: Any) -> None:
    alias = schema_editor.connection.alias
    if apps.get_model("deuz_transcripts", "Message").objects.using(alias).exists():
        apps.get_model("deuz_transcripts", "StoredForm").objects.using(alias).create(
            form=UNRECORDED
        )


class Migration(migrations.Migration):
    dependencies = [("deuz_transcripts", "0007_transcript_search")]

    operations = [
        migrations.CreateModel(
            name="StoredForm",
            fields=[
                ("form", models.CharField(max_length=64, primary_key=True, serialize=False)),
                ("reindexing", models.BooleanField(default=False)),
            ],
            options={"verbose_name": "stored form"},
        ),
        migrations.RunPython(record_unrecorded, migrations.RunPython.noop),
    ]
