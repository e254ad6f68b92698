"""mcp/threads.py: the stdio server's thread hops (results, errors, cancellation, a full pool)."""

from __future__ import annotations

import contextvars
import threading
import time

import anyio
import pytest

from mcp_memory.mcp.threads import Workers


def test_results_and_errors_reach_the_awaiting_task() -> None:
    workers = Workers("test-results", 2)

    async def main() -> None:
        assert await workers.run(lambda a, b: a + b, 2, 3) == 5
        assert await workers.run(threading.current_thread) is not threading.current_thread()
        with pytest.raises(ValueError, match="refused"):
            await workers.run(_raise, ValueError("refused"))

    anyio.run(main)


def _raise(exc: BaseException) -> None:
    raise exc


def test_a_full_pool_queues_the_rest_and_runs_everything() -> None:
    """Six blocking jobs on two threads: two at a time, all answered, no third thread."""
    workers = Workers("test-full", 2)
    running, most = 0, 0
    lock = threading.Lock()

    def job(i: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.05)
        with lock:
            running -= 1
        return i

    async def main() -> list[int]:
        results: list[int] = []

        async def one(i: int) -> None:
            results.append(await workers.run(job, i))

        async with anyio.create_task_group() as tasks:
            for i in range(6):
                tasks.start_soon(one, i)
        return results

    assert sorted(anyio.run(main)) == list(range(6))
    assert most == 2
    names = {t.name for t in threading.enumerate() if t.name.startswith("test-full")}
    assert len(names) == 2 and all(t.daemon for t in threading.enumerate() if t.name in names)


def test_cancelling_the_task_abandons_the_job_and_frees_the_thread_after() -> None:
    """A cancelled wait returns at once (while the job still runs); the thread finishes its job,
    drops the answer and serves the next job."""
    workers = Workers("test-cancel", 1)
    release, finished = threading.Event(), threading.Event()

    def job() -> None:
        release.wait(60)
        finished.set()

    async def main() -> bool:
        with anyio.move_on_after(0.1):
            await workers.run(job)
        returned_first = not finished.is_set()  # the wait did not wait for the job
        release.set()
        assert await workers.run(lambda: "next") == "next"
        return returned_first

    assert anyio.run(main)
    assert finished.is_set()  # the job was run to its end, not killed


def test_the_job_sees_the_callers_context_variables() -> None:
    workers = Workers("test-context", 1)
    name: contextvars.ContextVar[str] = contextvars.ContextVar("name")

    async def main() -> str:
        name.set("caller's")
        return await workers.run(name.get)

    assert anyio.run(main) == "caller's"
