"""A custom agent loop that keeps its memory in mcp-memory, no framework needed.

Run: python scripts/examples/agent_loop.py [--dsn DSN]   (default: the configured or embedded database)

The "model" here is a stub so the example runs offline; replace `think` with your LLM call (OpenAI,
DeepSeek, LangChain runnable, AutoGen agent …). The pattern stays the same: log every turn as it
happens, record decisions when they are made, and start each task with `remember`.
"""

from __future__ import annotations

import argparse

from mcp_memory import Memory


def think(prompt: str, history: str) -> str:
    """Stand-in for an LLM call: a real agent would send `history` + `prompt` to its model."""
    if "消息队列" in prompt:
        return "结论：在日订单量低于 10 万的阶段不需要引入消息队列。"
    return "Noted."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", help="PostgreSQL DSN (default: MCP_MEMORY_DSN, the config file, or embedded)")
    parser.add_argument("--project", default="example-shop")
    args = parser.parse_args()

    with Memory(args.dsn) as mem:
        # an earlier agent's session
        ctx = mem.session(args.project, title="订单模块架构评估", agent="planning-agent")
        task = "帮我评估订单模块是否要引入消息队列"
        ctx.log_user_message(task)
        ctx.log_tool_call("query_metrics", {"metric": "orders_peak_qps"}, {"peak_qps": 200})
        ctx.log_assistant_message(think(task, ""))
        ctx.add_decision("architecture", "订单模块暂不引入消息队列", status="accepted",
                         rationale="当前峰值 QPS 较低，消息队列会增加运维复杂度",
                         alternatives=[{"option": "Kafka", "why_not": "运维成本高"}])
        ctx.set_context("constraint", "接口响应时间必须低于 500ms")

        # a new agent, days later, starts from what was decided instead of from zero
        new = mem.session(args.project, title="订单高峰处理", agent="new-agent")
        question = "我们需要处理订单高峰吗？以前有没有讨论过消息队列？"
        history = new.remember(question)
        print(history or "(nothing relevant in the history)")
        new.log_user_message(question)
        new.log_assistant_message(think(question, history))


if __name__ == "__main__":
    main()
