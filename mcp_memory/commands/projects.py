"""Where captured sessions go: `projects show|map|unmap` (core/projects.py) and the capture spool
(`spool list|deliver|drop`, spool.py): what waits, why, and delivering it once the cause is fixed."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tomlkit

from ..config import Settings, edited_config
from ..errors import Invalid, NotFound
from .output import print_json, service

if TYPE_CHECKING:  # the core is imported when a command runs: `serve` parses its arguments without it
    from ..core.capture import Captured
    from ..spool import Spool


def add_parsers(sub: argparse._SubParsersAction) -> None:
    group = sub.add_parser("projects", help="which project a folder's captured sessions go to; map a folder",
                           description="Example: mcp-memory projects map ~/code/shop-api shop")
    actions = group.add_subparsers(dest="projects_command", metavar="ACTION", required=True)
    show = actions.add_parser("show", help="the project of a folder, and the rule that chose it")
    show.add_argument("folder", nargs="?", help="default: the current folder")
    show.add_argument("--json", action="store_true")
    mapping = actions.add_parser("map", help="send a folder's sessions to PROJECT ([projects] in the config "
                                             "file), then deliver what waits in the spool")
    mapping.add_argument("folder", help="a folder (its sub-folders follow it)")
    mapping.add_argument("project")
    mapping.add_argument("--json", action="store_true")
    unmap = actions.add_parser("unmap", help="remove a folder's line from [projects]")
    unmap.add_argument("folder")
    unmap.add_argument("--json", action="store_true")

    spool = sub.add_parser("spool", help="captured sessions waiting to be stored, and why",
                           description="Example: mcp-memory spool; mcp-memory spool retarget NAME shop")
    spool.add_argument("--json", action="store_true", help="without ACTION: the list as one JSON document")
    spool_actions = spool.add_subparsers(dest="spool_command", metavar="ACTION")
    listing = spool_actions.add_parser("list", help="what waits, with the reason and where it would go now")
    listing.add_argument("--json", action="store_true")
    now = spool_actions.add_parser("deliver", help="store what waits now (capture hooks also do, on every run)")
    now.add_argument("--json", action="store_true")
    retarget = spool_actions.add_parser("retarget", help="send one waiting file's sessions to PROJECT, and "
                                                          "deliver what waits")
    retarget.add_argument("name", help="a NAME from `spool list`")
    retarget.add_argument("project")
    retarget.add_argument("--json", action="store_true")
    drop = spool_actions.add_parser("drop", help="delete one waiting file (its sessions are not stored)")
    drop.add_argument("name", help="a NAME from `spool list`")
    drop.add_argument("--json", action="store_true")


def handlers() -> dict[str, Callable[..., int]]:
    return {"projects": run_projects, "spool": run_spool}


def run_projects(settings: Settings, args: argparse.Namespace) -> int:
    from ..core import projects

    if args.projects_command == "show":
        folder = os.path.abspath(os.path.expanduser(args.folder or os.getcwd()))
        resolved = projects.resolve(folder, mapping=settings.raw.get("projects"))
        data = {"folder": folder, "project": resolved.project, "rule": resolved.rule, "source": resolved.source,
                "ignored": list(resolved.ignored)}  # each refused project file also has a warning on stderr
        if args.json:
            print_json(data)
        else:
            print(f"{folder} → {resolved.project} (rule: {resolved.rule}"
                  + (f", from {resolved.source}" if resolved.source else "") + ")")
        return 0
    folder = str(Path(os.path.expanduser(args.folder)).absolute())
    if args.projects_command == "map":
        projects.resolve(folder, explicit=args.project)  # the name's rules, before the file changes
        _edit_mapping(settings, folder, args.project)
        settings.raw.setdefault("projects", {})[folder] = args.project
        result = _deliver(settings)
        if args.json:
            print_json({"folder": folder, "project": args.project, **_delivered(result)})
        else:
            print(f"{folder} → {args.project} (written to [projects] in {settings.write_config_path})")
            _print_delivery(result)
        return 0
    if not _edit_mapping(settings, folder, None):
        raise NotFound(f"{folder} is not in [projects] of {settings.write_config_path}")
    if args.json:
        print_json({"folder": folder, "removed": True})
    else:
        print(f"{folder} removed from [projects]")
    return 0


def run_spool(settings: Settings, args: argparse.Namespace) -> int:
    from ..core import projects
    from ..spool import Spool

    spool = Spool(settings.data_dir / "spool")
    if args.spool_command == "deliver":
        result = _deliver(settings)
        if args.json:
            print_json(_delivered(result))
        else:
            _print_delivery(result)
        return 1 if result.kept else 0
    if args.spool_command == "retarget":
        projects.resolve(None, explicit=args.project)  # the name's rules
        target = _named(spool, args.name)
        target.retarget(args.project)
        result = _deliver(settings)
        if args.json:
            print_json(_delivered(result))
        else:
            _print_delivery(result)
        return 1 if target.path.exists() else 0  # the others may still wait: their own reasons
    if args.spool_command == "drop":
        return _drop(spool, args.name, as_json=args.json)
    return _list(settings, spool, as_json=args.json)


def _list(settings: Settings, spool: Spool, *, as_json: bool) -> int:
    entries = [_entry(settings, p) for p in spool.pending()]
    unreadable = [{"name": u.name, "reason": u.reason, "file": str(u.path)} for u in spool.unreadable()]
    if as_json:
        print_json({"files": entries, "unreadable": unreadable})
        return 0
    if not entries and not unreadable:
        print("the spool is empty")
    for entry in entries:
        print(f"{entry['name']}: {entry['reason']}")
        for s in entry["sessions"]:
            print(f"    {s['agent']} {s['native_id']}: {s['messages']} message(s) from {s['cwd'] or '?'} "
                  f"→ {s['project'] or '?'} ({s['rule']})")
    for u in unreadable:
        print(f"{u['name']}: unreadable, never delivered ({u['reason']}); kept as {u['file']} "
              f"(`mcp-memory spool drop {u['name']}` deletes it)")
    return 0


def _drop(spool: Spool, name: str, *, as_json: bool) -> int:
    """Delete one waiting file, or one set aside as unreadable."""
    kept = next((u for u in spool.unreadable() if u.name == name), None)
    if kept is not None:
        kept.drop()
        sessions: int | None = None
    else:
        found = _named(spool, name)
        found.delivered()
        sessions = len(found.sessions)
    if as_json:
        print_json({"dropped": name, "sessions": sessions})
    else:
        print(f"dropped {name} (" + ("unreadable" if sessions is None else f"{sessions} session(s)") + ", not stored)")
    return 0


def _named(spool: Spool, name: str) -> Any:
    for pending in spool.pending():
        if pending.name == name:
            return pending
    raise NotFound(f"no spool file {name} (see mcp-memory spool list)")


def _entry(settings: Settings, pending: Any) -> dict[str, Any]:
    from ..core import projects

    sessions = []
    for s in pending.sessions:
        try:
            resolved = projects.resolve(s.meta.get("cwd"), explicit=pending.project,
                                        mapping=settings.raw.get("projects"),
                                        session_project=s.meta.get("project") or s.meta.get("project_id"))
            project, rule = resolved.project, resolved.rule
        except Invalid as exc:
            project, rule = None, str(exc)
        cwd = s.meta.get("cwd")
        sessions.append({"agent": s.agent, "native_id": s.native_id, "messages": len(s.messages),
                         "cwd": cwd if isinstance(cwd, str) else None, "project": project, "rule": rule})
    return {"name": pending.name, "reason": pending.reason, "sessions": sessions}


def _deliver(settings: Settings) -> Captured:
    from ..core.capture import Captured, deliver
    from ..spool import Spool

    result = Captured()
    with service(settings) as svc:
        deliver(svc, Spool(settings.data_dir / "spool"), result)
    result.spooled = Spool(settings.data_dir / "spool").count()
    return result


def _delivered(result: Captured) -> dict[str, Any]:
    return {"delivered": [r.model_dump(mode="json") for r in result.sessions],
            "still_waiting": [r.model_dump(mode="json") for r in result.kept], "spool_files": result.spooled}


def _print_delivery(result: Captured) -> None:
    for r in result.sessions:
        print(f"delivered {r.agent} {r.native_id} → {r.project_id}: {r.new} new, {r.duplicates} already stored")
    for r in result.kept:
        print(f"still waiting: {r.agent} {r.native_id}: {r.error}", file=sys.stderr)
    if not result.sessions and not result.kept:
        print("nothing was waiting in the spool")


def _edit_mapping(settings: Settings, folder: str, project: str | None) -> bool:
    """Set (or with None remove) `folder = project` in [projects] of the config file, keeping the
    rest of the file as it is. Whether the file changed."""
    with edited_config(settings.write_config_path) as document:
        table = document.get("projects")
        if project is None and (table is None or folder not in table):
            return False
        if table is None:
            table = tomlkit.table()
            document["projects"] = table
        if project is None:
            del table[folder]
        else:
            table[folder] = project
    return True
