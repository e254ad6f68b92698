"""The lineage graph: the tree of forks and relays around a session, laid out in rows (depth first)
and drawn as inline SVG on the server (no script). Every text goes through escape()."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from markupsafe import Markup, escape

COLUMN = 56  # px of indent per depth (an elbow from the parent's lower left corner)
ROW = 70  # px between nodes
BOX_W, BOX_H = 250, 46
PAD = 10


@dataclass
class Node:
    session_id: str
    parent_session_id: str | None
    agent: str
    title: str
    depth: int
    row: int
    hop: str  # root | fork | relay
    fork_seq: int | None
    last_seq: int
    current: bool


def nodes(rows: list[dict[str, Any]], current: str, titles: dict[str, str] | None = None) -> list[Node]:
    """`titles`: the title shown for each session (ui/titles.py: every hop distinct)."""
    titles = titles or {}
    seen = {r["session_id"] for r in rows}
    found = []
    for i, r in enumerate(rows):
        parent = r["parent_session_id"] if r["parent_session_id"] in seen else None
        hop = "root" if parent is None else ("relay" if r["relayed_from"] else "fork")
        found.append(Node(session_id=r["session_id"], parent_session_id=parent, agent=r["agent_source"] or "unknown",
                          title=titles.get(r["session_id"]) or r["title"] or r["session_id"], depth=r["depth"], row=i, hop=hop,
                          fork_seq=r["fork_seq"], last_seq=r["last_seq"], current=r["session_id"] == current))
    return found


def _edge(parent: Node, child: Node) -> str:
    x1, y1 = PAD + parent.depth * COLUMN + 24, PAD + parent.row * ROW + BOX_H
    x2, y2 = PAD + child.depth * COLUMN, PAD + child.row * ROW + BOX_H // 2
    label = f"{child.hop} at seq {child.fork_seq}" if child.fork_seq is not None else child.hop
    return (f'<path class="edge {child.hop}" d="M{x1},{y1} V{y2} H{x2}"/>'
            f'<text class="edge-label" x="{x2 + 4}" y="{y2 - BOX_H // 2 - 5}">{escape(label)}</text>')


def _box(node: Node) -> str:
    x, y = PAD + node.depth * COLUMN, PAD + node.row * ROW
    css = "node current" if node.current else "node"
    href = f"/ui/sessions/{escape(node.session_id)}/lineage"
    return (f'<a href="{href}"><g class="{css} agent-{escape(node.agent)}">'
            f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="6"/>'
            f'<text class="agent" x="{x + 8}" y="{y + 18}">{escape(node.agent)} · {node.last_seq} msgs</text>'
            f'<text class="title" x="{x + 8}" y="{y + 36}">{escape(_short(node.title))}</text></g></a>')


def _short(title: str, width: int = 34) -> str:
    """A title cut to fit the box, keeping its end: the hop ("— codex (hop 2)") tells hops apart."""
    if len(title) <= width:
        return title
    head, sep, hop = title.rpartition(" — ")
    if sep and len(hop) < width - 6:
        return f"{head[:width - len(hop) - 4]}… — {hop}"
    return title[:width - 1] + "…"


def svg(graph: list[Node]) -> Markup:
    if not graph:
        return Markup("")
    by_id = {n.session_id: n for n in graph}
    width = 2 * PAD + max(n.depth for n in graph) * COLUMN + BOX_W
    height = 2 * PAD + len(graph) * ROW
    edges = [_edge(by_id[n.parent_session_id], n) for n in graph if n.parent_session_id in by_id]
    boxes = [_box(n) for n in graph]
    body = "".join(edges + boxes)
    return Markup(  # numbers and escaped text only
        f'<svg class="lineage" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="lineage graph">{body}</svg>')
