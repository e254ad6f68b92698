"""`archive verify` on a standby's clone after takeovers: the standby's copy diverged from the remote
(its last run as writer committed a batch whose push the remote refused, and the other archiver
exported those snapshots again); verify fetches the remote, says so, and compares the remote's main
and tags: no false difference, while a real one in the remote is still found."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from archive_support import bare_remote, git, messages

from mcp_memory.archive import layout
from mcp_memory.archive.daemon import Archiver
from mcp_memory.archive.options import ArchiverOptions, AutoSnapshot
from mcp_memory.archive.retry import RetryStrategy
from mcp_memory.archive.verify import verify
from mcp_memory.core.service import Service

REFUSE = "#!/bin/sh\n[ -e \"$GIT_DIR/refuse\" ] && { echo 'refused for the test' >&2; exit 1; }\nexit 0\n"


def options(repo: Path, remote: Path) -> ArchiverOptions:
    return ArchiverOptions(repo=repo, remote=str(remote), auto=AutoSnapshot(enabled=False),
                           retry=RetryStrategy(base=0.2, jitter=0))


def test_verify_on_a_diverged_standby_compares_the_remote_and_still_finds_a_real_difference(
        service: Service, tmp_path: Path) -> None:
    remote = bare_remote(tmp_path)
    hook = remote / "hooks" / "pre-receive"
    hook.write_text(REFUSE)
    hook.chmod(0o755)
    a, b = tmp_path / "host-a", tmp_path / "host-b"
    sid = service.create_session("proj").session_id
    service.append_messages(sid, messages(2))
    service.create_snapshot(sid, "one")
    assert Archiver(service.db, options(a, remote)).run(once=True).done == 1  # a writes and pushes
    service.append_messages(sid, messages(3, "two"))
    service.create_snapshot(sid, "two")
    (remote / "refuse").touch()
    refused = Archiver(service.db, options(a, remote)).run(once=True)  # a commits, the remote refuses it
    assert (refused.exported, refused.done, refused.retrying) == (1, 0, 1)
    (remote / "refuse").unlink()
    time.sleep(1.1)  # the job's backoff, and b's commit a second later than a's (else the two are one sha)
    assert Archiver(service.db, options(b, remote)).run(once=True).done == 1  # b took over: exports it again
    service.append_messages(sid, messages(2, "three"))
    service.create_snapshot(sid, "three")
    assert Archiver(service.db, options(b, remote)).run(once=True).done == 1
    assert subprocess.run(["git", "merge-base", "--is-ancestor", "main", "origin/main"], cwd=a).returncode != 0

    standby = verify(service.db, a)  # a is the standby now, its main beside the remote's
    assert standby.ok, standby.differences
    assert standby.sessions[0]["archive"]["messages"] == 7
    assert standby.fetched and "1 commit(s) the remote moved past" in standby.fetched, standby.fetched
    assert "compared the remote's main" in standby.fetched and str(remote) in standby.fetched
    assert verify(service.db, b).ok  # the writer's own copy, the same as the remote
    assert "the same as this copy" in (verify(service.db, b).fetched or "")

    # a real difference in the remote: a line dropped from the session file
    editor = tmp_path / "editor"
    subprocess.run(["git", "clone", "-q", str(remote), str(editor)], check=True)
    path = editor / layout.session_path(sid)
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:-1]))
    git(editor, "-c", "user.name=x", "-c", "user.email=x@x", "commit", "-qam", "drop a line")
    git(editor, "push", "-q", "origin", "main")
    broken = verify(service.db, a)
    assert not broken.ok and any(sid in d for d in broken.differences), broken.differences
