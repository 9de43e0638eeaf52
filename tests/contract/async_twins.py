"""The async twins of the store and index methods."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from deuz_transcripts import ChatDeleted, ChatRecord, RevisionConflict, TranscriptHit
from tests.contract.base import ContractBase
from tests.contract.helpers import ADA, chat, ids, ref, user


class AsyncContract(ContractBase):
    """``awrite_chat``, ``aload_chat``, ``asearch``... behave as their sync methods."""

    # ------------------------------------------------------------------ async twins

    def test_async_write_load_list(self, store):
        async def scenario() -> tuple[int, Any, list[ChatRecord]]:
            revision = await store.awrite_chat(chat("c1", "asyncword"), expected_revision=0)
            loaded = await store.aload_chat("c1")
            listed = await store.alist_chats(ADA)
            return revision, loaded, listed

        revision, (record, loaded_revision), listed = asyncio.run(scenario())
        assert (revision, loaded_revision) == (1, 1)
        assert record.messages == [user("asyncword")]
        assert [r.chat_id for r in listed] == ["c1"]

    def test_async_conflict_raises(self, store):
        store.write_chat(chat("c1", "x"), expected_revision=0)
        with pytest.raises(RevisionConflict):
            asyncio.run(store.awrite_chat(chat("c1", "y"), expected_revision=0))

    def test_async_search_and_resolve(self, store, index):
        store.write_chat(
            chat("c1", "asyncword", "next", message_ids=["m-1", "m-2"]), expected_revision=0
        )

        async def scenario() -> tuple[list[TranscriptHit], Any]:
            hits = await index.asearch(ADA, "asyncword", around=1, limit=5, offset=0)
            source = await index.aresolve_source(ADA, ref("c1", "m-1"))
            return hits, source

        hits, source = asyncio.run(scenario())
        assert [(h.message_id, [m.message_id for m in h.around]) for h in hits] == [
            ("m-1", ["m-2"])
        ]
        assert source.index == 0

    def test_async_delete(self, store, index):
        store.write_chat(chat("c1", "asyncword"), expected_revision=0)

        async def scenario() -> tuple[Any, list[TranscriptHit]]:
            await store.adelete_chat("c1")
            return await store.aload_chat("c1"), await index.asearch(ADA, "asyncword")

        assert asyncio.run(scenario()) == (None, [])
        with pytest.raises(ChatDeleted):
            asyncio.run(store.awrite_chat(chat("c1", "x"), expected_revision=0))

    def test_async_index_and_remove(self, index):
        async def scenario() -> tuple[list[str], list[str]]:
            await index.aindex(chat("c1", "asyncword"))
            found = ids(await index.asearch(ADA, "asyncword"))
            await index.aremove("c1")
            return found, ids(await index.asearch(ADA, "asyncword", chat_ids=["c1"]))

        assert asyncio.run(scenario()) == (["c1:0"], [])
