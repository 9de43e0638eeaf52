"""``{{ hit|highlighted_excerpt }}``: the admin's highlighting rule in any template, escaped
piece by piece, bounded for long messages."""

from __future__ import annotations

from typing import Any

from django.template import Context, Template

from deuz_transcripts import ChatRecord, InMemoryTranscriptIndex, TranscriptMessage
from deuz_transcripts.highlight import highlighted_excerpt
from deuz_transcripts.text import indexed_text

SCOPE = {"userId": "ada"}


def _render(source: str, **context: Any) -> str:
    return Template("{% load deuz_transcripts %}" + source).render(Context(context))


def _hits(*texts: str, query: str = "izmir") -> list[Any]:
    index = InMemoryTranscriptIndex()
    index.index(
        ChatRecord(
            chat_id="c1",
            scope=SCOPE,
            messages=[{"role": "user", "content": text} for text in texts],
        )
    )
    return index.search(SCOPE, query)


def test_a_hit_renders_its_matched_words_marked_and_everything_else_escaped() -> None:
    (hit,) = _hits('<script>alert("x")</script> fly to <b>İzmir</b> & back')
    html = _render("{{ hit|highlighted_excerpt }}", hit=hit)
    assert html == (
        "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; fly to "
        "&lt;b&gt;<mark>İzmir</mark>&lt;/b&gt; &amp; back"
    )
    # the one rule: what the admin renders for the same hit
    assert html == highlighted_excerpt(indexed_text(hit.message) or "", hit.spans)


def test_a_marked_word_that_is_markup_stays_escaped() -> None:
    (hit,) = _hits("<mark>izmir</mark><img src=x onerror=alert(1)>", query="mark izmir img")
    html = _render("{{ hit|highlighted_excerpt }}", hit=hit)
    assert "<img" not in html and "<mark><mark>" not in html
    assert html.count("<mark>") == html.count("</mark>") >= 3
    assert html.replace("<mark>", "").replace("</mark>", "").count("<") == 0


def test_long_messages_render_bounded_excerpts() -> None:
    (hit,) = _hits("filler " * 5_000 + "izmir " + "filler " * 5_000)
    html = _render("{{ hit|highlighted_excerpt }}", hit=hit)
    assert "<mark>izmir</mark>" in html and len(html) < 1_000
    short = _render("{{ hit|highlighted_excerpt:50 }}", hit=hit)
    assert short.startswith("…") and "<mark>izmir</mark>" in short
    assert _render("{{ hit|highlighted_excerpt:'junk' }}", hit=hit) == html


def test_messages_strings_and_other_values_render_escaped_without_marks() -> None:
    message = {"role": "user", "content": "a <b> izmir"}
    item = TranscriptMessage("c1", "c1:0", 0, message)
    assert _render("{{ m|highlighted_excerpt }}", m=item) == "a &lt;b&gt; izmir"
    assert _render("{{ m|highlighted_excerpt }}", m=message) == "a &lt;b&gt; izmir"
    assert _render("{{ s|highlighted_excerpt }}", s="<i>") == "&lt;i&gt;"
    assert _render("{{ s|highlighted_excerpt }}", s="\ud800") == "\ufffd"
    system = {"role": "system", "content": "secret prompt"}
    assert _render("{{ m|highlighted_excerpt }}", m=system) == ""
    assert _render("{{ m|highlighted_excerpt }}", m=None) == ""
    assert _render("{{ missing|highlighted_excerpt }}") == ""
