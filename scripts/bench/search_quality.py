"""Search quality: recall@1/5/10 and MRR per part, per category and overall, at turn level.

Usage:
    python scripts/bench/search_quality.py [DATASET …] [--mode fts|semantic|hybrid|recall|all] [--dsn DSN]
        [--embedder local|openai] [--model NAME] [--json] [--misses]

DATASET defaults to the public set `chitchat` (real conversations of the Chit-Chat corpus, shipped by
the PyPI package chitchat-dataset, `pip install -e ".[bench]"`; the questions are generated from a seed by
scripts/bench/data/make_chitchat_qa.py) and the three bundled sets: scripts/bench/data/memory_qa.json (agent sessions about
projects), scripts/bench/data/life_qa.json (long multi-session conversations, one session per
day) and scripts/bench/data/project_qa.json (engineering projects over months, sessions in English
or Chinese, relative-time and before/after-an-event questions). Every question belongs to a part by a fixed rule on its conversation id (`part_of`): `tuning`
or `held-out`. Weights and thresholds of the ranking are chosen on the tuning part only; the
held-out part is what the README reports. Without --dsn a temporary embedded PostgreSQL
is started (and stopped). With --dsn the role must be allowed to CREATE DATABASE: the run imports
into a new database and drops it afterwards (--keep to look at it).

Modes: `fts` ranks messages with search_messages (the full-text search of README, design note 6);
`recall` ranks the turns behind the recall block's items (decisions count by the turn they cite).
`semantic` and `hybrid` rank with search_messages(mode=…) after `embed_pending` with the embedder
(`local`: --model, one of SHIPPED_MODELS in mcp_memory/embeddings/providers.py, offline: the default
use-multilingual-v3 of the extra local-embeddings, all-MiniLM-L6-v2 (local-embeddings-minilm) or
multilingual-e5-small-q4 (local-embeddings-e5); `openai`: the [embeddings] section of the config file); the embedding time and throughput are reported. `all` runs every mode on one import
(embedding once).

Dataset format (JSON, UTF-8):
    {"name", "version", "description",
     "synonyms": [["消息队列", "MQ", …], …],                       # optional, applied before the run
     "conversations": [{"id", "project", "agent",
                        "sessions": [{"id", "title",
                                      "turns": [{"id", "role", "content", "date" (RFC 3339)}, …],
                                      "decisions": [{"id", "type", "summary", "status", "rationale"?,
                                                     "turn" (turn id)?, "supersedes" (decision id)?}, …]}]}],
     "questions": [{"id", "question", "project"?, "category", "answer_turns": [turn id, …],
                    "asked_at"? (RFC 3339: the `now` that "last month" counts from),
                    "evidence_turns"? (all turns the answer needs; informative),
                    "conversation"? (else the conversation of its first answer turn)}, …]}
A question is answered at rank r when the r-th ranked turn is one of its answer_turns. Turns are
imported through the normal append path (append_messages with append_id = turn id).
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import os
import statistics
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

from mcp_memory.config import load_settings
from mcp_memory.core import sessions
from mcp_memory.core.service import Service
from mcp_memory.embeddings.providers import DEFAULT_LOCAL_MODEL, SHIPPED_MODELS
from mcp_memory.errors import Invalid
from mcp_memory.memory_results import SearchMode
from mcp_memory.retrieval.tuning import DEFAULT, Tuning, with_settings
from mcp_memory.store import embedded, migrate
from mcp_memory.wiring import build

DATA = Path(__file__).with_name("data")
DEFAULTS = [Path("chitchat"), DATA / "memory_qa.json", DATA / "life_qa.json", DATA / "project_qa.json"]
PARTS = ("tuning", "held-out")
KS = (1, 5, 10)
Key = tuple[str, int]


@contextmanager
def scratch_database(dsn: str | None, keep: bool) -> Iterator[str]:
    """A new migrated database on the given server (or on a temporary embedded one)."""
    with tempfile.TemporaryDirectory(prefix="mm-quality-") as home:
        server = dsn
        if server is None:
            Path(home).chmod(0o755)
            server = embedded.ensure_running(Path(home) / "pg", allow_root=True)
        name = f"mm_quality_{uuid.uuid4().hex[:10]}"
        admin = make_conninfo(server, dbname="postgres")
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        target = make_conninfo(server, dbname=name)
        migrate.migrate(target)
        try:
            yield target
        finally:
            if not keep:
                with psycopg.connect(admin, autocommit=True) as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            if dsn is None:
                embedded.stop(Path(home) / "pg")


def load(service: Service, data: dict) -> dict[Key, str]:
    """Import every conversation; returns (session_id, seq) → turn id. Each session's id is derived
    from its id in the dataset (`fixed_session_ids`): ranking ties fall by session id, and random
    ids would make two runs of the same code differ by a question or two."""
    turn_of: dict[Key, str] = {}
    key_of: dict[str, Key] = {}
    decision_ids: dict[str, str] = {}
    for group in data.get("synonyms", []):
        service.add_synonyms(group)
    for conv in data["conversations"]:
        for session in conv["sessions"]:
            with fixed_session_ids(f"{data.get('name')}/{session['id']}"):
                sid = service.create_session(conv["project"], {"title": session.get("title"),
                                                              "agent_source": conv.get("agent")}).session_id
            messages = [{"append_id": t["id"], "role": t["role"], "content": t["content"], "created_at": t["date"]}
                        for t in session["turns"]]
            seqs = service.append_messages(sid, messages).seqs
            for turn, seq in zip(session["turns"], seqs, strict=True):
                turn_of[(sid, seq)] = turn["id"]
                key_of[turn["id"]] = (sid, seq)
            for d in session.get("decisions", []):
                cited = key_of[d["turn"]][1] if d.get("turn") else None
                made = service.record_decision(
                    sid, d["type"], d["summary"], status=d.get("status", "accepted"), rationale=d.get("rationale"),
                    message_seq=cited, supersedes=decision_ids.get(d.get("supersedes", "")))
                decision_ids[d["id"]] = made.decision_id
    return turn_of


@contextmanager
def fixed_session_ids(name: str) -> Iterator[None]:
    """New sessions get the id uuid5(name) instead of a random one, while this lasts."""
    original = sessions.new_session_id
    sessions.new_session_id = lambda: f"{sessions.SESSION_ID_PREFIX}{uuid.uuid5(uuid.NAMESPACE_URL, name)}"
    try:
        yield
    finally:
        sessions.new_session_id = original


def _ranker(mode: SearchMode) -> Callable[[Service, dict, int], list[Key]]:
    def rank(service: Service, question: dict, limit: int) -> list[Key]:
        found = service.search_messages(question["question"], project_id=question.get("project"), limit=limit,
                                        mode=mode, **asked(service.search_messages, question))
        if found.mode != mode:
            raise SystemExit(f"{mode} search did not run: {found.note}")
        return [(m.session_id, m.seq) for m in found.matches]
    return rank


def asked(method: Callable[..., Any], question: dict) -> dict[str, Any]:
    """The question's `asked_at` as the `now` that relative periods ("last month") count from,
    when the code under test takes one (older versions do not: they are measured without it)."""
    if "asked_at" not in question or "now" not in inspect.signature(method).parameters:
        return {}
    return {"now": question["asked_at"]}


rank_fts = _ranker("fts")


def rank_recall(service: Service, question: dict, limit: int) -> list[Key]:
    found = service.recall(question["question"], project_id=question.get("project"), limit=min(limit, 20),
                           **asked(service.recall, question))
    ranked: list[Key] = []
    for item in found.items:
        if item.seq is not None and (item.session_id, item.seq) not in ranked:
            ranked.append((item.session_id, item.seq))
    return ranked


RANKERS: dict[str, Callable[[Service, dict, int], list[Key]]] = {
    "fts": rank_fts, "semantic": _ranker("semantic"), "hybrid": _ranker("hybrid"), "recall": rank_recall}
SEMANTIC = {"semantic", "hybrid"}


def embed_all(service: Service, embedder: str, model: str) -> dict[str, Any]:
    """Attach the embedder and embed every imported message; the time and rate of this run."""
    if embedder == "local":
        from mcp_memory.embeddings.providers import LocalProvider

        service.embedder = LocalProvider(model)
    if service.embedder is None:
        raise SystemExit("no embedder: pip install 'mcp-memory[local-embeddings]' or configure [embeddings]")
    start = time.perf_counter()
    _ = service.embedder.dim  # loads a local model: its load time is reported apart
    load_s = time.perf_counter() - start
    start = time.perf_counter()
    count = service.embed_pending()
    seconds = time.perf_counter() - start
    return {"model": service.embedder.name, "load_s": round(load_s, 2), "messages": count,
            "embed_s": round(seconds, 2), "messages_per_s": round(count / seconds, 1) if seconds else 0.0}


def part_of(conversation_id: str) -> str:
    """The fixed split: the first byte of the SHA-256 of the conversation id, even → tuning."""
    return PARTS[hashlib.sha256(conversation_id.encode()).digest()[0] % 2]


def conversation_of(data: dict) -> dict[str, str]:
    """question id → conversation id (given, else the conversation of its first answer turn)."""
    owner = {t["id"]: conv["id"] for conv in data["conversations"] for s in conv["sessions"] for t in s["turns"]}
    return {q["id"]: q.get("conversation") or owner[q["answer_turns"][0]] for q in data["questions"]}


def evaluate(service: Service, data: dict, turn_of: dict[Key, str], mode: str) -> tuple[dict, list[dict], list[float]]:
    """{part: {category: metrics}} (part ALL: both), the misses and the query latencies."""
    ranker = RANKERS[mode]
    owner = conversation_of(data)
    per: dict[str, dict[str, list[int | None]]] = defaultdict(lambda: defaultdict(list))
    misses, latencies = [], []
    for question in data["questions"]:
        start = time.perf_counter()
        ranked = [turn_of.get(key) for key in ranker(service, question, max(KS))]
        latencies.append((time.perf_counter() - start) * 1000)
        answers = set(question["answer_turns"])
        rank = next((i + 1 for i, turn in enumerate(ranked) if turn in answers), None)
        part = part_of(owner[question["id"]])
        for name in (part, "ALL"):
            per[name][question["category"]].append(rank)
            per[name]["ALL"].append(rank)
        if rank is None or rank > 5:
            misses.append({"id": question["id"], "part": part, "question": question["question"], "rank": rank,
                           "answers": sorted(answers), "got": ranked[:5]})
    report = {part: {category: metrics(ranks) for category, ranks in sorted(per[part].items(),
                                                                          key=lambda kv: (kv[0] == "ALL", kv[0]))}
              for part in (*PARTS, "ALL") if part in per}
    return report, misses, latencies


def metrics(ranks: list[int | None]) -> dict[str, float]:
    n = len(ranks)
    result: dict[str, float] = {"n": n}
    for k in KS:
        result[f"recall@{k}"] = round(sum(1 for r in ranks if r is not None and r <= k) / n, 3)
    result["mrr"] = round(sum(1 / r for r in ranks if r is not None) / n, 3)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", nargs="*", type=Path, default=DEFAULTS)
    parser.add_argument("--mode", default="fts", type=modes_of,
                        help="fts, semantic, hybrid, recall, all, or a comma-separated list (default fts)")
    parser.add_argument("--embedder", choices=["local", "openai"], default="local",
                        help="semantic/hybrid: the local model, or the [embeddings] section of the config")
    parser.add_argument("--model", default=DEFAULT_LOCAL_MODEL,
                        help=f"the local model (default {DEFAULT_LOCAL_MODEL}; shipped: {', '.join(SHIPPED_MODELS)})")
    parser.add_argument("--dsn", help="a server where this role may create databases (default: temporary embedded)")
    parser.add_argument("--json", action="store_true", help="print one JSON document per run (JSON lines)")
    parser.add_argument("--misses", action="store_true", help="list questions not answered in the top 5")
    parser.add_argument("--keep", action="store_true", help="keep the scratch database")
    parser.add_argument("--sweep", action="append", default=[], metavar="FIELD=V1,V2",
                        help="re-run every mode with each value of a field of the ranking's Tuning "
                             "(mcp_memory/retrieval/tuning.py), e.g. hop_share=0,1 (choose on the tuning part only)")
    parser.add_argument("--markdown", type=Path, help="also write the held-out and tuning tables to this file")
    parser.add_argument("--sweep-mode", action="append", default=[], metavar="MODE",
                        help="with --sweep: only these modes run with every setting, the others once")
    args = parser.parse_args()
    results = []
    for path in args.dataset:
        results += run_dataset(args, dataset(path))
    if args.markdown:
        args.markdown.write_text(markdown(results), encoding="utf-8")


def dataset(path: Path) -> dict:
    """A dataset file, or `chitchat`: the public set generated from the chitchat-dataset wheel
    (data/make_chitchat_qa.py)."""
    if str(path) == "chitchat":
        import importlib.util

        spec = importlib.util.spec_from_file_location("make_chitchat_qa", DATA / "make_chitchat_qa.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.build()
    return json.loads(path.read_text(encoding="utf-8"))


def markdown(results: list[dict]) -> str:
    """One table per dataset × mode × setting: per part and category, recall@5/10, MRR, latency."""
    lines = ["# Search quality (written by scripts/bench/search_quality.py --markdown)", "",
             "Split: by SHA-256 of the conversation id (`part_of`), fixed before tuning. "
             "Numbers are recall@5 / recall@10 / MRR.", ""]
    for r in results:
        setting = ", ".join(f"{k}={v}" for k, v in r["setting"].items()) or "default tuning"
        lines += [f"## {r['dataset']} · {r['mode']} · {setting}", "",
                  f"{r['questions']} questions over {r['turns']} turns; query latency p50 {r['query_ms_p50']} ms, "
                  f"p95 {r['query_ms_p95']} ms.", "", "| part | category | n | R@5 | R@10 | MRR |",
                  "|---|---|---|---|---|---|"]
        for part, categories in r["parts"].items():
            lines += [f"| {part} | {c} | {m['n']} | {m['recall@5']:.3f} | {m['recall@10']:.3f} | {m['mrr']:.3f} |"
                      for c, m in categories.items()]
        lines.append("")
    return "\n".join(lines)


def modes_of(text: str) -> list[str]:
    modes = sorted(RANKERS) if text == "all" else text.split(",")
    unknown = [m for m in modes if m not in RANKERS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown mode {unknown[0]}: choose from {', '.join(sorted(RANKERS))}, all")
    return modes


def settings_of(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every combination of the --sweep values ([{}] without sweeps)."""
    combos: list[dict[str, Any]] = [{}]
    for item in args.sweep:
        name, _, values = item.partition("=")
        combos = [{**c, name: json.loads(v)} for c in combos for v in values.split(",")]
    return combos


def tuning_of(setting: dict[str, Any]) -> Tuning:
    """The default Tuning with the setting's fields replaced (a new value; nothing is patched)."""
    try:
        return with_settings(DEFAULT, setting)
    except Invalid as exc:
        raise SystemExit(f"--sweep: {exc}") from None


def run_dataset(args: argparse.Namespace, data: dict) -> list[dict]:
    """Import the dataset, embed it when a mode needs vectors, and evaluate every mode × setting."""
    with scratch_database(args.dsn, args.keep) as dsn:
        environ = {"MCP_MEMORY_HOME": tempfile.gettempdir()}
        if args.embedder == "openai":
            environ = dict(os.environ)
        settings = replace(load_settings(dsn=dsn, environ=environ), pool_max=4)
        service = build(settings)
        modes = args.mode
        results = []
        try:
            start = time.perf_counter()
            turn_of = load(service, data)
            load_s = time.perf_counter() - start
            embedding = embed_all(service, args.embedder, args.model) if SEMANTIC & set(modes) else None
            for n, setting in enumerate(settings_of(args)):
                service.tuning = tuning_of(setting)
                for mode in modes:
                    if n and args.sweep_mode and mode not in args.sweep_mode:
                        continue
                    report, misses, latencies = evaluate(service, data, turn_of, mode)
                    summary = _summary(data, turn_of, mode, load_s, embedding, report, latencies, setting)
                    if args.misses:
                        summary["misses"] = misses
                    results.append(summary)
                    if args.json:
                        print(json.dumps(summary, ensure_ascii=False), flush=True)
                    else:
                        _print(summary, misses if args.misses else [])
        finally:
            service.db.close()
    return results


def _summary(data: dict, turn_of: dict, mode: str, load_s: float, embedding: dict | None, report: dict,
             latencies: list[float], setting: dict[str, Any]) -> dict[str, Any]:
    return {"dataset": data.get("name"), "mode": mode, "setting": setting, "turns": len(turn_of),
            "questions": len(data["questions"]), "import_s": round(load_s, 2), "embedding": embedding,
            "query_ms_p50": round(statistics.median(latencies), 1),
            "query_ms_p95": round(sorted(latencies)[int(len(latencies) * 0.95) - 1], 1),
            "parts": report}


def _print(summary: dict[str, Any], misses: list[dict]) -> None:
    setting = " ".join(f"{k}={v}" for k, v in summary["setting"].items())
    print(f"{summary['dataset']}  mode={summary['mode']}  {setting}  turns={summary['turns']}  "
          f"questions={summary['questions']}  import {summary['import_s']} s  query p50 {summary['query_ms_p50']} ms  "
          f"p95 {summary['query_ms_p95']} ms")
    embedding = summary["embedding"]
    if embedding:
        print(f"embedding: {embedding['model']} (loaded in {embedding['load_s']} s) {embedding['messages']} messages "
              f"in {embedding['embed_s']} s = {embedding['messages_per_s']} messages/s (one vector per message)")
    print(f"{'part':<10}{'category':<16}{'n':>5}" + "".join(f"{'R@' + str(k):>8}" for k in KS) + f"{'MRR':>8}")
    for part, categories in summary["parts"].items():
        for category, m in categories.items():
            print(f"{part:<10}{category:<16}{m['n']:>5}" + "".join(f"{m[f'recall@{k}']:>8.3f}" for k in KS)
                  + f"{m['mrr']:>8.3f}")
    for miss in misses:
        print(f"  miss [{miss['part']}] {miss['id']} rank={miss['rank']}: {miss['question']}  "
              f"answers={miss['answers']} got={miss['got']}")


if __name__ == "__main__":
    main()
