"""Asking Codex for the trust hash of the hooks `install` writes.

Codex runs a user's hook only when `[hooks.state."<key>"] trusted_hash` equals the hash it computes
for the hook's definition; a person normally grants that in Codex's `/hooks` review. `install` is
that person's explicit request to add exactly these hooks, so it records the trust for them — and
only for handlers it wrote itself. The hash is never computed here: Codex's own app server reports
it (`hooks/list` → `currentHash`). The app server runs in a throwaway CODEX_HOME (and HOME) whose
config.toml holds nothing but our hooks: the user's config and folders are neither read nor touched
by it (Codex fills its home with state databases), and the hash depends only on the handler's
definition, not on the file or the position (checked with Codex CLI 0.169.0). Without the codex
binary, or when the app server does not answer, nothing is trusted and `install` says how to trust
the hooks by hand.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ANSWER_WITHIN = 20.0  # seconds for the app server to start and list the hooks


class TrustUnavailable(RuntimeError):
    """Codex could not be asked (not installed, no answer, an error reply)."""


def current_hashes(hooks_toml: str, environ: Mapping[str, str]) -> dict[str, str]:
    """command → Codex's currentHash, for each command hook of `hooks_toml` (a config.toml text)."""
    program = shutil.which("codex", path=environ.get("PATH") or os.defpath)
    if program is None:
        raise TrustUnavailable("the codex command is not on PATH")
    with tempfile.TemporaryDirectory(prefix="mcp-memory-codex-") as folder:
        home = Path(folder)
        (home / "codex").mkdir()
        (home / "codex" / "config.toml").write_text(hooks_toml, encoding="utf-8")
        env = {"PATH": environ.get("PATH") or os.defpath, "HOME": str(home), "CODEX_HOME": str(home / "codex"),
               "LANG": environ.get("LANG") or "C.UTF-8", "RUST_LOG": "error"}
        listed = _hooks_list(program, home, env)
    found = {}
    for entry in listed:
        if not isinstance(entry, dict) or entry.get("handlerType") != "command":
            continue
        command, digest = entry.get("command"), entry.get("currentHash")
        if isinstance(command, str) and isinstance(digest, str) and digest.startswith("sha256:"):
            found[command] = digest
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
        for pipe in (process.stdin, process.stdout):  # closed now, not left to the garbage collector
            if pipe is not None:
                pipe.close()
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
