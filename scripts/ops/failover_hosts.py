#!/usr/bin/env python3
"""The host processes of the failover drill (failover_drill.py starts them): each is a real
mcp-memory core (Service, built from the environment like any host: MCP_MEMORY_DSN with every node
of the formation, target_session_attrs=read-write) that works until SIGTERM and writes one JSON
line per event to its log (flushed at once, so the drill reads what happened up to a kill):

  append SESSION PREFIX  appends continuously with append_ids PREFIX-0, PREFIX-1, …; an append
                         whose call failed with Unavailable is retried with the same append_id
                         until it returns (an acknowledged append is one that returned):
                         {"ack": append_id, "seq", "duplicate", "retries", "t"}, {"retry": append_id, "error", "t"}
  tail SESSION           a live tail: read_session(after_seq, wait_seconds) in a loop, reading on after
                         each failure: {"seen": seq, "t"}, {"retry": "tail", "error", "t"}

Anything else than Unavailable (a conflict on a retried append_id above all) is logged as
{"fatal": error} and ends the process with status 1.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from typing import IO, Any

from mcp_memory.core.service import Service
from mcp_memory.errors import McpMemoryError, Unavailable
from mcp_memory.wiring import build

RETRY_PAUSE = 0.1
TAIL_WAIT = 20.0


class Log:
    def __init__(self, out: IO[str]) -> None:
        self.out = out

    def write(self, **fields: Any) -> None:
        self.out.write(json.dumps({**fields, "t": time.time()}) + "\n")
        self.out.flush()


def append_loop(service: Service, session_id: str, prefix: str, log: Log, stop: threading.Event,
                pause: float) -> None:
    n = 0
    while not stop.is_set():
        append_id = f"{prefix}-{n}"
        message = {"role": "user", "content": f"{prefix} message {n}", "append_id": append_id}
        retries = 0
        while True:
            try:
                result = service.append_message(session_id, message)
            except Unavailable as exc:
                retries += 1
                log.write(retry=append_id, error=str(exc)[:200])
                if stop.wait(RETRY_PAUSE):
                    return  # stopped while retrying: this append was never acknowledged
                continue
            log.write(ack=append_id, seq=result.seq, duplicate=result.duplicate, retries=retries)
            break
        n += 1
        if pause:
            stop.wait(pause)


def tail_loop(service: Service, session_id: str, log: Log, stop: threading.Event) -> None:
    after = 0
    while not stop.is_set():
        try:
            page = service.read_session(session_id, after_seq=after, limit=200, wait_seconds=TAIL_WAIT)
        except Unavailable as exc:
            log.write(retry="tail", error=str(exc)[:200])
            stop.wait(RETRY_PAUSE)
            continue
        except McpMemoryError as exc:  # the drill reads it from the log and fails
            log.write(fatal=f"{type(exc).__name__}: {exc}")
            return
        for message in page.messages:
            log.write(seen=message.seq)
            after = max(after, message.seq)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["append", "tail"])
    parser.add_argument("session_id")
    parser.add_argument("prefix", nargs="?", default="")
    parser.add_argument("--pause", type=float, default=0.0, help="seconds between two appends")
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    log = Log(sys.stdout)
    service = build(application_name=f"failover-drill-{args.mode}")
    try:
        if args.mode == "append":
            append_loop(service, args.session_id, args.prefix, log, stop, args.pause)
        else:
            # the tail's read blocks up to TAIL_WAIT: it runs in a thread, the process leaves on SIGTERM
            worker = threading.Thread(target=tail_loop, args=(service, args.session_id, log, stop), daemon=True)
            worker.start()
            while worker.is_alive() and not stop.wait(0.2):
                pass
    except McpMemoryError as exc:
        log.write(fatal=f"{type(exc).__name__}: {exc}")
        return 1
    finally:
        if args.mode == "append":
            service.db.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
