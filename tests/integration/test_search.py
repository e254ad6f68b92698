"""search_messages on real PostgreSQL: CJK words, natural-language questions, syntax, filters,
fork lineage, synonyms, batch indexing, determinism, hostile input, and the MCP tool."""

from __future__ import annotations

from dataclasses import replace

import pytest
from mcp import Client

from mcp_memory.errors import Invalid, NotFound
from mcp_memory.mcp.server import build_server
from mcp_memory.retrieval.tuning import DEFAULT
from mcp_memory.wiring import build


def _session(service, project="shop", agent="claude-code", title="订单模块架构评估"):
    return service.create_session(project, {"title": title, "agent_source": agent}).session_id


@pytest.fixture
def shop(service):
    sid = _session(service)
    service.append_messages(sid, [
        {"role": "user", "content": "订单模块峰值 QPS 只有 200，要不要引入消息队列？", "created_at": "2025-02-10T08:00:00Z"},
        {"role": "assistant", "content": "建议暂时不引入，优先优化数据库索引和接口缓存。", "created_at": "2025-02-10T08:01:00Z"},
        {"role": "user", "content": "What timeout should the payment API use?", "created_at": "2025-03-01T09:00:00Z"},
        {"role": "assistant", "content": "Use 30 seconds; retries go through the worker.", "created_at": "2025-03-01T09:01:00Z"},
        {"role": "user", "content": "支付接口超时设成 30 秒", "created_at": "2025-03-02T09:00:00Z"},
    ])
    other = _session(service, project="blog", agent="opencode", title="blog")
    service.append_message(other, {"role": "user", "content": "消息队列 for the blog comments? 超时 too"})
    return sid, other


def keys(result):
    return [(m.session_id, m.seq) for m in result.matches]


def test_two_character_chinese_words_are_found(service, shop) -> None:
    sid, _ = shop
    assert keys(service.search_messages("超时", project_id="shop"))[0] == (sid, 5)
    found = service.search_messages("订单", project_id="shop").matches
    assert found[0].seq == 1 and "**订单**" in found[0].snippet
    assert found[0].session_title == "订单模块架构评估" and found[0].role == "user"


def test_natural_language_question_ranks_the_answering_turns(service, shop) -> None:
    sid, _ = shop
    found = keys(service.search_messages("订单模块要不要上消息队列", project_id="shop", limit=3))
    assert found[0] == (sid, 1) and (sid, 2) in found  # the reply is found through its neighbour
    english = keys(service.search_messages("what did we decide about the payment timeout?", project_id="shop"))
    assert english[0] == (sid, 3)
    assert service.search_messages("the of and what", project_id="shop").matches == []  # stop words only


def test_filters_project_agent_role_session_time(service, shop) -> None:
    sid, other = shop
    assert {k[0] for k in keys(service.search_messages("消息队列"))} == {sid, other}
    assert keys(service.search_messages("消息队列", agent_source="opencode")) == [(other, 1)]
    assert {m.role for m in service.search_messages("timeout 超时 payment", role="assistant").matches} == {"assistant"}
    assert {k[0] for k in keys(service.search_messages("消息队列", session_id=other))} == {other}
    timed = service.search_messages("timeout 超时", project_id="shop", since="2025-03-02", until="2025-03-03")
    assert keys(timed) == [(sid, 5)]
    with pytest.raises(Invalid):
        service.search_messages("x", since="yesterday-ish")
    with pytest.raises(NotFound):
        service.search_messages("x", session_id="ses_00000000-0000-0000-0000-000000000000")


def test_phrases_and_exclusions(service, shop) -> None:
    sid, other = shop
    assert keys(service.search_messages('"payment API"')) == [(sid, 3)]
    assert keys(service.search_messages('"API payment"')) == []
    assert (other, 1) not in keys(service.search_messages("消息队列 -blog"))
    assert keys(service.search_messages("“消息队列” -blog")) == [(sid, 1)]


def test_synonyms_apply_both_ways(service, shop) -> None:
    sid, _ = shop
    assert service.search_messages("MQ", project_id="shop").matches == []
    service.add_synonyms(["消息队列", "MQ"])
    assert keys(service.search_messages("MQ", project_id="shop"))[0] == (sid, 1)
    service.append_message(sid, {"role": "assistant", "content": "we may add an MQ later"})
    assert (sid, 6) in keys(service.search_messages("消息队列", project_id="shop"))
    assert service.list_synonyms() == [["mq", "消息队列"]]
    service.add_synonyms(["MQ", "message queue"])
    assert service.list_synonyms() == [["message queue", "mq", "消息队列"]]
    assert service.remove_synonyms(["mq"]) == ["mq"]


def test_fork_history_is_found_once_and_attributed_to_its_origin(service, shop) -> None:
    sid, _ = shop
    snap = service.create_snapshot(sid, "before handover")
    fork = service.load_snapshot(snap.snapshot_id, {"agent_source": "opencode"}).session_id
    service.append_message(fork, {"role": "user", "content": "订单超时 in the fork"})
    everything = keys(service.search_messages("订单", project_id="shop", limit=50))
    assert everything.count((sid, 1)) == 1 and (fork, 6) in everything
    in_fork = keys(service.search_messages("订单", session_id=fork, limit=50))
    assert (sid, 1) in in_fork and (fork, 6) in in_fork
    assert keys(service.search_messages("订单 fork", session_id=sid, limit=50)).count((fork, 6)) == 0


def test_batches_tool_calls_and_reindex(service) -> None:
    sid = _session(service)
    service.append_messages(sid, [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "getUserName", "arguments": "{\"order_id\": 7}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "alice"},
    ])
    assert keys(service.search_messages("user name"))[0] == (sid, 1)
    assert keys(service.search_messages("order_id"))[0] == (sid, 1)
    assert service.reindex_search() == 0  # the watermark says nothing is missing

    def stats() -> list[tuple]:
        with service.db.transaction() as conn:
            return conn.execute("SELECT (SELECT array_agg((term, df) ORDER BY term, shard) FROM search_term_stats),"
                                " (SELECT array_agg((docs, total_len)) FROM search_doc_stats)").fetchall()

    before = stats()
    assert service.reindex_search(full=True) == 2  # a rebuild replaces rows and statistics, never doubles them
    assert stats() == before
    assert keys(service.search_messages("order_id"))[0] == (sid, 1)


def test_index_left_behind_by_a_dead_process_is_caught_up(service, settings) -> None:
    """A process that died between its append and its indexing pass leaves its watermark behind:
    the next search of the project (from any process) indexes those messages first."""
    sid = _session(service)
    other = build(settings)
    other.indexer.submit = lambda session_id: None  # it dies right after its append commits
    try:
        other.append_messages(sid, [{"role": "user", "content": "the kafka consumer lag alarm"}])
        assert service.indexer.flush() == 0  # nothing of this process is queued
        assert keys(service.search_messages("kafka lag", project_id="shop")) == [(sid, 1)]
        with service.db.transaction() as conn:
            assert conn.execute("SELECT indexed_seq, stored_seq FROM search_progress WHERE session_id = %s",
                                (sid,)).fetchone() == (1, 1)
    finally:
        other.db.close()


def test_same_query_same_order_and_hostile_input(service) -> None:
    sid = _session(service)
    service.append_messages(sid, [{"role": "user", "content": f"cache note {i}", "created_at": "2025-01-01T00:00:00Z"}
                                  for i in range(12)])
    first = keys(service.search_messages("cache", limit=12))
    assert first == keys(service.search_messages("cache", limit=12)) and len(first) == 12
    for hostile in ["%", "_", "\\", "a:* & !b", "<->", "()", "'"]:
        assert service.search_messages(hostile).matches == []
    assert service.search_messages("' OR 1=1 --").matches[0].seq == 2  # just the word "1"
    with pytest.raises(Invalid):
        service.search_messages("  ")
    with pytest.raises(Invalid):
        service.search_messages("x", limit=0)


@pytest.mark.anyio
async def test_search_messages_over_mcp(service, shop) -> None:
    sid, _ = shop
    async with Client(build_server(lambda: service), mode="legacy") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert tools["search_messages"].annotations.read_only_hint is True
        result = await client.call_tool("search_messages", {"query": "超时", "project_id": "shop", "limit": 2})
        match = result.structured_content["matches"][0]
        assert (match["session_id"], match["seq"]) == (sid, 5)
        assert {"snippet", "created_at", "session_title", "score", "role"} <= set(match)
        # across languages (search/crosslang.py): 超时 → "timeout" finds the English turn, highlighted
        crossed = await client.call_tool("search_messages", {"query": "超时", "project_id": "shop", "hits_only": True})
        found = {(m["session_id"], m["seq"]): m["why"] for m in crossed.structured_content["matches"]}
        assert found.get((sid, 3)) == "terms" and found.get((sid, 5)) == "terms"
        english = next(m for m in crossed.structured_content["matches"] if m["seq"] == 3)
        assert "**timeout**" in english["snippet"]
        bad = await client.call_tool("search_messages", {"query": "x", "since": "soon"})
        assert bad.is_error and bad.content[0].text.startswith("[invalid] since")


def test_dates_rank_and_show(service) -> None:
    sid = _session(service, project="life", title="diary")
    service.append_messages(sid, [
        {"role": "user", "content": "I signed up for a pottery class at the community centre.",
         "created_at": "2024-03-04T18:00:00Z"},
        {"role": "user", "content": "The pottery teacher liked my blue teapot.", "created_at": "2024-04-15T18:00:00Z"},
        {"role": "user", "content": "The pottery exhibition is on Saturday, I show three pieces.",
         "created_at": "2024-05-20T18:00:00Z"},
        {"role": "user", "content": "Yesterday we adopted a beagle from the shelter, after weeks of visits.",
         "created_at": "2024-06-05T18:00:00Z"},
        {"role": "user", "content": "The beagle we adopted from the shelter loves carrots.",
         "created_at": "2024-06-30T18:00:00Z"},
    ])
    in_may = service.search_messages("what did I say about pottery in May?", project_id="life").matches
    assert (in_may[0].seq, in_may[0].created_at[:7]) == (3, "2024-05")
    assert service.search_messages("陶艺 pottery 四月", project_id="life").matches[0].seq == 2
    when = service.search_messages("when did we adopt the beagle from the shelter?", project_id="life").matches
    assert when[0].seq == 4
    assert "Yesterday (2024-06-04)" in when[0].snippet
    assert "Saturday (2024-05-18)" in in_may[0].snippet


def test_names_in_the_best_turns_bridge_to_the_turn_that_answers(service) -> None:
    """Multi-hop: the question names the storyline, the answering turn only the name an earlier
    turn introduced. With the bridge the answering turn is found; without it, nothing leads to it."""

    first, later = _session(service, project="home"), _session(service, project="home")
    service.append_messages(first, [
        {"role": "user", "content": "Yesterday we adopted a beagle from the shelter and named him Biscuit."},
        {"role": "assistant", "content": "Congratulations on the new companion!"},
    ])
    service.append_messages(later, [
        {"role": "user", "content": "The weather turned cold again."},
        {"role": "user", "content": "Biscuit ruined two pairs of shoes this week."},
    ])
    question = "What trouble did the shelter beagle cause?"
    assert (later, 2) in keys(service.search_messages(question, project_id="home", mode="fts"))
    service.tuning = replace(DEFAULT, hop_share=0.0)
    assert (later, 2) not in keys(service.search_messages(question, project_id="home", mode="fts"))


def test_names_are_capitalised_words_inside_a_sentence() -> None:
    from mcp_memory.search.names import names_in

    text = "Big news: we named him Biscuit. Then Tom, Maya and Mary Jane came. Pepper ate it. 我们叫它豆包"
    assert names_in(text) == ["Biscuit", "Tom", "Maya", "Mary", "Jane"]


def test_a_rare_name_in_any_strong_hit_leads_a_second_hop_to_the_turn_that_answers(service) -> None:
    """Multi-hop where the turn giving the name is not among the best two word hits (the component
    is named in much shorter chatter): the second hop reads every strong hit for rare names, searches
    them, and interleaves what it finds; without it the answering turn is not found at all."""
    chatter, later = _session(service, project="ops"), _session(service, project="ops")
    service.append_messages(chatter, [
        {"role": "user", "content": "The tests for the invoice service pass."},
        {"role": "user", "content": "Who reviews the invoice service changes?"},
        {"role": "user", "content": "The invoice service dashboard needs a latency panel."},
        {"role": "user", "content": "Let's call the new invoice service Ledgerly from now on, it replaces the old cron "
                                    "script that ran every night on the billing host."},
        {"role": "user", "content": "Sessions and backups are on the agenda for Thursday."},
        {"role": "user", "content": "Thursday we also look at the invoice service runbook."},
    ])
    service.append_messages(later, [
        {"role": "user", "content": "The weather turned cold again."},
        {"role": "user", "content": "Ledgerly times out on every PDF export above 40 pages."},
    ])
    question = "What problem did the invoice service have?"
    found = service.search_messages(question, project_id="ops", mode="fts", limit=5)
    assert (later, 2) in keys(found)
    assert next(m for m in found.matches if (m.session_id, m.seq) == (later, 2)).why == "names"
    service.tuning = replace(DEFAULT, hop_share=0.0)
    assert (later, 2) not in keys(service.search_messages(question, project_id="ops", mode="fts", limit=5))



def test_the_second_hop_crosses_languages_through_a_latin_name(service) -> None:
    """A Chinese question, the name given in a Chinese turn, the answer written in English: the Latin
    name inside the Chinese text is the bridge (no vectors needed)."""
    chatter, later = _session(service, project="ops"), _session(service, project="ops")
    service.append_messages(chatter, [
        {"role": "user", "content": "发票服务的测试在我本地是通过的。"},
        {"role": "user", "content": "这周谁来评审发票服务的改动？"},
        {"role": "user", "content": "发票服务的监控面板需要加一个延迟图。"},
        {"role": "user", "content": "新的发票服务以后就叫 Ledgerly，用来替换原来的 cron 脚本，每晚在账单主机上运行。"},
    ])
    service.append_messages(later, [
        {"role": "user", "content": "The weather turned cold again."},
        {"role": "user", "content": "Ledgerly times out on every PDF export above 40 pages."},
    ])
    question = "发票服务出了什么问题？"
    assert (later, 2) in keys(service.search_messages(question, project_id="ops", mode="fts", limit=5))
    service.tuning = replace(DEFAULT, hop_share=0.0)
    assert (later, 2) not in keys(service.search_messages(question, project_id="ops", mode="fts", limit=5))


def test_words_cross_languages_through_the_dictionary(service) -> None:
    """An English question, the name given in a Chinese turn, the answer in English: the question's
    words translated (search/crosslang.py) find the Chinese turn, whose Latin name then leads to the
    answer. Only translations that the project's memory holds join the query."""
    chatter, later = _session(service, project="ops"), _session(service, project="ops")
    service.append_messages(chatter, [
        {"role": "user", "content": "The login page needs a new logo."},
        {"role": "user", "content": "Who reviews the proxy settings this week?"},
        {"role": "user", "content": "新的登录代理以后就叫 Cobalt，用来替换原来的 cron 脚本。"},
    ])
    service.append_messages(later, [
        {"role": "user", "content": "The weather turned cold again."},
        {"role": "user", "content": "Cobalt returns stale prices for up to an hour."},
    ])
    question = "What problem did the login proxy have?"
    found = keys(service.search_messages(question, project_id="ops", mode="fts", limit=5, hits_only=True))
    assert (chatter, 3) in found and (later, 2) in found
    english = keys(service.search_messages("登录代理出了什么问题？", project_id="ops", mode="fts", limit=5, hits_only=True))
    assert (chatter, 1) in english and (chatter, 2) in english  # and back: 登录 → log in/login, 代理 → proxy
    service.tuning = replace(DEFAULT, cross_weight=0.0)
    assert (later, 2) not in keys(service.search_messages(question, project_id="ops", mode="fts", limit=5, hits_only=True))
    assert (chatter, 1) not in keys(service.search_messages("登录代理出了什么问题？", project_id="ops", mode="fts",
                                                            limit=5, hits_only=True))


def test_the_reply_to_a_user_turn_worded_like_the_question_ranks_close_after_it(service) -> None:
    """A question is worded like the user turn that once asked it; the reply holds none of its
    words. `replies` (retrieval/order.py) lifts the assistant turn after each of the best user turns to answer_share of
    that turn's score; with it off, the symmetric neighbour credit leaves the reply below turns that
    merely share a word or two."""
    asked = _session(service, project="kb")
    service.append_messages(asked, [
        {"role": "user", "content": "Which embedding model for the knowledge base? It is half Chinese."},
        {"role": "assistant", "content": "bge-m3: multilingual, 1024 dimensions, runs on CPU for our volume."},
        {"role": "user", "content": "Take it."},
    ])
    for text in ["The knowledge base search page times out.", "Which base image for the model server?",
                 "The embedding job ran twice last night.", "The embedding model cache lives in the temp folder."]:
        service.append_message(_session(service, project="kb"), {"role": "user", "content": text})
    question = "which embedding model did we choose for the knowledge base"

    def rank_of_reply(**options) -> int | None:
        found = keys(service.search_messages(question, project_id="kb", mode="fts", limit=6, **options))
        return found.index((asked, 2)) if (asked, 2) in found else None

    assert keys(service.search_messages(question, project_id="kb", mode="fts", limit=1)) == [(asked, 1)]
    assert rank_of_reply() == 1  # right after the turn that asked
    reply = service.search_messages(question, project_id="kb", mode="fts", limit=2).matches[1]
    assert (reply.why, reply.context_of) == ("context", 1)
    assert rank_of_reply(hits_only=True) is None  # a reply lifted this way is context, not a hit
    only_replies = service.search_messages(question, project_id="kb", mode="fts", role="assistant").matches
    assert [(m.seq, m.score) for m in only_replies] == [(2, reply.score)]  # lifted under a role filter too
    assert rank_of_reply(role="user") is None
    service.tuning = replace(DEFAULT, answer_share=0.0)
    assert (rank_of_reply() or 99) > 1
