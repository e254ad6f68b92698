"""Search latency at scale, and what indexing adds to an append.

Usage: python scripts/bench/search_bench.py [--messages 1000000] [--projects 20] [--queries 200] [--dsn DSN]

Generates mixed Chinese / English / code messages (Zipf-distributed vocabulary, sessions of 50
messages) and loads them with COPY straight into sessions, messages, message_search and the BM25
statistics (not through the MCP path), then measures, on the same server:

- search_messages p50/p95 with a project filter (the target: p95 ≤ 50 ms at 1M messages) and
  without one, next to the physical limit: a raw psycopg GIN query (`tsv @@ term`, project, LIMIT 10)
  and a `SELECT 1` round trip;
- append_message (what an agent waits for) next to a raw psycopg single-row INSERT + commit, and
  the index pass that follows it in its own transaction (core/indexer.py): one message, and per
  message in a burst.
Without --dsn a temporary embedded PostgreSQL is started (and stopped).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import tempfile
import time
import zlib
from collections import Counter
from dataclasses import replace

from psycopg.types.json import Jsonb
from search_quality import scratch_database  # same folder

from mcp_memory.config import load_settings
from mcp_memory.search.index import index_message
from mcp_memory.store.search_store import SHARDS
from mcp_memory.wiring import build

EN = ["order", "payment", "timeout", "queue", "cache", "retry", "invoice", "refund", "inventory", "coupon", "user", "account", "login", "token", "session", "database", "index", "query", "latency", "deploy", "rollback", "release", "build", "test", "flaky", "pipeline", "runner", "docker", "kubernetes", "service", "gateway", "proxy", "nginx", "certificate", "dns", "backup", "restore", "replica", "failover", "metric", "alert", "dashboard", "log", "trace", "span", "error", "warning", "exception", "stack", "config", "secret", "vault", "key", "rotate", "migrate", "schema", "column", "table", "row", "lock", "transaction", "commit", "isolation", "deadlock", "vacuum", "analyze", "partition", "shard", "tenant", "project", "team", "review", "merge", "branch", "commit", "feature", "flag", "rollout", "experiment", "model", "prompt", "embedding", "vector", "search", "ranking", "recall", "precision", "label", "dataset", "training", "inference", "gpu", "batch", "stream", "kafka", "rabbitmq", "redis", "postgres", "mongo", "elastic", "s3", "bucket", "upload", "image", "thumbnail", "resize", "email", "sms", "push", "notification", "webhook", "callback", "schedule", "cron", "job", "worker", "consumer", "producer", "topic", "offset", "partition", "lag", "throughput", "budget", "cost", "invoice", "tax", "currency", "price", "discount", "cart", "checkout", "shipping", "address", "carrier", "tracking", "warehouse", "stock", "reservation", "oversell", "promotion", "campaign", "banner", "analytics", "funnel", "conversion"]
ZH = ["订单", "支付", "超时", "队列", "缓存", "重试", "发票", "退款", "库存", "优惠", "用户", "账号", "登录", "令牌", "会话", "数据", "索引", "查询", "延迟", "发布", "回滚", "版本", "构建", "测试", "流水", "容器", "服务", "网关", "代理", "证书", "域名", "备份", "恢复", "副本", "切换", "指标", "告警", "看板", "日志", "链路", "错误", "异常", "配置", "密钥", "迁移", "字段", "事务", "提交", "隔离", "死锁", "分区", "分片", "租户", "项目", "团队", "评审", "合并", "分支", "功能", "开关", "灰度", "实验", "模型", "提示", "向量", "检索", "排序", "召回", "标注", "训练", "推理", "显卡", "批量", "消息", "推送", "回调", "定时", "任务", "消费", "生产", "主题", "积压", "吞吐", "预算", "成本", "税率", "价格", "折扣", "购物", "结算", "物流", "地址", "仓库", "预占", "超卖", "活动", "营销", "转化", "漏斗", "方案", "决定", "否决", "采纳", "讨论", "问题", "原因", "建议", "评估", "风险", "上线", "监控", "性能", "优化", "压测", "限流", "熔断"]
FILLER_ZH = ["我们", "这个", "需要", "可以", "因为", "所以", "但是", "如果", "已经", "现在", "之后", "然后"]
IDS = ["getUserName", "order_id", "retryCount", "HTTPTimeoutError", "payment_status", "maxUnavailable", "parseConfig",
       "cacheKey", "trace_id", "queueDepth", "refundAmount", "isExpired", "createdAt", "sessionToken", "batchSize"]


def zipf_choice(rng: random.Random, words: list[str]) -> str:
    return words[min(int(rng.paretovariate(1.1)) - 1, len(words) - 1)]


def sentence(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.45:
        return "，".join("".join(zipf_choice(rng, ZH) if rng.random() < 0.7 else rng.choice(FILLER_ZH)
                                 for _ in range(rng.randint(2, 5))) for _ in range(rng.randint(1, 4))) + "。"
    words = [zipf_choice(rng, EN) for _ in range(rng.randint(6, 30))]
    if kind > 0.8:
        words.insert(rng.randrange(len(words)), rng.choice(IDS))
        words.append(f"{rng.randint(1, 900)}ms")
    return " ".join(words) + "."


def generate(conn, *, messages: int, projects: int, seed: int = 1) -> None:
    """COPY sessions, messages, the search rows, the statistics and the watermarks the append path and
    the indexer would have made."""
    rng = random.Random(seed)
    per_session = 50
    df: Counter = Counter()
    docs: Counter = Counter()
    lengths: Counter = Counter()
    conn.execute("DROP INDEX message_search_tsv")
    base = 1_700_000_000.0
    with conn.cursor() as cur:
        sessions = []
        for s in range((messages + per_session - 1) // per_session):
            sessions.append((f"ses_{rng.getrandbits(128):032x}", f"p{s % projects:02d}"))
        with cur.copy("COPY sessions (session_id, project_id, agent_source, title, last_seq) FROM STDIN") as copy:
            for i, (sid, project) in enumerate(sessions):
                sid_fmt = f"ses_{sid[4:12]}-{sid[12:16]}-{sid[16:20]}-{sid[20:24]}-{sid[24:36]}"
                sessions[i] = (sid_fmt, project)
                copy.write_row((sid_fmt, project, rng.choice(["claude-code", "opencode", "codex"]), f"session {i}",
                                min(per_session, messages - i * per_session)))
        # every session started now: one month partition (migration 0021) holds all the rows
        month = conn.execute("SELECT part_month FROM sessions LIMIT 1").fetchone()[0]
        with cur.copy("COPY messages (session_id, seq, project_id, append_id, role, payload, payload_hash, created_at, "
                      "part_month) FROM STDIN") as mcopy:
            rows = []
            for n in range(messages):
                sid, project = sessions[n // per_session]
                seq = n % per_session + 1
                payload = {"role": "user" if seq % 2 else "assistant", "content": sentence(rng)}
                created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(base + n * 30))
                mcopy.write_row((sid, seq, project, f"a{n}", payload["role"], Jsonb(payload),
                                 hashlib.sha256(json.dumps(payload).encode()).digest(), created, month))
                doc = index_message(payload)
                shard = zlib.crc32(sid.encode()) % SHARDS
                df.update((project, term, shard) for term in doc.terms)
                docs[(project, shard)] += 1
                lengths[(project, shard)] += doc.length
                rows.append((sid, seq, project, payload["role"], created, doc.length, doc.tsv, month))
        with cur.copy("COPY message_search (session_id, seq, project_id, role, created_at, doc_len, tsv, part_month) "
                      "FROM STDIN") as scopy:
            for row in rows:
                scopy.write_row(row)
        with cur.copy("COPY search_term_stats (project_id, term, shard, df) FROM STDIN") as tcopy:
            for (project, term, shard), count in df.items():
                tcopy.write_row((project, term, shard, count))
        with cur.copy("COPY search_doc_stats (project_id, shard, docs, total_len) FROM STDIN") as dcopy:
            for (project, shard), count in docs.items():
                dcopy.write_row((project, shard, count, lengths[(project, shard)]))
        with cur.copy("COPY search_progress (session_id, project_id, indexed_seq, stored_seq) FROM STDIN") as pcopy:
            for i, (sid, project) in enumerate(sessions):
                last = min(per_session, messages - i * per_session)
                pcopy.write_row((sid, project, last, last))
    conn.execute("CREATE INDEX message_search_tsv ON message_search USING gin (tsv)")
    conn.commit()


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


def timed(fn, count: int) -> list[float]:
    out = []
    for i in range(count):
        start = time.perf_counter()
        fn(i)
        out.append((time.perf_counter() - start) * 1000)
    return out


def line(label: str, values: list[float], limit: float | None = None) -> str:
    p50, p95 = statistics.median(values), percentile(values, 0.95)
    ratio = f"   ×{p95 / limit:.1f} of the limit" if limit else ""
    return f"{label:<48} p50 {p50:7.2f} ms   p95 {p95:7.2f} ms{ratio}"


def bench_search(service, conn, *, projects: int, queries: int) -> None:
    rng = random.Random(2)
    asked = []
    for _ in range(queries):
        if rng.random() < 0.5:
            asked.append("".join(rng.choice(ZH[:60]) for _ in range(rng.randint(2, 4))) + "怎么处理")
        else:
            asked.append("what did we decide about " + " ".join(rng.choice(EN[:80]) for _ in range(rng.randint(2, 4))))
    projects_of = [f"p{rng.randrange(projects):02d}" for _ in asked]
    def one(i: int) -> object:
        return conn.execute("SELECT 1").fetchone()

    def raw(i: int) -> object:
        return conn.execute(
            "SELECT session_id, seq FROM message_search WHERE tsv @@ %s::tsquery AND project_id = %s LIMIT 10",
            (f"'{rng.choice(EN[:80])}'", projects_of[i]), prepare=False).fetchall()

    ref_one, ref_raw = timed(one, 200), timed(raw, queries)
    filtered = timed(lambda i: service.search_messages(asked[i], project_id=projects_of[i]), queries)
    unfiltered = timed(lambda i: service.search_messages(asked[i]), min(queries, 50))
    print(line("raw SELECT 1 round trip (limit)", ref_one))
    print(line("raw GIN query, one term, project, LIMIT 10 (limit)", ref_raw))
    print(line("search_messages, project filter", filtered, statistics.median(ref_raw)))
    print(line("search_messages, all projects", unfiltered, statistics.median(ref_raw)))


def bench_append(service, conn, *, count: int) -> None:
    """The append an agent waits for, and the index pass that follows it (core/indexer.py), timed
    apart: the background pass is switched off and run by hand."""
    rng = random.Random(3)
    sid = service.create_session("p00", {"title": "append bench"}).session_id
    bodies = [sentence(rng) + " " + sentence(rng) for _ in range(count * 3)]
    service.indexer.submit = lambda session_id: None
    tokenize = timed(lambda i: index_message({"role": "user", "content": bodies[i]}), count)
    append = timed(lambda i: service.append_message(sid, {"role": "user", "content": bodies[i]}), count)
    service.indexer.index_session(sid)

    def index_one(i: int) -> None:
        service.append_message(sid, {"role": "user", "content": bodies[count + i]})
        start = time.perf_counter()
        service.indexer.index_session(sid)
        passes.append((time.perf_counter() - start) * 1000)

    passes: list[float] = []
    for i in range(count):
        index_one(i)
    burst = service.create_session("p00", {"title": "burst"}).session_id
    service.append_messages(burst, [{"role": "user", "content": body} for body in bodies[2 * count:]])
    start = time.perf_counter()
    service.indexer.index_session(burst)
    per_message_in_burst = (time.perf_counter() - start) * 1000 / count
    # a regular table: a temporary one writes no WAL, so its commit would not wait for a flush
    conn.execute("CREATE TABLE bench_raw_insert (session_id text, seq bigint, payload jsonb, PRIMARY KEY (session_id, seq))")
    conn.commit()

    def raw(i: int) -> None:
        conn.execute("INSERT INTO bench_raw_insert VALUES (%s, %s, %s)", (sid, i, Jsonb({"content": bodies[i]})))
        conn.commit()

    try:
        ref = timed(raw, count)
    finally:
        conn.execute("DROP TABLE bench_raw_insert")
        conn.commit()
    print(line("raw INSERT + commit (limit)", ref))
    print(line("append_message (what the agent waits for)", append, statistics.median(ref)))
    print(line("tokenizing one message (Python)", tokenize))
    print(line("index pass of one message (after the append)", passes))
    print(f"index pass per message, {count} appended at once:   {per_message_in_burst:7.2f} ms")
    print(f"tokenizing / index pass of one message (median):  {statistics.median(tokenize) / statistics.median(passes):6.1%}")
    print("indexing inside the append the agent waits for:      0 (it follows in its own transaction)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--projects", type=int, default=20)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--appends", type=int, default=300)
    parser.add_argument("--dsn")
    args = parser.parse_args()
    with scratch_database(args.dsn, keep=False) as dsn:
        settings = replace(load_settings(dsn=dsn, environ={"MCP_MEMORY_HOME": tempfile.gettempdir()}), pool_max=2)
        service = build(settings)
        conn = service.db.connect()
        try:
            start = time.perf_counter()
            generate(conn, messages=args.messages, projects=args.projects)
            conn.execute("ANALYZE")
            conn.commit()
            size = conn.execute("SELECT pg_size_pretty(pg_total_relation_size('message_search'))").fetchone()[0]
            version = conn.execute("SHOW server_version").fetchone()[0]
            print(f"PostgreSQL {version}; {args.messages:,} messages in {args.projects} projects loaded in "
                  f"{time.perf_counter() - start:.0f} s; message_search {size}")
            bench_search(service, conn, projects=args.projects, queries=args.queries)
            bench_append(service, conn, count=args.appends)
        finally:
            conn.close()
            service.db.close()


if __name__ == "__main__":
    main()
