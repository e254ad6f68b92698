"""Review pages benchmark: the first page (100 messages) of a 10,000-message session at /ui, over
real HTTP (uvicorn on loopback, signed in with a read-only token), against a raw psycopg SELECT of
the same 100 rows measured in the same run on the same server.

    python scripts/bench/ui_bench.py                 # embedded server in a temporary profile
    python scripts/bench/ui_bench.py --dsn postgresql://owner@…/db  [--json]

Target (issue: a 10,000-message session stays fast): first page ≤ 300 ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

import psycopg
import uvicorn
from bench_server import bench_server

from mcp_memory.config import load_settings
from mcp_memory.http.app import HttpOptions, create_app
from mcp_memory.http.auth import TokenRegistry
from mcp_memory.security import tokens
from mcp_memory.wiring import build

MESSAGES = 10_000
RUNS = 30


def _message(i: int) -> dict:
    if i % 4 == 0:
        return {"role": "user", "content": f"Turn {i}: can you check **orders.py** line {i} and [the docs](https://example.org/{i})?"}
    if i % 4 == 1:
        return {"role": "assistant", "content": None, "thinking": {"content": f"I should read the file ({i})."},
                "tool_calls": [{"id": f"call_{i}", "type": "function",
                                "function": {"name": "read", "arguments": json.dumps({"path": "orders.py", "line": i})}}]}
    if i % 4 == 2:
        return {"role": "tool", "tool_call_id": f"call_{i - 1}", "content": "def place_order(...):\n    ...\n" * 8}
    return {"role": "assistant", "content": f"Line {i} is fine.\n\n- one\n- two\n\n```python\nprint({i})\n```"}


def _median_ms(run, n: int) -> float:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        run()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


class Server:
    def __init__(self, app) -> None:
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error", lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        while not self.server.started:
            time.sleep(0.02)
        return f"http://127.0.0.1:{self.server.servers[0].sockets[0].getsockname()[1]}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        return None


def _sign_in(base: str, token: str) -> str:
    """The session cookie the sign-in form sets for `token` (the cookie never holds the token)."""
    data = urllib.parse.urlencode({"token": token}).encode()
    request = urllib.request.Request(f"{base}/ui/sign-in", data=data, headers={"Origin": base})
    try:
        urllib.request.build_opener(_NoRedirect).open(request, timeout=30)
    except urllib.error.HTTPError as redirect:
        with redirect:
            return str(redirect.headers["set-cookie"]).split(";")[0]
    raise RuntimeError("the sign-in form set no cookie")


def run(dsn: str, env: dict[str, str]) -> dict[str, float]:
    settings = load_settings(dsn=dsn, environ=env)
    owner = build(settings)
    project = f"bench-{uuid.uuid4().hex[:6]}"
    sid = owner.create_session(project, {"title": "10k-message session", "agent_source": "claude-code"}).session_id
    for start in range(0, MESSAGES, 1000):
        owner.append_messages(sid, [_message(i) for i in range(start, start + 1000)])
    created = tokens.create(owner.db, name=f"ui_bench_{uuid.uuid4().hex[:6]}", projects=[project], read_only=True)
    registry = TokenRegistry(settings, owner.db.dsn(), lambda s: build(s, application_name="mcp-memory ui-bench"))
    try:
        with Server(create_app(registry, HttpOptions(rate_limit=0))) as base:
            cookie = _sign_in(base, created.token)

            def page(after: int = 0) -> None:
                request = urllib.request.Request(f"{base}/ui/sessions/{sid}?after_seq={after}",
                                                 headers={"Cookie": cookie})
                with urllib.request.urlopen(request, timeout=30) as reply:
                    assert reply.status == 200 and f'id="seq-{after + 100}"' in reply.read().decode()

            for _ in range(3):
                page()
            first = _median_ms(page, RUNS)
            last = _median_ms(lambda: page(MESSAGES - 100), RUNS)
        with psycopg.connect(owner.db.dsn()) as conn:
            def raw() -> None:
                rows = conn.execute("SELECT seq, role, payload, created_at FROM messages WHERE session_id = %s "
                                    "AND seq > 0 ORDER BY seq LIMIT 100", (sid,)).fetchall()
                assert len(rows) == 100
            raw()
            select = _median_ms(raw, RUNS)
    finally:
        registry.close()
        tokens.revoke(owner.db, created.role)
        owner.db.close()
    return {"first_page_ms": first, "last_page_ms": last, "raw_select_ms": select,
            "ratio_first_vs_raw": first / select, "target_ms": 300.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", help="owner DSN of the server to measure (default: a temporary embedded server)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with bench_server(args.dsn) as (dsn, _, env):
        results = run(dsn, env)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"first page of a {MESSAGES}-message session: {results['first_page_ms']:.1f} ms "
          f"(target ≤ {results['target_ms']:.0f} ms); last page {results['last_page_ms']:.1f} ms; "
          f"raw SELECT of the same 100 rows {results['raw_select_ms']:.2f} ms; "
          f"ratio {results['ratio_first_vs_raw']:.1f}×")


if __name__ == "__main__":
    main()
