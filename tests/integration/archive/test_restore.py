"""Restore at scale and after a disaster: a chain of 1,500 nested forks built through the service's own
calls restores completely; a line far longer than any message is quarantined without being held in
memory; and the archive comes back from a fresh clone of a plain `git init --bare` remote (whose HEAD
names master), from the bare remote itself, and from a file:// URL."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

import psycopg
import pytest
from archive_support import cli, db_rows, git, messages, second_db  # noqa: F401  (fixtures)

from mcp_memory.archive import layout
from mcp_memory.cli import main
from mcp_memory.core.service import Service

CHAIN = 1500


def plain_bare_remote(tmp_path: Path) -> Path:
    """A remote as a person makes it: `git init --bare` with git's own default branch (master)."""
    path = tmp_path / "remote.git"
    subprocess.run(["git", "-c", "init.defaultBranch=master", "init", "-q", "--bare", str(path)], check=True)
    return path


def test_a_chain_of_1500_nested_forks_restores_completely(service: Service, cli, tmp_path: Path,  # noqa: F811
                                                          settings, second_db: str, capsys) -> None:  # noqa: F811
    root = service.create_session("proj", {"title": "root"})
    service.append_messages(root.session_id, messages(1, "root"))
    chain = [root.session_id]
    for depth in range(CHAIN):
        snap = service.create_snapshot(chain[-1], f"depth {depth}")
        fork = service.load_snapshot(snap.snapshot_id)
        service.append_message(fork.session_id, {"role": "user", "content": f"turn {depth + 2}",
                                                 "append_id": f"chain-{depth}"})
        chain.append(fork.session_id)
    service.create_snapshot(chain[-1], "the deepest")
    repo = tmp_path / "archive"
    assert cli("archive", "--once", "--repo", str(repo)) == 0
    capsys.readouterr()

    assert main(["--dsn", second_db, "restore", "--from-archive", str(repo), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["ok"], report["sessions"], report["messages"], report["snapshots"]) == \
        (True, CHAIN + 1, CHAIN + 1, CHAIN + 1)
    lineage = "SELECT session_id, parent_session_id, fork_seq, parent_snapshot_id, last_seq FROM sessions ORDER BY 1"
    assert db_rows(second_db, lineage) == db_rows(settings.dsn, lineage)
    deepest = db_rows(second_db, "SELECT last_seq FROM sessions WHERE session_id = %s", chain[-1])
    assert deepest == [(CHAIN + 1,)]


def test_an_overlong_line_is_quarantined_and_the_rest_restored(service: Service, cli, tmp_path: Path,  # noqa: F811
                                                               second_db: str, capsys) -> None:  # noqa: F811
    s = service.create_session("proj")
    service.append_messages(s.session_id, messages(3))
    service.create_snapshot(s.session_id, "three")
    repo = tmp_path / "archive"
    assert cli("archive", "--once", "--repo", str(repo)) == 0
    path = repo / layout.session_path(s.session_id)
    lines = path.read_text().splitlines(keepends=True)
    huge = json.loads(lines[1])
    huge["content"] = "x" * (24 * 1024 * 1024)  # far beyond the 1 MiB message limit (4 MiB line bound)
    lines[1] = json.dumps(huge) + "\n"
    path.write_text("".join(lines))
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qam", "a huge line")
    capsys.readouterr()

    assert main(["--dsn", second_db, "restore", "--from-archive", str(repo), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    (bad,) = report["bad_lines"]
    assert bad["file"] == layout.session_path(s.session_id) and bad["line"] == 2
    assert "longer than any message the server accepts" in bad["why"] and "1 later line(s)" in bad["why"]
    assert (report["sessions"], report["messages"]) == (1, 1)


def test_a_lineage_cycle_is_listed_not_looped(service: Service, cli, tmp_path: Path,  # noqa: F811
                                              second_db: str, capsys) -> None:  # noqa: F811
    a, b = service.create_session("proj"), service.create_session("proj")
    for s in (a, b):
        service.append_messages(s.session_id, messages(1))
        service.create_snapshot(s.session_id, "one")
    repo = tmp_path / "archive"
    assert cli("archive", "--once", "--repo", str(repo)) == 0
    for one, other in ((a, b), (b, a)):  # each names the other as its parent
        path = repo / layout.meta_path(one.session_id)
        doc = json.loads(path.read_text())
        doc.update(parent_session_id=other.session_id, fork_seq=0)
        path.write_text(json.dumps(doc))
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qam", "a cycle")
    capsys.readouterr()

    assert main(["--dsn", second_db, "restore", "--from-archive", str(repo), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["sessions"] == 0 and sorted(report["skipped_sessions"]) == sorted([a.session_id, b.session_id])
    assert all("in a circle" in bad["why"] for bad in report["bad_lines"])


@pytest.mark.parametrize("how", ["fresh clone", "bare remote", "file url"])
def test_disaster_recovery_from_a_plain_bare_remote(service: Service, cli, tmp_path: Path, settings,  # noqa: F811
                                                    second_db: str, capsys, monkeypatch, how: str) -> None:  # noqa: F811
    scratch = tmp_path / "scratch"  # where restore clones a bare remote or a URL
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    s = service.create_session("proj", {"title": "lost host"})
    service.append_messages(s.session_id, messages(4))
    snap = service.create_snapshot(s.session_id, "four")
    fork = service.load_snapshot(snap.snapshot_id, {"title": "fork"})
    service.append_messages(fork.session_id, messages(2, "f"))
    service.create_snapshot(fork.session_id, "fork")
    remote = plain_bare_remote(tmp_path)
    assert cli("archive", "--once", "--repo", str(tmp_path / "host" / "archive"), "--remote", str(remote)) == 0
    assert git(remote, "symbolic-ref", "HEAD").strip() == "refs/heads/main"  # the archiver pointed it at main

    # the disaster-recovery steps of the README, on a new host
    if how == "fresh clone":
        subprocess.run(["git", "clone", "-q", str(remote), str(tmp_path / "clone")], check=True)
        where = str(tmp_path / "clone")
    else:
        where = str(remote) if how == "bare remote" else remote.as_uri()
    capsys.readouterr()
    assert main(["--dsn", second_db, "restore", "--from-archive", where]) == 0
    assert "restored 2 session(s), 6 message(s), 2 snapshot(s)" in capsys.readouterr().out
    every = "SELECT session_id, seq, append_id, payload, payload_hash FROM messages ORDER BY 1, 2"
    assert db_rows(second_db, every) == db_rows(settings.dsn, every)
    assert not any(scratch.iterdir())  # the temporary clone is gone


def test_a_clone_whose_head_named_master_restores_from_origin_main(service: Service, cli,  # noqa: F811
                                                                   tmp_path: Path, second_db: str,  # noqa: F811
                                                                   capsys) -> None:
    s = service.create_session("proj")
    service.append_messages(s.session_id, messages(2))
    service.create_snapshot(s.session_id, "two")
    remote = plain_bare_remote(tmp_path)
    repo = tmp_path / "host" / "archive"
    assert cli("archive", "--once", "--repo", str(repo), "--remote", str(remote)) == 0
    git(remote, "symbolic-ref", "HEAD", "refs/heads/master")  # a remote whose HEAD could not be set
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(remote), str(clone)], check=True, capture_output=True)
    assert not git(clone, "branch", "--list", "main").strip()  # no local main: git checked nothing out
    capsys.readouterr()
    assert main(["--dsn", second_db, "restore", "--from-archive", str(clone)]) == 0
    assert "restored 1 session(s), 2 message(s), 1 snapshot(s)" in capsys.readouterr().out
    with psycopg.connect(second_db) as conn:
        assert conn.execute("SELECT count(*) FROM messages").fetchone() == (2,)


def test_a_folder_that_is_no_repository_and_an_unreachable_url_are_named(service: Service, tmp_path: Path,
                                                                         second_db: str, capsys) -> None:  # noqa: F811
    (tmp_path / "plain").mkdir()
    assert main(["--dsn", second_db, "restore", "--from-archive", str(tmp_path / "plain")]) == 1
    assert "not a git repository" in capsys.readouterr().err
    assert main(["--dsn", second_db, "restore", "--from-archive", (tmp_path / "gone.git").as_uri()]) == 1
    assert "cannot clone the archive from file://" in capsys.readouterr().err


def test_the_blob_reader_streams_bounded_lines_and_stays_in_step(tmp_path: Path) -> None:
    from mcp_memory.archive.blobs import BlobReader, TooLong, commit_messages

    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "a").write_bytes(b"one\n" + b"x" * 300_000 + b"\nthree\nno newline at the end")
    (repo / "b").write_bytes(b"\n".join(b"line %d" % i for i in range(100_000)) + b"\n")
    git(repo, "add", "a", "b")
    git(repo, "commit", "-qm", "first")
    git(repo, "commit", "-q", "--allow-empty", "-m", "second\n\nwith a body")
    with BlobReader(repo, "main") as reader:
        assert list(reader.lines("a", max_line=1000)) == [b"one", TooLong(300_000), b"three",
                                                          b"no newline at the end"]
        partial = reader.lines("b", max_line=1000)
        assert [next(partial) for _ in range(3)] == [b"line 0", b"line 1", b"line 2"]
        partial.close()  # stopped early: the rest of the file is drained, the next read is in step
        assert list(reader.lines("missing", max_line=10)) == []
        assert next(iter(reader.lines("a", max_line=1000))) == b"one"
    messages = [m for m in commit_messages(repo, "main", max_bytes=1000) if m]
    assert messages == [b"first", b"second\n\nwith a body"]
