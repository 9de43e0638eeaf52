"""factory-boy factories for messages (the SDK's shapes) and chat records."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import factory
import factory.random

from deuz_transcripts import ChatRecord

__all__ = [
    "BASE_TIME",
    "ChatRecordFactory",
    "MessageFactory",
    "conversation",
    "file_part",
    "image_part",
    "reasoning_part",
    "text_part",
    "tool_call_part",
    "tool_result_part",
]

#: ``updated_at`` of the record with sequence number 0; later records are newer.
BASE_TIME = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)

factory.random.reseed_random("deuz_transcripts")


# Parts in the SDK's shape (section 3 of the spec).


def text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def reasoning_part(text: str) -> dict[str, Any]:
    return {"type": "reasoning", "text": text}


def tool_call_part(
    input: Any, *, tool_call_id: str = "call-1", tool_name: str = "lookup"
) -> dict[str, Any]:
    return {"type": "tool-call", "toolCallId": tool_call_id, "toolName": tool_name, "input": input}


def tool_result_part(
    output: Any, *, tool_call_id: str = "call-1", tool_name: str = "lookup"
) -> dict[str, Any]:
    """``output`` is a string, ``{"type": "text", "value": ...}`` or ``{"type": "json", ...}``."""
    return {
        "type": "tool-result",
        "toolCallId": tool_call_id,
        "toolName": tool_name,
        "output": output,
    }


def image_part(image: str = "https://example.com/cat.png") -> dict[str, Any]:
    return {"type": "image", "image": image}


def file_part(data: str, media_type: str = "text/plain") -> dict[str, Any]:
    return {"type": "file", "data": data, "mediaType": media_type}


class MessageFactory(factory.DictFactory):
    """``{"role": ..., "content": ...}``; ``text`` is the words, traits pick the shape.

    ``MessageFactory(text="hello")`` is a user message with string content;
    ``MessageFactory(text="hello", reasoning=True)`` an assistant message holding one
    reasoning part, and so on for ``parts``, ``tool_call``, ``tool_result``,
    ``tool_result_text``, ``tool_result_json``, ``system`` and ``assistant``.
    """

    class Params:
        text = factory.Faker("sentence")
        assistant = factory.Trait(role="assistant")
        system = factory.Trait(role="system")
        parts = factory.Trait(content=factory.LazyAttribute(lambda o: [text_part(o.text)]))
        reasoning = factory.Trait(
            role="assistant",
            content=factory.LazyAttribute(lambda o: [reasoning_part(o.text)]),
        )
        tool_call = factory.Trait(
            role="assistant",
            content=factory.LazyAttribute(lambda o: [tool_call_part({"query": o.text})]),
        )
        tool_result = factory.Trait(
            role="tool",
            content=factory.LazyAttribute(lambda o: [tool_result_part(o.text)]),
        )
        tool_result_text = factory.Trait(
            role="tool",
            content=factory.LazyAttribute(
                lambda o: [tool_result_part({"type": "text", "value": o.text})]
            ),
        )
        tool_result_json = factory.Trait(
            role="tool",
            content=factory.LazyAttribute(
                lambda o: [tool_result_part({"type": "json", "value": {"text": o.text}})]
            ),
        )

    role = "user"
    content = factory.LazyAttribute(lambda o: o.text)


def conversation(texts: list[str]) -> list[dict[str, Any]]:
    """Alternating user/assistant messages with string content."""
    return [MessageFactory(text=text, assistant=bool(i % 2)) for i, text in enumerate(texts)]


class ChatRecordFactory(factory.Factory):
    """A chat of scope ``{"userId": "ada"}``; ``texts=[...]`` builds its messages.

    ``updated_at`` grows with the sequence, so a later record is a newer chat.
    """

    class Meta:
        model = ChatRecord

    class Params:
        texts = None
        user_id = "ada"

    chat_id = factory.Sequence(lambda n: f"chat-{n}")
    scope = factory.LazyAttribute(lambda o: {"userId": o.user_id})
    messages = factory.LazyAttribute(
        lambda o: (
            conversation(o.texts)
            if o.texts is not None
            else [MessageFactory(), MessageFactory(assistant=True)]
        )
    )
    message_ids = None
    updated_at = factory.Sequence(lambda n: BASE_TIME + timedelta(minutes=n))
