"""PostgreSQL's stored term counts (``CountedTerm``, ``TermCount``): true after every path
that changes message rows, read by unscoped and tenant searches with the hits counting
gives (uncounted terms counted in GIN), chosen by ``backfill_transcripts --count-terms``,
and found and rebuilt by ``verify`` when something outside the triggers broke them.

``assert_consistent`` (``Verifier.problems``) checks the counts too, so every
reliability suite that calls it (concurrency, faults, deletes) checks them as well.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from unittest import mock

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.db.models import Sum
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from deuz_transcripts import ChatRecord, InMemoryTranscriptIndex
from deuz_transcripts.backends import forced_policies, policy
from deuz_transcripts.backends.postgresql.counts import refresh as count_refresh
from deuz_transcripts.backends.postgresql.counts.refresh import refresh_term_counts
from deuz_transcripts.backends.postgresql.counts.stored import (
    COUNTED_MIN_ROWS,
    COUNTED_TENANT_MIN_ROWS,
    count_drift,
)
from deuz_transcripts.models import (
    Chat,
    CountedTenant,
    CountedTerm,
    Message,
    TermCount,
    TermCountDelta,
)
from deuz_transcripts.stores import DjangoConditionalChatStore, DjangoTranscriptIndex
from deuz_transcripts.verify import Verifier
from tests.sent_statements import statements_sent
from tests.sql_support import assert_consistent, run_threads

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's counts"),
]

WHEN = datetime(2025, 3, 1, tzinfo=UTC)
COUNTS = TermCount._meta.db_table


@contextmanager
def tenant_key(key: str | None) -> Iterator[None]:
    with override_settings(DEUZ_TRANSCRIPTS={**settings.DEUZ_TRANSCRIPTS, "TENANT_KEY": key}):
        yield


def chat(chat_id: str, user: str, *texts: str, minutes: int = 0, **scope: str) -> ChatRecord:
    return ChatRecord(
        chat_id,
        {"userId": user, **scope},
        [{"role": "user", "content": text} for text in texts],
        updated_at=WHEN + timedelta(minutes=minutes),
    )


def stored(lexeme: str, tenant: str | None = None) -> int:
    """A count as searches read it: its row plus its pending deltas (a delta names its
    message's tenant: an uncounted tenant's term deltas belong to tenant ``""``)."""
    counted = set(CountedTenant.objects.values_list("tenant", flat=True))
    if lexeme and tenant not in (None, "", *counted):
        return 0  # an uncounted tenant has no term counts of its own
    total = 0
    for model in (TermCount, TermCountDelta):
        rows = model.objects.filter(lexeme=lexeme)
        if tenant is not None and (lexeme == "" or tenant in counted):
            rows = rows.filter(tenant=tenant)
        elif tenant is not None:  # tenant "": its own and every uncounted tenant's
            rows = rows.exclude(tenant__in=counted)
        total += int(rows.aggregate(n=Sum("rows"))["n"] or 0)
    return total


def in_counts(**where: object) -> bool:
    """Whether a count row or a pending delta matches ``where``."""
    return any(model.objects.filter(**where).exists() for model in (TermCount, TermCountDelta))


def count_terms(min_rows: int, tenant_min_rows: int = 1) -> int:
    """A refresh; every tenant with a message counts its terms on its own, unless told."""
    with connection.cursor() as cursor:
        return refresh_term_counts(cursor, min_rows, tenant_min_rows=tenant_min_rows)


def drift() -> list[tuple[str, str, str, int, int]]:
    with connection.cursor() as cursor:
        return count_drift(cursor)


def test_counts_follow_every_path_that_changes_messages():
    """Writes, rewrites, deletes, leaving and rejoining search, ORM cascades and raw SQL:
    after each, every (tenant, term) count equals the vectors holding the term."""
    with tenant_key("userId"):
        store = DjangoConditionalChatStore()
        revisions = {}
        for n in range(6):
            user = "ada" if n % 3 else "bob"
            texts = ["alpha beta", f"gamma {n}", "alpha alpha delta" if n % 2 else "beta", "!!"]
            revisions[n] = store.write_chat(chat(f"c{n}", user, *texts), expected_revision=0)
        store.write_chat(chat("seed", "", "omega"), expected_revision=0)  # tenant ""
        assert stored("") == 6 * 3 + 1 and stored("alpha") == 0  # N only: nothing chosen
        assert count_terms(1) == len(CountedTerm.objects.all())  # every term, once
        assert not CountedTerm.objects.filter(lexeme__startswith="\ue000").exists()
        assert drift() == []
        assert stored("alpha") == 6 + 3  # "alpha" twice in one message counts one row
        assert stored("alpha", "ada") == 4 + 2 and stored("alpha", "bob") == 2 + 1
        assert stored("") == 6 * 3 + 1  # N: rows with terms ("!!" has none)
        assert set(TermCount.objects.values_list("shard", flat=True)) == {0}
        store.write_chat(chat("c6", "ada", "alpha novel"), expected_revision=0)
        assert stored("alpha", "ada") == 7 and stored("novel") == 0  # chosen later, if ever

        store.write_chat(chat("c1", "ada", "omega"), expected_revision=revisions[1])
        store.delete_chat("c2")
        assert drift() == [] and stored("omega", "ada") == 1
        assert stored("2") == 0 and not TermCount.objects.filter(rows__lte=0).exists()
        assert stored("omega") == 2  # "2" was only c2's: no longer counted either
        assert not CountedTerm.objects.filter(lexeme="2").exists()
        index = DjangoTranscriptIndex()
        index.remove("c4")  # out of search: vectors cleared, rows kept
        assert drift() == [] and stored("", "ada") == 1 + 3 + 1  # c1 rewritten, c5, c6
        Chat.objects.filter(chat_id="c5").delete()  # an ORM cascade
        Message.objects.filter(chat__chat_id="c3", position=0).delete()
        assert drift() == []
        with connection.cursor() as cursor:  # a tenant changed by hand (a stale tenant fix)
            cursor.execute(
                f"UPDATE {Message._meta.db_table} SET tenant = 'eve' "
                "WHERE chat_id = (SELECT id FROM deuz_transcripts_chat WHERE chat_id = 'c0')"
            )
        # "eve" is no counted tenant: its N is its own, its terms are tenant ""'s
        assert drift() == [] and stored("", "eve") == 3 and stored("gamma", "eve") == 0
        call_command("backfill_transcripts", "--source", "stored", stdout=mock.Mock())
        assert drift() == []
        # the hand-made changes left chats stale (their counts, c0's tenant): --fix
        # rewrites them, through the triggers again
        call_command("backfill_transcripts", "--fix", stdout=mock.Mock())
        assert drift() == []
        assert_consistent()


def test_unscoped_and_tenant_searches_read_the_stored_counts_and_rank_as_counting_does():
    """Same hits and scores as the memory index; the counted terms' n_t come from
    ``TermCount`` for the whole index and for a tenant (the others from GIN), never for
    a narrower scope."""
    with tenant_key("userId"):
        store = DjangoConditionalChatStore()
        memory = InMemoryTranscriptIndex()
        for n in range(40):
            user = "ada" if n % 4 else "bob"
            words = ["common", *(["alpha"] * (n % 3 == 0)), *(["rare"] * (n in (5, 22)))]
            record = chat(f"c{n:02}", user, " ".join(words), "common filler", minutes=n)
            if n % 5 == 0:
                record = chat(f"c{n:02}", user, " ".join(words), minutes=n, project="x")
            store.write_chat(record, expected_revision=0)
            memory.index(record)
        for n, scope in enumerate(({"userId": ""}, {"project": "x"})):
            record = ChatRecord(f"e{n}", scope, [{"role": "user", "content": "rare common"}])
            store.write_chat(record, expected_revision=0)
            memory.index(record)
        assert count_terms(10) == 3  # common, alpha, filler; "rare" is counted in GIN
        forced = forced_policies(  # no probe: a page of rows holding every term needs no count
            single_statement_max=0, lexeme_scope_min=0, small_read_rows=10**9, few_terms=0
        )
        with mock.patch.object(policy, "FORCED", forced):
            for scope, counted in (
                ({}, True),
                ({"userId": "ada"}, True),
                ({"userId": "ada", "project": "x"}, False),
                ({"userId": ""}, False),  # tenant "" also holds chats without the field
            ):
                for query in ("rare common", "alpha common", "rare alpha filler common"):
                    with CaptureQueriesContext(connection) as queries:
                        hits = store.transcript.search(scope, query, limit=5)
                    want = memory.search(scope, query, limit=5)
                    assert [(h.chat_id, h.message_id, h.score) for h in hits] == [
                        (h.chat_id, h.message_id, h.score) for h in want
                    ], (scope, query)
                    reads = any(COUNTS in q["sql"] for q in queries.captured_queries)
                    assert reads == counted, (scope, query)


def test_a_one_word_probe_reads_the_stored_count():
    """How many rows hold a counted word, for the newest-first probe of a tenant search,
    is its stored count: no GIN merge of the word's and the tenant's posting lists (an
    unscoped probe keeps GIN, which stops at the cap, where the count sums every tenant's
    row); the same hits as the memory index (walked, or read with fewer rows than a walk).
    The walk guessed from the counts, which skips the probe, is off here
    (``test_guessed_walk``)."""
    with tenant_key("userId"):
        store = DjangoConditionalChatStore()
        memory = InMemoryTranscriptIndex()
        for n in range(12):
            record = chat(f"c{n:02}", "ada" if n % 3 else "bob", "common words", minutes=n)
            store.write_chat(record, expected_revision=0)
            memory.index(record)
        assert count_terms(5) == 2  # common, words
        for walk_from in (4, 10):
            forced = forced_policies(small_read_rows=walk_from, big_read_rows=0)
            with mock.patch.object(policy, "FORCED", forced):
                for scope in ({}, {"userId": "ada"}):
                    with CaptureQueriesContext(connection) as queries:
                        hits = store.transcript.search(scope, "common", limit=3)
                    want = memory.search(scope, "common", limit=3)
                    assert [(h.chat_id, h.score) for h in hits] == [
                        (h.chat_id, h.score) for h in want
                    ]
                    statements = statements_sent(queries)
                    probed = any("AS probe" in sql for sql in statements)
                    assert probed == (scope == {}), scope
                    assert any(COUNTS in sql for sql in statements) == (scope != {})


def test_verify_finds_counts_that_drifted_and_fix_rebuilds_them():
    store = DjangoConditionalChatStore()
    store.write_chat(chat("c1", "ada", "alpha beta"), expected_revision=0)
    store.write_chat(chat("c2", "ada", "alpha"), expected_revision=0)
    count_terms(1)
    TermCount.objects.filter(lexeme="alpha").delete()  # as after a TRUNCATE, say
    tenant = Chat.objects.get(chat_id="c1").tenant  # "ada" with TENANT_KEY = "userId"
    assert [str(problem) for problem in Verifier().problems()] == [
        f"counts: stored term counts differ from the vectors: tenant {tenant!r} role 'user' "
        "term 'alpha' counts 0, its vectors 2"
    ]
    with pytest.raises(CommandError):
        call_command("backfill_transcripts", "--verify", stdout=mock.Mock())
    call_command("backfill_transcripts", "--fix", stdout=mock.Mock())
    assert drift() == [] and stored("alpha") == 2


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_of_one_tenant_neither_deadlock_nor_lose_counts():
    """Writers of chats in the same and in different shards, each chat written, rewritten
    and deleted: the shard locks queue them; every count ends true."""
    with tenant_key("userId"):
        store = DjangoConditionalChatStore()
        store.write_chat(chat("seed", "ada", "alpha omega beta shared words"), expected_revision=0)
        count_terms(1)

        def work(n: int) -> None:
            for k in range(4):
                chat_id = f"t{n}-{k}"
                revision = store.write_chat(
                    chat(chat_id, "ada", f"alpha w{n} k{k}", "beta shared words"),
                    expected_revision=0,
                )
                store.write_chat(chat(chat_id, "ada", "alpha omega"), expected_revision=revision)
                if k % 2:
                    store.delete_chat(chat_id)

        results = run_threads(8, work)
        assert [r for r in results if r is not None] == []
        assert drift() == []
        assert stored("alpha", "ada") == 8 * 2 + 1 and stored("omega", "ada") == 8 * 2 + 1
        assert_consistent()


def test_count_terms_chooses_the_common_terms_and_is_postgresql_only():
    store = DjangoConditionalChatStore()
    for n in range(3):
        store.write_chat(chat(f"c{n}", "ada", "alpha", f"beta{n}"), expected_revision=0)
    out = mock.Mock()
    call_command("backfill_transcripts", "--count-terms", stdout=out)
    assert COUNTED_MIN_ROWS > 3 and not CountedTerm.objects.exists()
    assert "0 term(s) in at least 2,000 indexed messages" in str(out.write.call_args)
    assert count_terms(3) == 1 and stored("alpha") == 3 and stored("beta0") == 0
    with pytest.raises(CommandError, match="use it alone"):
        call_command("backfill_transcripts", "--count-terms", "--verify")


def test_a_counted_term_held_only_by_deleted_chats_leaves_both_tables():
    """A privacy delete: a word common enough to be counted (a name in every message of
    one user, say) but held by no other message is gone from ``CountedTerm`` too."""
    store = DjangoConditionalChatStore()
    store.write_chat(chat("c1", "ada", "zebulon alpha", "zebulon"), expected_revision=0)
    store.write_chat(chat("c2", "ada", "alpha"), expected_revision=0)
    count_terms(1)
    assert stored("zebulon") == 2
    store.delete_chat("c1")
    assert not CountedTerm.objects.filter(lexeme="zebulon").exists()
    assert not in_counts(lexeme="zebulon")
    assert CountedTerm.objects.filter(lexeme="alpha").exists() and stored("alpha") == 1
    assert drift() == []


@pytest.mark.parametrize("one_pass", [False, True], ids=["gin", "one-pass"])
def test_a_refresh_counts_the_newly_common_terms_and_leaves_the_others_alone(monkeypatch, one_pass):
    """Counts kept by the triggers are not read again (a drift planted in one survives the
    refresh: only ``--fix`` rebuilds); new common terms get exact counts, whether GIN finds
    their rows or one pass reads every vector; a term no longer common leaves both tables."""
    # the new terms' rows against the table's: fewer reads them through GIN
    monkeypatch.setattr(count_refresh, "stored_total", lambda cursor, tenant: 0 if one_pass else 99)
    with tenant_key("userId"):
        store = DjangoConditionalChatStore()
        first = store.write_chat(
            chat("c1", "ada", "alpha gamma", "alpha gamma"), expected_revision=0
        )
        store.write_chat(chat("c2", "bob", "alpha beta"), expected_revision=0)
        assert count_terms(2) == 2  # alpha, gamma
        TermCount.objects.filter(lexeme="alpha", tenant="ada").update(rows=40)
        revision = store.write_chat(chat("c3", "eve", "beta"), expected_revision=0)
        store.write_chat(chat("c3", "eve", "beta", "beta"), expected_revision=revision)
        store.write_chat(chat("c1", "ada", "alpha gamma", "alpha"), expected_revision=first)
        with CaptureQueriesContext(connection) as queries:
            assert count_terms(2) == 2  # alpha kept, beta new, gamma gone
        counting = [q["sql"] for q in queries.captured_queries if "INSERT INTO" in q["sql"]]
        assert any("@@" in sql for sql in counting) == (not one_pass)
        assert set(CountedTerm.objects.values_list("lexeme", flat=True)) == {"alpha", "beta"}
        assert stored("beta") == 3 and stored("beta", "eve") == 2
        assert not in_counts(lexeme="gamma")
        assert stored("alpha", "ada") == 40  # not recounted
        assert drift() == [("ada", "user", "alpha", 40, 2)]
        call_command("backfill_transcripts", "--fix", stdout=mock.Mock())
        assert drift() == [] and stored("alpha") == 3


@pytest.mark.parametrize("rebuild", [False, True], ids=["refresh", "rebuild"])
def test_the_choice_takes_no_lock_and_a_term_gone_before_the_lock_is_not_counted(
    monkeypatch, rebuild
):
    """Writers go on while every vector is read to choose; a chosen term whose rows were
    deleted before the lock (here: one no row ever held) stays out of both tables."""
    store = DjangoConditionalChatStore()
    store.write_chat(chat("c1", "ada", "alpha", "alpha"), expected_revision=0)
    choose = count_refresh._common_terms
    held: list[str] = []

    def choose_and_look(cursor, min_rows):  # type: ignore[no-untyped-def]
        cursor.execute(
            "SELECT mode FROM pg_locks WHERE pid = pg_backend_pid() "
            f"AND relation = '{Message._meta.db_table}'::regclass"
        )
        held.extend(mode for (mode,) in cursor.fetchall())
        return {**choose(cursor, min_rows), "ghost": 2}

    monkeypatch.setattr(count_refresh, "_common_terms", choose_and_look)
    with connection.cursor() as cursor:
        assert refresh_term_counts(cursor, 2, tenant_min_rows=1, rebuild=rebuild) == 1
    assert "ShareLock" not in held
    assert set(CountedTerm.objects.values_list("lexeme", flat=True)) == {"alpha"}
    assert not in_counts(lexeme="ghost") and drift() == []


def gin_term_counts(statements: list[str]) -> int:
    """The statements that count one term's rows in GIN."""
    return sum(sql.startswith("SELECT count(*)") and "@@" in sql for sql in statements)


def test_only_big_tenants_count_their_terms_and_a_refresh_moves_tenants_that_grow_or_shrink():
    """Below ``tenant_min_rows`` a tenant keeps its own N only: its terms are counted with
    every other small tenant's under tenant ``""`` (what an unscoped search sums), and its
    searches count terms in GIN, ranking as the memory index does. A refresh gives a
    tenant that grew its own counts (taken off ``""``) and a tenant that shrank its
    counts back; every count stays exact and no count row is left at zero."""
    assert COUNTED_TENANT_MIN_ROWS == 10_000
    with tenant_key("userId"):
        store = DjangoConditionalChatStore()
        memory = InMemoryTranscriptIndex()
        for n in range(4):
            record = chat(f"a{n}", "ada", "alpha beta", f"alpha w{n}", minutes=n)
            store.write_chat(record, expected_revision=0)
            memory.index(record)
        record = chat("b0", "bob", "alpha gamma", minutes=9)
        store.write_chat(record, expected_revision=0)
        memory.index(record)
        store.write_chat(chat("n0", "", "alpha beta"), expected_revision=0)  # no tenant
        memory.index(chat("n0", "", "alpha beta"))
        assert count_terms(2, tenant_min_rows=4) == 2  # alpha, beta
        assert set(CountedTenant.objects.values_list("tenant", flat=True)) == {"ada"}
        assert stored("alpha", "ada") == 8 and stored("alpha", "bob") == 0
        assert stored("alpha", "") == 2 and stored("", "bob") == 1 and stored("alpha") == 10
        assert drift() == []
        forced = forced_policies(  # n_t counted, not a single statement for a small scope
            single_statement_max=0, lexeme_scope_min=0, small_read_rows=10**9, few_terms=0
        )
        for scope, gin_counts in (({"userId": "ada"}, 0), ({"userId": "bob"}, 2), ({}, 0)):
            with (
                mock.patch.object(policy, "FORCED", forced),
                CaptureQueriesContext(connection) as queries,
            ):
                hits = store.transcript.search(scope, "alpha beta", limit=10)
            want = memory.search(scope, "alpha beta", limit=10)
            assert [(h.message_id, h.score) for h in hits] == [
                (h.message_id, h.score) for h in want
            ], scope
            statements = statements_sent(queries)
            assert gin_term_counts(statements) == gin_counts, scope

        for n in range(1, 4):  # bob grows: his new rows go to tenant "" until the refresh
            store.write_chat(chat(f"b{n}", "bob", "alpha beta"), expected_revision=0)
        assert stored("alpha", "bob") == 0 and drift() == []
        store.delete_chat("a0")
        store.delete_chat("a1")  # ada shrinks to 4 rows: still big
        store.delete_chat("a2")  # 2 rows: small at the next refresh
        assert count_terms(2, tenant_min_rows=4) == 2
        assert set(CountedTenant.objects.values_list("tenant", flat=True)) == {"bob"}
        assert stored("alpha", "bob") == 4 and stored("beta", "bob") == 3
        assert not any(
            model.objects.filter(tenant="ada").exclude(lexeme="").exists()
            for model in (TermCount, TermCountDelta)
        )
        assert stored("", "ada") == 2 and stored("alpha", "") == 2 + 1
        assert drift() == [] and not in_counts(rows=0)
        store.delete_chat("a3")  # ada gone: its N row too, and at the refresh nothing moves
        assert count_terms(2, tenant_min_rows=4) == 2 and drift() == []
        assert not in_counts(tenant="ada")
        for n in range(4):  # a counted tenant deleted: no row names it any more
            store.delete_chat(f"b{n}")
        assert not CountedTenant.objects.exists() and drift() == []
        assert not in_counts(tenant="bob")
        assert_consistent()


def test_the_default_refresh_counts_no_small_tenant_on_its_own():
    store = DjangoConditionalChatStore()
    with tenant_key("userId"):
        store.write_chat(chat("c1", "ada", "alpha", "alpha beta"), expected_revision=0)
        with connection.cursor() as cursor:
            assert refresh_term_counts(cursor, 2) == 1
        assert not CountedTenant.objects.exists() and stored("alpha", "") == 2
        assert stored("", "ada") == 2 and drift() == []


def test_a_roles_filter_reads_the_counts_of_its_roles_and_a_window_too():
    """The counts are kept by role, so a ``roles`` search of the whole index or of a big
    tenant sums the counts of its roles (no GIN count), with the memory index's hits and
    scores; a window filters hits only, so its N and n_t are the stored counts of the
    search without it (``test_window_counts``), its own rows counted for its page."""
    with tenant_key("userId"):
        store = DjangoConditionalChatStore()
        memory = InMemoryTranscriptIndex()
        for n in range(12):
            texts = ["common alpha", "common beta" if n % 2 else "common", "alpha tool out"]
            messages = [
                {"role": role, "content": text}
                for role, text in zip(("user", "assistant", "tool"), texts, strict=True)
            ]
            user = "ada" if n % 3 else "bob"
            record = ChatRecord(
                f"c{n:02}", {"userId": user}, messages, updated_at=WHEN + timedelta(minutes=n)
            )
            store.write_chat(record, expected_revision=0)
            memory.index(record)
        assert count_terms(4, tenant_min_rows=20) == 5  # common, alpha, beta (6), tool, out
        assert set(CountedTenant.objects.values_list("tenant", flat=True)) == {"ada"}
        assert stored("alpha") == 24 and in_counts(role="tool")
        forced = forced_policies(
            single_statement_max=0, lexeme_scope_min=0, small_read_rows=10**9, few_terms=0
        )
        few = {"updated_after": WHEN + timedelta(minutes=9)}  # 2 of ada's 8 chats
        most = {"updated_after": WHEN + timedelta(minutes=3)}  # 6 of them
        for scope, roles, extra, counted_by in (
            ({}, ["user"], {}, "stored"),
            ({}, ["assistant", "tool"], {}, "stored"),
            ({"userId": "ada"}, ["user", "assistant"], {}, "stored"),
            ({"userId": "ada"}, ["tool"], {}, "stored"),
            ({"userId": "bob"}, ["user"], {}, "gin"),  # a small tenant
            ({"userId": "ada"}, ["user"], few, "stored+window"),
            ({"userId": "ada"}, ["user"], most, "stored+window"),
        ):
            for query in ("common alpha", "beta common", "alpha tool"):
                with (
                    mock.patch.object(policy, "FORCED", forced),
                    CaptureQueriesContext(connection) as queries,
                ):
                    hits = store.transcript.search(scope, query, limit=8, roles=roles, **extra)
                want = memory.search(scope, query, limit=8, roles=roles, **extra)
                assert [(h.message_id, h.score) for h in hits] == [
                    (h.message_id, h.score) for h in want
                ], (scope, roles, query)
                statements = statements_sent(queries)
                stored_read = any(CountedTerm._meta.db_table in sql for sql in statements)
                if extra:  # the stored counts, then the window's own rows for its page
                    assert stored_read, (scope, roles, query)
                    assert not any(
                        "@@" in sql and "updated_at" not in sql and sql.startswith("SELECT count")
                        for sql in statements
                    ), (scope, roles, query)
                    continue
                how = "gin" if gin_term_counts(statements) else "stored" if stored_read else "rows"
                assert how == counted_by, (scope, roles, query)


def test_a_counted_page_takes_its_total_and_next_pages_from_the_stored_counts():
    """``search_page`` of the whole index or a counted tenant: the mask histogram (the
    exact total, the next pages' masks) is built from the stored counts and the rarer
    terms' rows, never by reading every match; every page, total and cursor as the
    memory index gives them."""
    with tenant_key("userId"):
        store = DjangoConditionalChatStore()
        memory = InMemoryTranscriptIndex()
        for n in range(30):
            words = ["common", *(["alpha"] * (n % 3 == 0)), *(["rare"] * (n in (4, 17)))]
            record = chat(f"c{n:02}", "ada" if n % 5 else "bob", " ".join(words), minutes=n)
            store.write_chat(record, expected_revision=0)
            memory.index(record)
        assert count_terms(8, tenant_min_rows=20) == 2  # common, alpha
        forced = forced_policies(single_statement_max=0, small_read_rows=6, essential_max_rows=15)
        for scope in ({}, {"userId": "ada"}):
            for query in ("common", "rare common", "alpha common rare", "alpha common"):
                cursor, got, want = None, [], []
                with (
                    mock.patch.object(policy, "FORCED", forced),
                    CaptureQueriesContext(connection) as queries,
                ):
                    while True:
                        page = store.transcript.search_page(scope, query, limit=4, cursor=cursor)
                        got.append((page.total, [(h.message_id, h.score) for h in page.hits]))
                        if (cursor := page.next_cursor) is None:
                            break
                cursor = None
                while True:
                    page = memory.search_page(scope, query, limit=4, cursor=cursor)
                    want.append((page.total, [(h.message_id, h.score) for h in page.hits]))
                    if (cursor := page.next_cursor) is None:
                        break
                assert got == want, (scope, query)
                statements = statements_sent(queries)
                assert not any("GROUP BY h.mask" in sql for sql in statements), (scope, query)
                every_match = [
                    s for s in statements if s.startswith("SELECT count(*)") and " | " in s
                ]
                assert every_match == [], (scope, query)
