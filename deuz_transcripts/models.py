"""Chats, their messages and tombstones; search data is added per database vendor.

The vendor-specific search storage (a ``tsvector`` column with a GIN index on
PostgreSQL, an FTS5 table on SQLite) is created by the ``CreateSearchStorage``
migration operation and is invisible to the ORM: only the backends' SQL reads it.
"""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _

from .records import MAX_ID_LENGTH, MAX_MESSAGE_ID_LENGTH

__all__ = [
    "Chat",
    "ChatScope",
    "CountedTenant",
    "CountedTerm",
    "CountingTerm",
    "LegacyChat",
    "Message",
    "StoredForm",
    "TermCount",
    "TermCountDelta",
    "Tombstone",
    "TranscriptSearch",
]


class Chat(models.Model):
    """A chat known to the index; ``revision`` 0 means indexed only (never written by a store)."""

    chat_id = models.CharField(_("chat id"), max_length=MAX_ID_LENGTH, unique=True)
    scope = models.JSONField(_("scope"), default=dict)
    revision = models.PositiveIntegerField(_("revision"), default=0)
    updated_at = models.DateTimeField(_("updated at"))
    is_indexed = models.BooleanField(_("searchable"), default=True)
    indexed_count = models.PositiveIntegerField(_("indexed messages"), default=0)
    message_count = models.PositiveIntegerField(_("messages"), default=0)
    #: The value of the ``TENANT_KEY`` scope field ("" without one): what a partitioned or
    #: distributed schema splits the data by (docs/scaling.md).
    tenant = models.CharField(
        _("tenant"), max_length=MAX_ID_LENGTH, default="", db_default="", blank=True
    )

    class Meta:
        verbose_name = _("chat")
        verbose_name_plural = _("chats")
        permissions = [("search_transcripts", _("Can search chat transcripts"))]
        indexes = [models.Index(fields=["-updated_at"], name="deuz_chat_updated")]

    def __str__(self) -> str:
        return self.chat_id


class TranscriptSearch(Chat):
    """The admin home's *Search transcripts* entry: a proxy without data or permissions of
    its own, whose admin page is the transcript search (the admin lists models only)."""

    class Meta:
        proxy = True
        default_permissions = ()
        verbose_name = _("transcript search")
        verbose_name_plural = _("search transcripts")


class ChatScope(models.Model):
    """One field of a chat's scope, so any scope key is matched through a btree index."""

    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="scope_fields")
    key = models.CharField(max_length=MAX_ID_LENGTH)
    value = models.CharField(max_length=MAX_ID_LENGTH)

    class Meta:
        verbose_name = _("scope field")
        constraints = [
            models.UniqueConstraint(fields=["chat", "key"], name="deuz_scope_one_value_per_key")
        ]
        indexes = [models.Index(fields=["key", "value", "chat"], name="deuz_scope_lookup")]

    def __str__(self) -> str:
        return f"{self.key}={self.value}"


class Message(models.Model):
    """One message as given (``payload`` is its JSON text) plus what search needs."""

    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="messages")
    position = models.PositiveIntegerField(_("index"))
    message_id = models.CharField(_("message id"), max_length=MAX_MESSAGE_ID_LENGTH)
    role = models.CharField(_("role"), max_length=MAX_ID_LENGTH)
    payload = models.TextField(_("message JSON"))
    digest = models.CharField(max_length=32)
    # Position among the chat's non-system messages; NULL for system messages.
    visible_position = models.PositiveIntegerField(null=True)
    # The message's distinct terms, space separated (SQLite: LIKE haystack, FTS5 delete key).
    search_text = models.TextField(null=True)  # noqa: DJ001  NULL: not kept (PostgreSQL)
    has_terms = models.BooleanField(default=False)
    #: Its chat's tenant: the partition key, so every unique key holds it (a partitioned
    #: table, like a distributed one, enforces uniqueness only within a partition). Last
    #: in each key: led by the tenant, the key's btree would be ANDed into a tenant's GIN
    #: searches (reading every row id of the tenant) though the scope lexeme filters it.
    tenant = models.CharField(max_length=MAX_ID_LENGTH, default="", db_default="", blank=True)

    class Meta:
        verbose_name = _("message")
        constraints = [
            models.UniqueConstraint(
                fields=["chat", "position", "tenant"], name="deuz_message_position"
            ),
            models.UniqueConstraint(
                fields=["chat", "message_id", "tenant"], name="deuz_message_id"
            ),
        ]
        indexes = [models.Index(fields=["chat", "visible_position"], name="deuz_message_visible")]

    def __str__(self) -> str:
        return self.message_id


class CountedTerm(models.Model):
    """A term common enough that PostgreSQL stores its counts (``TermCount``); chosen by
    the writes' folds as the data grows (``postgresql.counts.choice``), and again by
    ``backfill_transcripts --count-terms`` (repair) and the migrations. Empty on SQLite."""

    lexeme = models.TextField(primary_key=True)

    class Meta:
        verbose_name = _("counted term")

    def __str__(self) -> str:
        return self.lexeme


class CountedTenant(models.Model):
    """A tenant big enough that PostgreSQL stores its own counts of the counted terms
    (``TermCount``), chosen by the writes' folds when its N passes the threshold (and by
    ``backfill_transcripts --count-terms``); the counts of every
    other tenant's messages are summed together under tenant ``""``, read by unscoped
    searches only (a small tenant's terms are counted in GIN). Empty on SQLite."""

    tenant = models.CharField(max_length=MAX_ID_LENGTH, primary_key=True)

    class Meta:
        verbose_name = _("counted tenant")

    def __str__(self) -> str:
        return self.tenant


class CountingTerm(models.Model):
    """A term becoming counted: writers already append its deltas, but no search reads
    its counts until a later fold, once every writer that could have missed it has
    ended, counts its rows and moves it to ``CountedTerm`` (``postgresql.counts.choice``).
    ``marked_by``: the transaction that chose it; ``observed``: a later one saw it (the
    row's ``xmin`` then says which writers must end first). Empty on SQLite."""

    lexeme = models.TextField(primary_key=True)
    marked_by = models.BigIntegerField()
    observed = models.BooleanField(default=False)

    class Meta:
        verbose_name = _("term being counted")

    def __str__(self) -> str:
        return self.lexeme


class TermCount(models.Model):
    """How many indexed messages of a tenant hold a counted term (``lexeme`` ``""``: hold
    any), kept by PostgreSQL triggers on the message table (``postgresql.counts.stored``),
    so an unscoped or tenant search reads n_t and N from here instead of counting matches.

    N is kept for every tenant; a term's count only for a ``CountedTenant``, the other
    tenants' (and chats without a tenant) summed under tenant ``""``. A count is this row
    plus its tenant's pending ``TermCountDelta`` rows (tenant ``""``'s: every uncounted
    tenant's). ``shard``: 0 since migration 0009 (before,
    tenant ``""``'s counts were split by chat so that writers of other shards did not
    queue on one row; kept for migrating back). Empty on SQLite.
    """

    pk = models.CompositePrimaryKey("lexeme", "tenant", "role", "shard")
    lexeme = models.TextField()
    tenant = models.CharField(max_length=MAX_ID_LENGTH)
    #: The messages' role, so a ``roles`` filter reads its counts too.
    role = models.CharField(max_length=MAX_ID_LENGTH)
    shard = models.SmallIntegerField()
    rows = models.BigIntegerField()

    class Meta:
        verbose_name = _("term count")

    def __str__(self) -> str:
        return f"{self.tenant}/{self.role}/{self.shard}/{self.lexeme}={self.rows}"


class TermCountDelta(models.Model):
    """A change to a ``TermCount`` not added into it yet: the message table's triggers
    only append these (no writer updates a row another writer updates, so writers of one
    tenant never wait for each other), readers add them to the ``TermCount`` row, and
    folds move them into it (``postgresql.counts.deltas``). ``tenant``: the message's own
    (since migration 0010; a fold adds an uncounted tenant's term deltas to tenant
    ``""``'s row). ``serial`` (a sequence) keeps each row apart and says when a write
    folds. Empty on SQLite."""

    pk = models.CompositePrimaryKey("lexeme", "tenant", "role", "serial")
    lexeme = models.TextField()
    tenant = models.CharField(max_length=MAX_ID_LENGTH)
    role = models.CharField(max_length=MAX_ID_LENGTH)
    serial = models.BigIntegerField()
    rows = models.BigIntegerField()

    class Meta:
        verbose_name = _("term count delta")

    def __str__(self) -> str:
        return f"{self.tenant}/{self.role}/{self.lexeme}{self.rows:+d}"


class StoredForm(models.Model):
    """A stored form (``stored_form``) the database's message rows may be in: every write
    of message rows records its own; a full ``backfill_transcripts`` removes the others
    when it starts and marks its own ``reindexing`` until it ends. More than the form in
    force, or that one still ``reindexing``, is check W004."""

    form = models.CharField(max_length=64, primary_key=True)
    reindexing = models.BooleanField(default=False)

    class Meta:
        verbose_name = _("stored form")

    def __str__(self) -> str:
        return self.form


class Tombstone(models.Model):
    """A deleted chat: its id only, never its content."""

    chat_id = models.CharField(_("chat id"), max_length=MAX_ID_LENGTH, unique=True)
    deleted_at = models.DateTimeField(_("deleted at"), auto_now_add=True)

    class Meta:
        verbose_name = _("tombstone")

    def __str__(self) -> str:
        return self.chat_id


class LegacyChat(models.Model):
    """The legacy ``deuz_chats`` table of ``DjangoChatStore`` (no revisions)."""

    chat_id = models.CharField(_("chat id"), max_length=MAX_ID_LENGTH, unique=True)
    scope = models.JSONField(_("scope"), default=dict)
    payload = models.TextField(_("record JSON"))
    updated_at = models.DateTimeField(_("updated at"))

    class Meta:
        db_table = "deuz_chats"
        verbose_name = _("legacy chat")

    def __str__(self) -> str:
        return self.chat_id
