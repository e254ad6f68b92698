"""The library API: Memory + session context objects on the same core."""

from __future__ import annotations

import subprocess
import sys

from mcp_memory import Memory


def test_agent_loop_logs_and_remembers(settings) -> None:
    with Memory(settings=settings) as mem:
        ctx = mem.session("shop", title="订单模块架构评估", agent="planning-agent")
        assert ctx.log_user_message("帮我评估订单模块是否要引入消息队列") == 1
        assert ctx.log_assistant_message("结论：日订单量低于 10 万时不需要引入消息队列", thinking="QPS 200") == 2
        assert ctx.log_tool_call("query_metrics", {"metric": "orders_qps"}, {"p95": 200}) == (3, 4)
        decision = ctx.add_decision("architecture", "订单模块暂不引入消息队列", rationale="峰值 QPS 较低")
        assert decision.version == 1
        assert ctx.set_context("constraint", "接口响应时间必须低于 500ms") == 1
        assert ctx.get_context().context == {"constraint": "接口响应时间必须低于 500ms"}
        block = ctx.remember("订单要不要上消息队列？")
        assert "[已采纳]" in block and "订单模块暂不引入消息队列" in block
        page = ctx.read()
        assert [m.role for m in page.messages] == ["user", "assistant", "assistant", "tool", "assistant"]
        assert page.messages[2].tool_calls[0].function.name == "query_metrics"
        again = mem.session(session_id=ctx.session_id)
        assert again.project_id == "shop" and again.log_user_message("继续", append_id="u-6") == 6
        assert again.log_user_message("继续", append_id="u-6") == 6  # a retry with its append_id is safe
        assert mem.search("消息队列", project_id="shop").matches
        assert mem.search_decisions(status="accepted").decisions[0].decision_id == decision.decision_id


def test_import_stays_light() -> None:
    code = "import sys, mcp_memory; print('mcp_memory.library' in sys.modules, 'psycopg' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False False"


def test_library_reads_like_the_tool(settings) -> None:
    with Memory(settings=settings) as mem:
        ctx = mem.session("lib", title="t")
        ctx.log_user_message("hi", metadata={"native": {"line": 1}, "model": "m"})
        assert ctx.read().messages[0].metadata == {"model": "m"}
        assert ctx.read(include_native=True).messages[0].metadata["native"] == {"line": 1}
        assert ctx.read(after_seq=1, wait_seconds=0.2).messages == []
        assert mem.search("hi", project_id="lib", limit=1).matches[0].seq == 1
