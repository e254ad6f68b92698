"""Time in questions and messages (mcp_memory/search/dates.py), and the hybrid calibration pieces
of retrieval/vectors.py, without a database."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from mcp_memory.retrieval import vectors
from mcp_memory.retrieval.tuning import DEFAULT
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
    scaled = vectors.above_typical(similarity, frozenset(), replace(DEFAULT, vector_base=0.5))
    assert scaled[("s", 10)] == 1.0
    assert set(scaled) == {("s", i) for i in range(6, 11)}
    assert all(0 < v <= 1 for v in scaled.values())


def test_each_script_is_measured_against_its_own_typical_similarity() -> None:
    """A Chinese question: its CJK neighbours are all near (0.60–0.69), the English turns farther
    (0.30–0.39) but for one English answer at 0.45 that stands far out of them. Measured against
    the pool's typical similarity (0.45) it does not count; against the English turns' own (0.35)
    it does, above the nearest CJK turn, which barely stands out of the CJK turns (0.64). The scale
    is the pool's (0.69 − 0.45). Too few turns of a script: the pool's typical similarity."""
    zh = {("zh", i): 0.60 + 0.01 * i for i in range(10)}
    en = {("en", i): 0.30 + 0.01 * i for i in range(10)}
    answer = ("en", 99)
    similarity = {**zh, **en, answer: 0.45}
    cjk = frozenset(zh)
    assert answer not in vectors.above_typical(similarity, frozenset(), DEFAULT)  # no script given: the pool's base
    scaled = vectors.above_typical(similarity, cjk, DEFAULT)
    assert scaled[answer] == pytest.approx(0.10 / 0.24) and scaled[("zh", 9)] == pytest.approx(0.05 / 0.24)
    assert ("en", 4) not in scaled and ("en", 6) in scaled  # each group: only what is above its typical
    few = {key: value for key, value in similarity.items() if key[0] == "zh" or key in {answer, ("en", 0)}}
    assert vectors.above_typical(few, cjk, DEFAULT) == vectors.above_typical(few, frozenset(), DEFAULT)
    one_base = replace(DEFAULT, per_script_base=False)
    assert vectors.above_typical(similarity, cjk, one_base) == vectors.above_typical(similarity, frozenset(), one_base)


def test_relative_periods_count_from_the_time_of_the_question() -> None:
    from mcp_memory.search.when import relative_window

    asked = datetime(2025, 6, 11, 15, 0, tzinfo=UTC)  # a Wednesday
    day = lambda *ymd: datetime(*ymd, tzinfo=UTC)  # noqa: E731
    last_month = relative_window("What caused the flaky tests last month?", asked)
    assert last_month is not None and (last_month.since, last_month.until) == (day(2025, 5, 1), day(2025, 6, 1))
    assert relative_window("上个月结账测试为什么失败？", asked) == last_month
    last_week = relative_window("what broke last week", asked)
    assert last_week is not None and (last_week.since, last_week.until) == (day(2025, 6, 2), day(2025, 6, 9))
    assert relative_window("上周发生了什么", asked) == last_week
    january = relative_window("what went wrong last month", day(2025, 1, 20))
    assert january is not None and january.since == day(2024, 12, 1)  # across the year
    yesterday = relative_window("昨天的部署", asked)
    assert yesterday is not None and yesterday.holds(day(2025, 6, 10, 23)) and not yesterday.holds(asked)
    ago = relative_window("the outage 3 days ago", asked)
    assert ago is not None and ago.holds(day(2025, 6, 8, 12)) and not ago.holds(day(2025, 6, 1))
    recent = relative_window("最近两周的告警", asked)
    assert recent is not None and recent.since == day(2025, 5, 28)
    assert relative_window("How do we deploy the invoice service?", asked) is None
    assert relative_window("上个3月", asked) is None


def test_anchor_clauses_name_an_event_and_a_side() -> None:
    from mcp_memory.search.when import anchor_clause, around

    before = anchor_clause("Before the migration, how did we store user sessions?")
    assert before is not None and (before.direction, before.event) == ("before", "migration")
    assert before.rest == "how did we store user sessions?"
    after = anchor_clause("迁移之后，备份是怎么做的？")
    assert after is not None and (after.direction, after.event, after.rest) == ("after", "迁移", "备份是怎么做的？")
    since = anchor_clause("what changed since the Kafka rollout?")
    assert since is not None and (since.direction, since.event) == ("after", "Kafka rollout")
    assert anchor_clause("3天前的告警") is None and anchor_clause("what happened 2 weeks before?") is None
    assert anchor_clause("然后，我们做了什么") is None  # 然后 is "then", not "after 然"
    assert anchor_clause("How do we deploy?") is None
    assert anchor_clause("How long are feature flags kept before reloading?") is None  # no event, a habit
    assert anchor_clause("retry since it is slow") is None
    moment = datetime(2025, 3, 22, 21, 0, tzinfo=UTC)
    assert around(before, moment).holds(datetime(2025, 3, 1, tzinfo=UTC))
    assert not around(before, moment).holds(datetime(2025, 4, 1, tzinfo=UTC))
    assert around(after, moment).holds(datetime(2025, 4, 1, tzinfo=UTC))


def test_dates_a_message_names() -> None:
    from mcp_memory.search.when import dates_in

    written = datetime(2025, 1, 10, tzinfo=UTC)
    assert dates_in("rolled back on 2024-12-30", written) == [datetime(2024, 12, 30, tzinfo=UTC)]
    assert dates_in("从 12月30日起每晚死锁", written) == [datetime(2024, 12, 30, tzinfo=UTC)]  # the last such day
    assert dates_in("since January 3rd", written) == [datetime(2025, 1, 3, tzinfo=UTC)]
    assert dates_in("2025-02-30 is no day, 13月1日 neither", written) == []


def test_names_inside_chinese_text_are_bridge_names() -> None:
    from mcp_memory.search.names import names_in

    assert names_in("新的发票服务以后就叫 Ledgerly，用来替换原来的脚本") == ["Ledgerly"]
    assert names_in("发票服务叫Ledgerly") == ["Ledgerly"]
    assert names_in("We adopted a beagle. Biscuit is his name, says Maya") == ["Maya"]


def test_periods_and_events_rank_the_turn_of_their_window_first(service) -> None:
    sid = service.create_session("timed", {"title": "checkout"}).session_id
    service.append_messages(sid, [
        {"role": "user", "content": "The checkout tests broke again: checkout tests fail on a shared fixture.",
         "created_at": "2025-01-10T08:00:00Z"},
        {"role": "user", "content": "User sessions are stored in Memcached with a 12 hour expiry.",
         "created_at": "2025-01-12T08:00:00Z"},
        {"role": "user", "content": "The database migration plan needs a rollback step.",
         "created_at": "2025-01-20T08:00:00Z"},
        {"role": "user", "content": "We finished the migration to PostgreSQL tonight.",
         "created_at": "2025-02-15T08:00:00Z"},
        {"role": "user", "content": "The checkout tests broke: a race in the cart cache.",
         "created_at": "2025-03-05T08:00:00Z"},
        {"role": "user", "content": "User sessions are stored in a PostgreSQL table now.",
         "created_at": "2025-03-06T08:00:00Z"},
    ])

    def first(query: str, **kw) -> int:
        return service.search_messages(query, project_id="timed", mode="fts", hits_only=True, **kw).matches[0].seq

    assert first("why did the checkout tests break?", now="2025-04-10T00:00:00Z") == 1  # more of its words
    assert first("why did the checkout tests break last month?", now="2025-04-10T00:00:00Z") == 5
    assert first("上个月 checkout tests 为什么坏了", now="2025-04-10T00:00:00Z") == 5
    assert first("why did the checkout tests break last month?", now="2025-02-03T00:00:00Z") == 1
    assert first("Before the migration, how did we store user sessions?") == 2
    assert first("After the migration, how did we store user sessions?") == 6


def test_an_event_named_in_the_other_language_is_found_through_its_translation(service) -> None:
    """"发布之后" anchors on an English session's "release" (发布 → release, search/crosslang.py): the
    window starts at the turn saying it happened. Without the translation the event is not found and
    no window lifts the later turn."""
    sid = service.create_session("timed", {"title": "sessions"}).session_id
    service.append_messages(sid, [
        {"role": "user", "content": "User sessions are stored in Memcached with a 12 hour expiry.",
         "created_at": "2025-01-12T08:00:00Z"},
        {"role": "user", "content": "The release plan needs a rollback step.", "created_at": "2025-01-20T08:00:00Z"},
        {"role": "user", "content": "We finished the release to production tonight.", "created_at": "2025-02-15T08:00:00Z"},
        {"role": "user", "content": "User sessions are stored in a PostgreSQL table now.",
         "created_at": "2025-03-06T08:00:00Z"},
    ])

    def scores(query: str) -> dict[int, float]:
        return {m.seq: m.score for m in service.search_messages(query, project_id="timed", mode="fts",
                                                                hits_only=True).matches}

    after, before = scores("发布之后 user sessions 存在哪里？"), scores("发布之前 user sessions 存在哪里？")
    assert max(after, key=after.__getitem__) == 4 and after[4] > 1.5 * after[1]  # the window doubles it
    assert max(before, key=before.__getitem__) == 1
    service.tuning = replace(DEFAULT, cross_weight=0.0)
    unanchored = scores("发布之后 user sessions 存在哪里？")
    assert unanchored[4] < 1.1 * unanchored[1]  # no window: only recency separates the two
