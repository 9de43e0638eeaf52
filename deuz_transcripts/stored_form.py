"""The stored form: the name of the text rules that wrote a database's search data.

A message's stored terms depend on the folding and term rules in force (``CJK_BIGRAMS``,
and under it how Kana voicing marks fold): each row's digest covers the name
(``prepared.message_digest``), so a re-index rewrites rows of another form, and each
database records the names of the forms its rows may be in (``StoredForm``), so one read
tells whether the settings changed under it.

Pure Python: no Django import.
"""

from __future__ import annotations

from .prepared import STORED_FORM_VERSION
from .text import CJK_BIGRAMS_TAG, text_rules_tag

__all__ = ["UNRECORDED", "current_form", "describe_form"]

#: What the migration records for a database that held messages before forms were recorded.
UNRECORDED = "unrecorded"
_DESCRIPTIONS = {
    f"{STORED_FORM_VERSION}": "CJK_BIGRAMS=False",
    f"{STORED_FORM_VERSION}{CJK_BIGRAMS_TAG}": "CJK_BIGRAMS=True (kana voicing marks kept)",
    f"{STORED_FORM_VERSION}+cjk-bigrams": (
        "CJK_BIGRAMS=True (kana voicing marks dropped, before 2026-12-06)"
    ),
    UNRECORDED: "a form this version did not record (indexed before it)",
}


def current_form() -> str:
    """The form the settings in force write: the stored-form version and the term rule."""
    return f"{STORED_FORM_VERSION}{text_rules_tag()}"


def describe_form(form: str) -> str:
    """What an operator knows a form by (the setting that wrote it)."""
    return _DESCRIPTIONS.get(form, f"stored form {form!r}")
