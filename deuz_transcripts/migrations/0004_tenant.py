"""A tenant column on chats and messages (the ``TENANT_KEY`` scope field's value), and
message unique keys that hold it: what a hash-partitioned or distributed schema needs.

When ``TENANT_KEY`` is set as this runs, existing rows get their value from their chat's
scope lookup rows (two UPDATEs); otherwise every row's tenant is ``""``.
"""

from typing import Any

from django.db import migrations, models, router


def fill_tenants(apps: Any, schema_editor: Any) -> None:
    from deuz_transcripts.conf import conf

    key = conf.TENANT_KEY
    if key is None:
        return
    chat = apps.get_model("deuz_transcripts", "Chat")
    message = apps.get_model("deuz_transcripts", "Message")
    scope = apps.get_model("deuz_transcripts", "ChatScope")
    if not router.allow_migrate_model(schema_editor.connection.alias, chat):
        return
    quote = schema_editor.quote_name
    chats, messages, scopes = (quote(m._meta.db_table) for m in (chat, message, scope))
    schema_editor.execute(
        f"UPDATE {chats} SET tenant = COALESCE((SELECT s.value FROM {scopes} s "
        f"WHERE s.chat_id = {chats}.id AND s.key = %s), '')",
        [key],
    )
    schema_editor.execute(
        f"UPDATE {messages} SET tenant = (SELECT c.tenant FROM {chats} c "
        f"WHERE c.id = {messages}.chat_id)"
    )


class Migration(migrations.Migration):
    dependencies = [("deuz_transcripts", "0003_role_tokens")]

    operations = [
        migrations.RemoveConstraint(model_name="message", name="deuz_message_position"),
        migrations.RemoveConstraint(model_name="message", name="deuz_message_id"),
        migrations.AddField(
            model_name="chat",
            name="tenant",
            field=models.CharField(
                blank=True, db_default="", default="", max_length=255, verbose_name="tenant"
            ),
        ),
        migrations.AddField(
            model_name="message",
            name="tenant",
            field=models.CharField(blank=True, db_default="", default="", max_length=255),
        ),
        migrations.AddConstraint(
            model_name="message",
            constraint=models.UniqueConstraint(
                fields=("chat", "position", "tenant"), name="deuz_message_position"
            ),
        ),
        migrations.AddConstraint(
            model_name="message",
            constraint=models.UniqueConstraint(
                fields=("chat", "message_id", "tenant"), name="deuz_message_id"
            ),
        ),
        migrations.RunPython(fill_tenants, migrations.RunPython.noop, elidable=True),
    ]
