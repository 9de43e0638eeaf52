"""Realistic demo chats for trying the admin: several users and languages, tools, reasoning.

Needs factory-boy and Faker (dev dependencies); only ``load_demo_transcripts``
imports this module, so the app itself does not require them.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict

import factory
import factory.random
from faker import Faker

from .records import ChatRecord

__all__ = ["DEMO_USERS", "IZMIR_CHAT_ID", "DemoChatFactory", "demo_chats", "izmir_chat"]

#: user id -> the Faker locale their chats are written in.
DEMO_USERS: dict[str, str] = {
    "ada": "en_US",
    "mehmet": "tr_TR",
    "lena": "de_DE",
    "camille": "fr_FR",
    "minh": "vi_VN",
    "eleni": "el_GR",
    "yuki": "ja_JP",
    "grace": "en_US",
}
AGENTS = {"travel": "travel-agent", "devops": "devops-assistant", "support": "support-bot"}
IZMIR_CHAT_ID = "demo-ada-izmir"

# What users say, per locale and chat kind; Faker fills the blanks and the small talk.
PHRASES: dict[str, dict[str, list[str]]] = {
    "en_US": {
        "travel": [
            "Can you book the flight to {city}?",
            "I need a hotel in {city} for two nights.",
        ],
        "devops": [
            "The deploy to {host} failed this morning.",
            "Can you check the logs of {host}?",
        ],
        "support": ["Where is my order {number}?", "I was charged twice for order {number}."],
    },
    "tr_TR": {
        "travel": ["{city} uçuşunu ayırtır mısın?", "{city} için iki gecelik otel arıyorum."],
        "devops": ["{host} sunucusuna dağıtım başarısız oldu.", "{host} günlüklerine bakar mısın?"],
        "support": ["{number} numaralı siparişim nerede?", "Siparişim {number} iki kez ödendi."],
    },
    "de_DE": {
        "travel": ["Kannst du den Flug nach {city} buchen?", "Ich brauche ein Hotel in {city}."],
        "devops": [
            "Das Deployment auf {host} ist fehlgeschlagen.",
            "Prüf bitte die Logs von {host}.",
        ],
        "support": [
            "Wo ist meine Bestellung {number}?",
            "Bestellung {number} wurde doppelt belastet.",
        ],
    },
    "fr_FR": {
        "travel": ["Peux-tu réserver le vol pour {city} ?", "Je cherche un hôtel à {city}."],
        "devops": [
            "Le déploiement sur {host} a échoué.",
            "Peux-tu regarder les journaux de {host} ?",
        ],
        "support": [
            "Où en est ma commande {number} ?",
            "Ma commande {number} a été débitée deux fois.",
        ],
    },
    "vi_VN": {
        "travel": ["Bạn có thể đặt vé máy bay đi {city} không?", "Tôi cần khách sạn ở {city}."],
        "devops": ["Triển khai trên máy chủ {host} bị lỗi.", "Xem giúp nhật ký của {host}."],
        "support": [
            "Đơn hàng {number} của tôi đang ở đâu?",
            "Đơn hàng {number} bị trừ tiền hai lần.",
        ],
    },
    "el_GR": {
        "travel": [
            "Μπορείς να κλείσεις την πτήση για {city};",
            "Χρειάζομαι ξενοδοχείο στη {city}.",
        ],
        "devops": ["Η ανάπτυξη στον {host} απέτυχε.", "Δες τα αρχεία καταγραφής του {host}."],
        "support": ["Πού είναι η παραγγελία μου {number};", "Χρεώθηκα δύο φορές για την {number}."],
    },
    "ja_JP": {
        "travel": [
            "{city}行きのフライトを予約してもらえますか？",
            "{city}のホテルを二泊探しています。",
        ],
        "devops": ["{host}へのデプロイが失敗しました。", "{host}のログを確認してください。"],
        "support": ["注文{number}はどこにありますか？", "注文{number}が二重に請求されました。"],
    },
}
SYSTEM_PROMPTS = {
    "travel": "You are a travel assistant. Book flights and hotels; answer in the user's language.",
    "devops": "You are a DevOps assistant with read access to deploy logs. Never run destructive commands.",
    "support": "You are a customer support agent. Look orders up before answering.",
}
#: Faker has no Turkish lorem; these words make tr_TR small talk Turkish.
TURKISH_WORDS = (  # noqa: SIM905  one line of words reads better than a column
    "merhaba teşekkürler yarın bugün akşam sabah uçak bilet otel oda fiyat ödeme sipariş kargo "
    "gecikme sorun çözüm lütfen hemen şimdi güzel değil çok az büyük küçük şehir havalimanı "
    "rezervasyon iptal değişiklik saat dakika gün hafta ay yıl ışık çiçek öğrenci müşteri İstanbul"
).split()
TOOLS = {"travel": "search_flights", "devops": "fetch_deploy_log", "support": "lookup_order"}


def deploy_log(rng: random.Random, host: str, lines: int) -> str:
    """A long, plausible deploy log: what tool results look like in practice."""
    start = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
    steps = ["pulling image", "running migrations", "warming cache", "health check", "rollout"]
    out = []
    for n in range(lines):
        stamp = (start + timedelta(seconds=n * 3)).strftime("%Y-%m-%dT%H:%M:%SZ")
        level = rng.choices(["INFO", "WARN", "ERROR"], weights=[90, 8, 2])[0]
        step = steps[n * len(steps) // lines]
        out.append(
            f"{stamp} {level} {host} {step}: step {n + 1}/{lines} ok=true id={rng.getrandbits(32):08x}"
        )
    out.append(f"{stamp} ERROR {host} rollout: readiness probe failed (HTTP 503), rolling back")
    return "\n".join(out)


def _assistant(
    text: str, reasoning: str | None = None, extra: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if reasoning:
        parts.append({"type": "reasoning", "text": reasoning})
    parts.extend(extra or [])
    if text:
        parts.append({"type": "text", "text": text})
    return {"role": "assistant", "content": parts}


class _WordList(TypedDict, total=False):
    """Faker's optional ``ext_word_list`` keyword (its lorem words for the locale otherwise)."""

    ext_word_list: Sequence[str]


def build_messages(kind: str, fake: Faker, rng: random.Random, locale: str) -> list[dict[str, Any]]:
    """One conversation: system prompt, user turns, assistant turns with tools and reasoning."""
    words: _WordList = {"ext_word_list": TURKISH_WORDS} if locale == "tr_TR" else {}
    host = f"web-{rng.randint(1, 9)}.{fake.domain_word()}.internal"
    number = f"{rng.randint(100000, 999999)}"
    city = fake.city()
    say = rng.choice(PHRASES[locale][kind]).format(city=city, host=host, number=number)
    call = f"call-{rng.getrandbits(40):010x}"
    tool = TOOLS[kind]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_PROMPTS[kind]},
        {"role": "user", "content": say},
        _assistant(
            fake.sentence(**words),
            reasoning=f"The user asked about {kind}; call {tool} first.",
            extra=[
                {"type": "tool-call", "toolCallId": call, "toolName": tool, "input": {"q": say}}
            ],
        ),
    ]
    if kind == "devops":
        output: str | dict[str, Any] = deploy_log(rng, host, rng.randint(60, 400))
    elif kind == "support":
        output = {"type": "json", "value": {"order": number, "status": "shipped", "city": city}}
    else:
        output = {"type": "text", "value": f"3 flights to {city}: 07:15, 09:40, 18:05."}
    messages.append(
        {
            "role": "tool",
            "content": [
                {"type": "tool-result", "toolCallId": call, "toolName": tool, "output": output}
            ],
        }
    )
    for _ in range(rng.randint(1, 5)):
        messages.append(
            {"role": "user", "content": fake.sentence(nb_words=rng.randint(4, 14), **words)}
        )
        messages.append(_assistant(fake.paragraph(nb_sentences=rng.randint(1, 3), **words)))
    if rng.random() < 0.1:
        messages.append(
            {
                "role": "user",
                "content": [{"type": "image", "image": "https://example.com/receipt.png"}],
            }
        )
    return messages


class DemoChatFactory(factory.Factory[ChatRecord]):
    """A demo ``ChatRecord``; ``user`` and ``kind`` pick scope, language and shape."""

    class Meta:
        model = ChatRecord
        exclude = ("fake", "rng", "locale")

    class Params:
        user = "ada"
        kind = "travel"
        base_time = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)

    rng = factory.LazyFunction(lambda: random.Random(factory.random.randgen.random()))
    locale = factory.LazyAttribute(lambda o: DEMO_USERS.get(o.user, "en_US"))
    fake = factory.LazyAttribute(lambda o: _faker(o.locale, o.rng))
    chat_id = factory.LazyAttributeSequence(lambda o, n: f"demo-{o.user}-{n:04d}")
    scope = factory.LazyAttribute(lambda o: {"userId": o.user, "agentId": AGENTS[o.kind]})
    messages = factory.LazyAttribute(lambda o: build_messages(o.kind, o.fake, o.rng, o.locale))
    message_ids = None
    updated_at = factory.LazyAttribute(
        lambda o: o.base_time - timedelta(minutes=o.rng.randint(0, 90 * 24 * 60))
    )


_FAKERS: dict[str, Faker] = {}


def _faker(locale: str, rng: random.Random) -> Faker:
    """One Faker per locale (building one is slow), reseeded for every chat."""
    fake = _FAKERS.get(locale)
    if fake is None:
        fake = _FAKERS[locale] = Faker(locale)
    fake.seed_instance(rng.getrandbits(32))
    return fake


def izmir_chat(updated_at: datetime | None = None) -> ChatRecord:
    """The chat the admin tour (docs/admin.md) and the browser test look for (user ``ada``)."""
    return ChatRecord(
        chat_id=IZMIR_CHAT_ID,
        scope={"userId": "ada", "agentId": "travel-agent"},
        messages=[
            {"role": "system", "content": SYSTEM_PROMPTS["travel"]},
            {"role": "user", "content": "I am speaking at a conference in Turkey next week."},
            {"role": "assistant", "content": "Happy to help. Which city should I book for you?"},
            {"role": "user", "content": "Book the flight to İzmir."},
            _assistant(
                "",
                reasoning="Izmir airport is ADB; search flights for next Monday.",
                extra=[
                    {
                        "type": "tool-call",
                        "toolCallId": "call-izmir",
                        "toolName": "search_flights",
                        "input": {"to": "ADB", "date": "next monday"},
                    }
                ],
            ),
            {
                "role": "tool",
                "content": [
                    {
                        "type": "tool-result",
                        "toolCallId": "call-izmir",
                        "toolName": "search_flights",
                        "output": "TK2324 IST-ADB 09:40, seat 14C available",
                    }
                ],
            },
            _assistant("Done: TK2324 to İzmir on Monday at 09:40, seat 14C."),
        ],
        updated_at=updated_at or datetime(2024, 6, 1, 12, 0, tzinfo=UTC),
    )


def demo_chats(count: int, seed: int) -> Iterator[ChatRecord]:
    """``count`` chats spread over the demo users, the İzmir chat first; same seed, same chats."""
    factory.random.reseed_random(seed)
    DemoChatFactory.reset_sequence(0, force=True)  # type: ignore[no-untyped-call]  # unannotated in factory-boy
    yield izmir_chat()
    users, kinds = list(DEMO_USERS), list(AGENTS)
    for n in range(max(0, count - 1)):
        # create(): what DemoChatFactory(...) calls (the default strategy), typed as ChatRecord
        yield DemoChatFactory.create(user=users[n % len(users)], kind=kinds[n % len(kinds)])
