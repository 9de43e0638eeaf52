"""The admin home's *Search transcripts* entry: a proxy of ``Chat`` without a table or
permissions of its own (the admin lists models only)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("deuz_transcripts", "0006_counted_tenants"),
    ]

    operations = [
        migrations.CreateModel(
            name="TranscriptSearch",
            fields=[],
            options={
                "verbose_name": "transcript search",
                "verbose_name_plural": "search transcripts",
                "proxy": True,
                "default_permissions": (),
                "indexes": [],
                "constraints": [],
            },
            bases=("deuz_transcripts.chat",),
        ),
    ]
