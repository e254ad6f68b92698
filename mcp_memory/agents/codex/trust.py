"""Asking Codex for the trust hash of the hooks `install` just wrote.

Codex runs a user's hook only when `[hooks.state."<key>"] trusted_hash` equals the hash it computes
for the hook's definition; a person normally grants that in Codex's `/hooks` review. `install` is
that person's explicit request to add exactly these hooks, so it records the trust for them — and
only for handlers it wrote itself (same command, in the config file it edited). The hash is never
computed here: Codex's own app server reports it (`hooks/list` → `key`, `currentHash`), so a change
of Codex's hashing cannot produce a wrong entry. Without the codex binary, or when the app server
does not answer, nothing is trusted and `install` says how to trust the hooks by hand.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ANSWER_WITHIN = 20.0  # seconds for the app server to start and list the hooks


class TrustUnavailable(RuntimeError):
    """Codex could not be asked (not installed, no answer, an error reply)."""


def current_hashes(
    config: Path, commands: set[str], *, cwd: Path, environ: Mapping[str, str]
) -> dict[str, str]:
    """key → currentHash of the hooks in `config` whose command is one of `commands`."""
    program = shutil.which("codex", path=environ.get("PATH") or os.defpath)
    if program is None:
        raise TrustUnavailable("the codex command is not on PATH")
    listed = _hooks_list(program, cwd, dict(environ))
    found = {}
    for entry in listed:
        if not isinstance(entry, dict) or entry.get("command") not in commands:
            continue
        if entry.get("handlerType") != "command" or entry.get("isManaged"):
            continue
        source = entry.get("sourcePath")
        if not isinstance(source, str) or Path(source).resolve() != config.resolve():
            continue
        key, digest = entry.get("key"), entry.get("currentHash")
        if isinstance(key, str) and isinstance(digest, str) and digest.startswith("sha256:"):
            found[key] = digest
    return found


def _hooks_list(program: str, cwd: Path, env: dict[str, str]) -> list[Any]:
    env.setdefault("RUST_LOG", "error")
    try:
        process = subprocess.Popen([program, "app-server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, env=env, cwd=cwd, bufsize=0)
    except OSError as exc:
        raise TrustUnavailable(f"cannot start codex app-server: {exc}") from None
    try:
        deadline = time.monotonic() + ANSWER_WITHIN
        _call(process, 1, "initialize", {"clientInfo": {"name": "mcp-memory", "version": "1"}}, deadline)
        _send(process, {"jsonrpc": "2.0", "method": "initialized"})
        result = _call(process, 2, "hooks/list", {"cwds": [str(cwd)]}, deadline)
    finally:
        process.kill()
        process.wait()
    data = result.get("data") if isinstance(result, dict) else None
    return [hook for entry in data if isinstance(entry, dict) for hook in entry.get("hooks") or []] \
        if isinstance(data, list) else []


def _send(process: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert process.stdin is not None
    try:
        process.stdin.write(json.dumps(message).encode() + b"\n")
        process.stdin.flush()
    except OSError as exc:
        raise TrustUnavailable(f"codex app-server closed its input: {exc}") from None


def _call(process: subprocess.Popen[bytes], number: int, method: str, params: dict[str, Any],
          deadline: float) -> Any:
    _send(process, {"jsonrpc": "2.0", "id": number, "method": method, "params": params})
    assert process.stdout is not None
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([process.stdout], [], [], left)[0]:
            raise TrustUnavailable(f"codex app-server did not answer {method} in time")
        line = process.stdout.readline()
        if not line:
            raise TrustUnavailable(f"codex app-server ended before answering {method}")
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict) and message.get("id") == number:
            if "error" in message:
                raise TrustUnavailable(f"codex app-server refused {method}: {message['error']}")
            return message.get("result")
