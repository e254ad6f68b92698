"""The search pieces without a database: tokenizer, stemmer, query syntax, ranking, snippets."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from mcp_memory.search import ranking
from mcp_memory.search.index import index_text
from mcp_memory.search.query import like_pattern, match_tsquery, parse, phrase_tsquery
from mcp_memory.search.snippet import shorten, snippet
from mcp_memory.search.stem import stem
from mcp_memory.search.text import payload_text
from mcp_memory.search.tokenizer import tokenize


def terms(text: str) -> list[str]:
    return [t.term for t in tokenize(text)]


def test_cjk_gives_unigrams_and_bigrams_without_function_words() -> None:
    found = terms("订单超时了")
    assert {"订单", "单超", "超时", "订", "单", "超", "时"} <= set(found)
    assert "了" not in found and "时了" in found  # a stop character alone is dropped, not its pairs
    assert "我们" not in terms("我们")  # both characters are function words


def test_identifiers_numbers_and_stop_words() -> None:
    assert terms("getUserName") == ["getusername", "get", "user", "name"]
    assert terms("order_id HTTPServerError") == ["order_id", "order", "id", "httpservererror", "http", "server", "error"]
    assert terms("timeout 500ms") == ["timeout", "500ms", "500", "ms"]
    assert terms("What did we decide about the queue?") == ["decid", "queue"]


def test_stop_words_keep_positions_for_phrases() -> None:
    tokens = tokenize("limit of the queue")
    assert [(t.term, t.position) for t in tokens] == [("limit", 1), ("queue", 4)]


def test_stemming_merges_inflections() -> None:
    assert stem("orders") == stem("order")
    assert stem("decided") == stem("decide") == stem("deciding")
    assert stem("queued") == stem("queues") == stem("queue")
    assert stem("caching") == stem("cached") == stem("cache")
    assert stem("status") == "status" and stem("analysis") == "analysis"


def test_index_text_is_a_tsvector_literal_with_positions() -> None:
    doc = index_text("It's a queue, a queue!")
    assert doc.tsv == "'queue':4,6"
    assert doc.length == 2 and doc.terms == frozenset({"queue"})
    assert index_text("").tsv == ""


def test_payload_text_reads_content_parts_tool_calls_and_thinking() -> None:
    payload = {"content": [{"type": "text", "text": "hello"}, {"type": "image_url", "image_url": {"url": "x"}}],
               "tool_calls": [{"id": "1", "type": "function", "function": {"name": "grep", "arguments": "{\"q\": 1}"}}],
               "thinking": {"content": "hmm", "encrypted": False}}
    assert payload_text(payload) == 'hello\ngrep {"q": 1}\nhmm'
    assert payload_text({"thinking": {"content": "opaque", "encrypted": True}}) == ""


def test_query_syntax_phrases_exclusions_or() -> None:
    parsed = parse('cache OR "message queue" -kafka -"dead letter"')
    assert set(parsed.terms) == {"cach", "messag", "queue"}
    assert [t.term for t in parsed.phrases[0]] == ["messag", "queue"]
    assert [[t.term for t in g] for g in parsed.excluded] == [["kafka"], ["dead", "letter"]]
    query = match_tsquery(parsed, ["cach"])
    assert query == "('cach') & ('messag' <-> 'queue') & !('kafka') & !('dead' <-> 'letter')"


def test_cjk_phrase_uses_bigrams_and_unigrams_weigh_less() -> None:
    parsed = parse("“消息队列”")
    assert phrase_tsquery(parsed.phrases[0]) == "('消息' <-> '息队' <-> '队列')"
    assert parsed.terms["消息"] == 1.0 and parsed.terms["消"] < 0.5
    assert parse("超").terms == {"超": 1.0}


def test_synonyms_expand_both_ways() -> None:
    groups = [["mq", "消息队列"]]
    assert "消息" in parse("要不要上MQ", groups).terms
    assert "mq" in parse("订单要不要上消息队列", groups).terms
    assert "mq" not in parse("订单", groups).terms


def test_user_input_cannot_break_the_tsquery_or_like() -> None:
    parsed = parse("it's 100% o'clock \\ & | ! <-> :*")
    query = match_tsquery(parsed, sorted(parsed.terms))
    assert query is not None and "'clock'" in query
    assert like_pattern("50%_a\\b") == "%50\\%\\_a\\\\b%"


def test_bm25_weights_and_selective_candidates() -> None:
    stats = ranking.TermStats(docs=10_000, total_len=100_000, df={"rare": 3, "common": 9_000})
    weights = ranking.term_weights({"rare": 1.0, "common": 1.0, "absent": 1.0}, stats)
    assert set(weights) == {"rare", "common"} and weights["rare"] > 5 * weights["common"]
    assert ranking.matching_terms(weights, stats, selective_df=1000) == ["rare"]
    only_common = ranking.term_weights({"common": 1.0}, stats)
    assert ranking.matching_terms(only_common, stats, selective_df=1000) == ["common"]


def test_neighbours_count_half_and_order_is_deterministic() -> None:
    scores = ranking.with_neighbours({("s", 5): 2.0, ("s", 1): 1.0}, 0.5)
    assert scores[("s", 4)] == 1.0 and scores[("s", 6)] == 1.0 and scores[("s", 2)] == 0.5
    assert ("s", 0) not in scores
    now = datetime(2026, 1, 1, tzinfo=UTC)
    items = [(("b", 1), 1.0, now), (("a", 1), 1.0, now), (("c", 1), 1.0, now - timedelta(days=300))]
    assert [k for k, _ in ranking.final_order(items, weight=0.05, days=90.0)] == [("a", 1), ("b", 1), ("c", 1)]
    # recency never beats a clearly better text score
    items = [(("old", 1), 1.2, now - timedelta(days=900)), (("new", 1), 1.0, now)]
    assert ranking.final_order(items, weight=0.05, days=90.0)[0][0] == ("old", 1)


def test_snippet_highlights_cjk_and_keeps_the_best_window() -> None:
    text = "前言。" * 100 + "订单接口的超时时间改为 30 秒。" + "后记。" * 100
    result = snippet(text, parse("超时").terms)
    assert "**超时**时间" in result and result.startswith("…") and result.endswith("…")
    assert len(result.replace("**", "")) <= 202
    assert snippet("plain text", {"absent": 1.0}) == "plain text"
    assert shorten("a  b\nc" + "x" * 300, 20) == "a b cxxxxxxxxxxxxxx…"


@pytest.mark.parametrize("text", [
    "getUserName returned 500ms timeout in order_service.py",
    "订单模块要不要上消息队列？We decided against Kafka for now — 超时 500ms.",
    "The the a of, XMLHttpRequest v2 HTTP2 __init__ x y 1 22 ü naïve café",
    "",
    "word " * 20000,
])
def test_index_fast_path_matches_the_tokenizer(text: str) -> None:
    from mcp_memory.search.tokenizer import iter_terms, iter_tokens

    assert list(iter_terms(text)) == [(t.term, t.position) for t in iter_tokens(text)]


def test_highlights_do_not_nest_in_text_that_holds_asterisks() -> None:
    from mcp_memory.search.snippet import snippet

    text = "we keep the **ledger** in a *single* database"
    out = snippet(text, {"ledger": 1.0})
    assert "****" not in out
    assert out == "we keep the \\*\\***ledger**\\*\\* in a \\*single\\* database"
    assert snippet("no *match* here", {"zzz": 1.0}) == "no \\*match\\* here"
