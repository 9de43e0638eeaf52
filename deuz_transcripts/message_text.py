"""What text a message indexes: string content, text parts and string tool results.

Pure Python, shared by term extraction, spans and snippets (``text``, ``spans``), so
every surface reads the same text out of the SDK's, OpenAI's and Anthropic's shapes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["SYSTEM_ROLES", "indexed_text", "is_system"]

#: Roles whose messages are never indexed, returned in ``around`` or resolved.
SYSTEM_ROLES = frozenset({"system", "developer"})


def _is_mapping(value: Any) -> bool:
    """``isinstance(value, Mapping)``, without the ABC check for a plain dict (what a
    decoded message is: read for every message by indexing and ``verify``)."""
    return type(value) is dict or isinstance(value, Mapping)


def is_system(message: Any) -> bool:
    """System (and OpenAI ``developer``) messages are never indexed or shown."""
    return _is_mapping(message) and message.get("role") in SYSTEM_ROLES


def _tool_output_text(output: Any) -> str | None:
    """A tool result's string output (SDK ``output``), never structured JSON."""
    if isinstance(output, str):
        return output
    if isinstance(output, Mapping) and output.get("type") in ("text", "error-text"):
        value = output.get("value")
        return value if isinstance(value, str) else None
    return None


def _anthropic_result_text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [_part_text(block) for block in content]
        joined = [t for t in texts if t]
        return "\n".join(joined) if joined else None
    return None


def _part_text(part: Any) -> str | None:
    if not _is_mapping(part):
        return None
    kind = part.get("type")
    if kind == "text":
        text = part.get("text")
        return text if isinstance(text, str) else None
    if kind == "tool-result":
        return _tool_output_text(part.get("output"))
    if kind == "tool_result":
        return _anthropic_result_text(part.get("content"))
    return None


def _content_texts(content: Any) -> Iterable[str]:
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for part in content:
            text = _part_text(part)
            if text:
                yield text


def indexed_text(message: Any) -> str | None:
    """The searchable text of a message, ``None`` for a system message.

    Indexed: string content, text parts, string tool results (SDK, OpenAI and
    Anthropic shapes). Not indexed: reasoning/thinking, tool inputs, images,
    files, structured tool results. Unknown shapes give ``""``.
    """
    if not _is_mapping(message):
        return ""
    if is_system(message):
        return None
    return "\n".join(_content_texts(message.get("content")))
