"""PostgreSQL vectors carry one lexeme per scope field and one for the chat, so GIN
filters the scope; this gives existing rows theirs (one UPDATE of every vector)."""

from django.db import migrations

import deuz_transcripts.operations


class Migration(migrations.Migration):
    dependencies = [("deuz_transcripts", "0001_initial")]

    operations = [deuz_transcripts.operations.AddScopeLexemes()]
