"""Time in questions and messages (mcp_memory/search/dates.py), and the hybrid calibration pieces
of core/hybrid.py, without a database."""

from __future__ import annotations

from datetime import UTC, datetime

from mcp_memory.core import hybrid
from mcp_memory.search import dates

WEDNESDAY = datetime(2024, 5, 8, 18, 0, tzinfo=UTC)


def test_time_questions_in_english_and_chinese() -> None:
    for text in ("When did Tom get promoted?", "what date was the wedding", "How long ago was the trip?",
                 "王磊是什么时候升职的？", "李娜哪天从大理回来的", "婚礼是几号"):
        assert dates.is_time_question(text), text
    for text in ("Which company promoted Tom?", "李娜领养的是什么品种的狗？", "whenever works"):
        assert not dates.is_time_question(text), text


def test_named_months_and_the_verb_may() -> None:
    assert dates.named_months("What did Maya say about pottery in May?") == {5}
    assert dates.named_months("anything from last March or during june") == {3, 6}
    assert dates.named_months("李娜五月说了什么") == {5}
    assert dates.named_months("十一月和12月的事") == {11, 12}
    assert dates.named_months("May I ask what we decided?") == set()
    assert dates.named_months("we may switch to Kafka") == set()


def test_relative_expressions_are_dated_from_the_message() -> None:
    text = dates.annotate("Yesterday we adopted him; last week I signed up; on Saturday I fell.", WEDNESDAY)
    assert text == ("Yesterday (2024-05-07) we adopted him; last week (week of 2024-04-29) I signed up; "
                    "on Saturday (2024-05-04) I fell.")
    assert dates.annotate("昨天领回来的，上周报名，周六扭伤了", WEDNESDAY) == \
        "昨天（2024-05-07）领回来的，上周（2024-04-29 那周）报名，周六（2024-05-04）扭伤了"
    assert dates.annotate("yesterday", None) == "yesterday"
    assert dates.annotate("no time here", WEDNESDAY) == "no time here"


def test_time_expressions_are_recognised() -> None:
    assert dates.has_time_expression("Just got back two days ago")
    assert dates.has_time_expression("前天刚回来")
    assert dates.has_time_expression("released on 2024-03-01")
    assert not dates.has_time_expression("Kafka with replication factor 3")


def test_only_the_part_of_the_pool_above_its_typical_similarity_counts() -> None:
    similarity = {("s", i): 0.1 * i for i in range(1, 11)}
    old = hybrid.VECTOR_BASE
    try:
        hybrid.VECTOR_BASE = 0.5
        scaled = hybrid.above_typical(similarity)
    finally:
        hybrid.VECTOR_BASE = old
    assert scaled[("s", 10)] == 1.0
    assert set(scaled) == {("s", i) for i in range(6, 11)}
    assert all(0 < v <= 1 for v in scaled.values())
