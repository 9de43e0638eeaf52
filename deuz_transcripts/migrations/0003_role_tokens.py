"""Search data carries one token per message role (PostgreSQL lexeme, FTS5 token), so
the ``roles`` filter is counted in GIN / FTS5; this gives existing rows theirs."""

from django.db import migrations

import deuz_transcripts.operations


class Migration(migrations.Migration):
    dependencies = [("deuz_transcripts", "0002_scope_lexemes")]

    operations = [deuz_transcripts.operations.AddRoleTokens()]
