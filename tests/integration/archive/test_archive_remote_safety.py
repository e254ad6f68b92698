"""Whoever can push to the archive's remote must not steer the archiver's writes: a tree holding a
symbolic link, a submodule or a file outside the layout is refused before anything of it is checked
out, no file is opened through a link, `archive status` names the offending path, and restore and
verify never follow a link either. Real git repositories and a real bare remote throughout."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import psycopg
import pytest
from archive_support import bare_remote, cli, git, job_states, messages, second_db  # noqa: F401  (fixtures)
from test_archive_git import line

from mcp_memory.archive import gitrepo, layout, worktree
from mcp_memory.cli import main
from mcp_memory.core.service import Service

SID = "ses_00000000-0000-4000-8000-000000000001"
VICTIM_TEXT = "the victim's own content, no newline at the end"  # the torn-line repair would cut it
AUTHOR = ("-c", "user.name=attacker", "-c", "user.email=a@evil.invalid", "-c", "core.symlinks=true")


def victims(tmp_path: Path) -> tuple[Path, Path]:
    """A file and a folder outside every repository that the attacker's links point at."""
    file, folder = tmp_path / "victim-file", tmp_path / "victim-dir"
    file.write_text(VICTIM_TEXT)
    folder.mkdir()
    return file, folder


def untouched(file: Path, folder: Path) -> None:
    assert file.read_text() == VICTIM_TEXT and not file.is_symlink()
    assert list(folder.iterdir()) == []


def attacker_push(remote: Path, work: Path, change, *, staged=None) -> str:
    """Clone the remote as the attacker, apply `change(clone)`, stage everything (then `staged(clone)`),
    commit and push to main."""
    subprocess.run(["git", *AUTHOR, "clone", "-q", str(remote), str(work)], check=True, capture_output=True)
    change(work)
    git(work, *AUTHOR, "add", "-A")
    if staged is not None:
        staged(work)
    git(work, *AUTHOR, "commit", "-qm", "innocent looking")
    git(work, *AUTHOR, "push", "-q", "origin", "main")
    return git(work, "rev-parse", "main").strip()


def link_the_session_file(target: Path, sid: str = SID):
    def change(work: Path) -> None:
        path = work / layout.session_path(sid)
        path.unlink(missing_ok=True)
        path.parent.mkdir(exist_ok=True)
        path.symlink_to(target)
        (work / layout.meta_path(sid)).unlink(missing_ok=True)
        (work / layout.meta_path(sid)).symlink_to(target)
    return change


def link_the_sessions_folder(target: Path):
    def change(work: Path) -> None:
        subprocess.run(["rm", "-rf", str(work / layout.SESSIONS_DIR)], check=True)
        (work / layout.SESSIONS_DIR).symlink_to(target, target_is_directory=True)
    return change


# git functions, no database ---------------------------------------------------------------------
@pytest.mark.parametrize("attack", ["file", "folder"])
def test_a_remote_commit_with_links_is_refused_and_nothing_is_written_through_them(tmp_path: Path,
                                                                                  attack: str) -> None:
    file, folder = victims(tmp_path)
    remote = bare_remote(tmp_path)
    repo = tmp_path / "archive"
    gitrepo.init(repo, str(remote))
    gitrepo.append_session_lines(repo, SID, [line(1)])
    worktree.write_if_changed(repo, layout.meta_path(SID), "{}\n")
    gitrepo.commit(repo, [layout.session_path(SID), layout.meta_path(SID)], "snapshot 1: x up to seq 1\n")
    gitrepo.push(repo, timeout=30)
    ours = gitrepo.head(repo)
    change = link_the_session_file(file) if attack == "file" else link_the_sessions_folder(folder)
    theirs = attacker_push(remote, tmp_path / "attacker", change)

    with pytest.raises(gitrepo.UnsafeArchive) as refused:
        gitrepo.sync_with_remote(repo, str(remote))
    offending = layout.session_path(SID) if attack == "file" else layout.SESSIONS_DIR
    assert offending in str(refused.value) and "symbolic link" in str(refused.value)
    assert theirs[:12] in str(refused.value) and "nothing of it was checked out" in str(refused.value)
    assert gitrepo.head(repo) == ours  # the remote's commit was not adopted
    assert not (repo / layout.SESSIONS_DIR).is_symlink() and not (repo / layout.session_path(SID)).is_symlink()
    # the archiver carries on with its own files, which stay inside the repository
    assert gitrepo.session_watermark(repo, SID) == 1
    gitrepo.append_session_lines(repo, SID, [line(2)])
    assert worktree.write_if_changed(repo, layout.meta_path(SID), '{"changed": true}\n')
    untouched(file, folder)
    problems = gitrepo.inspect(repo)
    assert len(problems) == 1 and offending in problems[0] and "remote's main" in problems[0]


def test_a_fresh_archiver_on_a_hostile_remote_adopts_nothing(tmp_path: Path) -> None:
    file, folder = victims(tmp_path)
    remote = bare_remote(tmp_path)
    seed = tmp_path / "seed"
    gitrepo.init(seed, str(remote))
    gitrepo.push(seed, timeout=30)
    attacker_push(remote, tmp_path / "attacker", link_the_sessions_folder(folder))
    repo = tmp_path / "archive"
    gitrepo.init(repo, str(remote))  # logs the refusal, starts its own history
    assert git(repo, "config", "core.symlinks").strip() == "false"
    assert (repo / "README.md").is_file() and git(repo, "log", "--format=%an").split("\n")[0] != "attacker"
    gitrepo.append_session_lines(repo, SID, [line(1)])
    assert (repo / layout.SESSIONS_DIR).is_dir() and not (repo / layout.SESSIONS_DIR).is_symlink()
    untouched(file, folder)


def test_files_outside_the_layout_and_submodules_are_refused(tmp_path: Path) -> None:
    remote = bare_remote(tmp_path)
    repo = tmp_path / "archive"
    gitrepo.init(repo, str(remote))
    gitrepo.push(repo, timeout=30)

    def change(work: Path) -> None:
        (work / ".gitattributes").write_text("* filter=x\n")
        (work / "sessions" / "nested").mkdir(parents=True)
        (work / "sessions" / "nested" / "a.jsonl").write_text("{}\n")

    def submodule(work: Path) -> None:
        git(work, "update-index", "--add", "--cacheinfo", f"160000,{git(work, 'rev-parse', 'HEAD').strip()},vendor")

    attacker_push(remote, tmp_path / "attacker", change, staged=submodule)
    with pytest.raises(gitrepo.UnsafeArchive) as refused:
        gitrepo.sync_with_remote(repo, str(remote))
    text = str(refused.value)
    assert ".gitattributes: not an archive path" in text and "sessions/nested/a.jsonl: not an archive path" in text
    assert "vendor: a submodule (mode 160000)" in text
    assert not (repo / ".gitattributes").exists()


@pytest.mark.parametrize("where", ["file", "folder"])
def test_a_link_in_the_working_tree_is_never_opened(tmp_path: Path, where: str) -> None:
    """A link already in the folder (an older archiver adopted it, or a local hand): every open is
    O_NOFOLLOW, step by step, and names the path; the victim stays as it was."""
    file, folder = victims(tmp_path)
    repo = tmp_path / "archive"
    gitrepo.init(repo)
    if where == "file":
        (repo / layout.session_path(SID)).symlink_to(file)
        (repo / layout.meta_path(SID)).symlink_to(file)
    else:
        (repo / layout.SESSIONS_DIR).rmdir()
        (folder / Path(layout.session_path(SID)).name).write_text(VICTIM_TEXT)
        (repo / layout.SESSIONS_DIR).symlink_to(folder, target_is_directory=True)
    calls = [lambda: gitrepo.session_watermark(repo, SID),
             lambda: gitrepo.append_session_lines(repo, SID, [line(1)]),
             lambda: worktree.write_if_changed(repo, layout.meta_path(SID), "{}\n")]
    for call in calls:
        with pytest.raises(gitrepo.UnsafeArchive, match="symbolic link"):
            call()
    if where == "file":
        worktree.remove_file(repo, layout.session_path(SID))  # removes the link itself
        assert not os.path.lexists(repo / layout.session_path(SID))
        untouched(file, folder)
    else:
        with pytest.raises(gitrepo.UnsafeArchive, match="symbolic link"):  # never a file through a link
            worktree.remove_file(repo, layout.session_path(SID))
        assert (folder / Path(layout.session_path(SID)).name).read_text() == VICTIM_TEXT
        assert file.read_text() == VICTIM_TEXT
    assert any("symbolic link in the working tree" in p for p in gitrepo.inspect(repo))
    with pytest.raises(gitrepo.UnsafeArchive, match="not an archive path"):
        worktree.open_file(repo, "../outside.jsonl", os.O_RDONLY)


def test_a_fifo_in_the_working_tree_is_refused_without_hanging(tmp_path: Path) -> None:
    repo = tmp_path / "archive"
    gitrepo.init(repo)
    os.mkfifo(repo / layout.session_path(SID))
    with pytest.raises(gitrepo.UnsafeArchive, match="not a regular file"):
        gitrepo.session_watermark(repo, SID)


# the archiver, status, restore and verify on the real database -----------------------------------
def test_archiver_status_restore_and_verify_never_follow_a_pushed_link(service: Service, cli, tmp_path: Path,  # noqa: F811
                                                                        settings, second_db: str, capsys) -> None:  # noqa: F811
    file, folder = victims(tmp_path)
    s = service.create_session("proj", {"title": "target"})
    service.append_messages(s.session_id, messages(3))
    service.create_snapshot(s.session_id, "one")
    remote = bare_remote(tmp_path)
    repo = tmp_path / "archive"
    assert cli("archive", "--once", "--repo", str(repo), "--remote", str(remote)) == 0
    attacker_push(remote, tmp_path / "attacker", link_the_session_file(file, s.session_id))
    service.append_messages(s.session_id, messages(2, "n"))
    second = service.create_snapshot(s.session_id, "two")
    capsys.readouterr()

    # the push is rejected (the remote moved on), the remote's commit is refused, and the job says why
    assert cli("archive", "--once", "--repo", str(repo), "--remote", str(remote),
               config={"max_attempts": 1}) == 1  # its job failed: the run says so in its exit status
    untouched(file, folder)
    assert [json.loads(x)["seq"] for x in (repo / layout.session_path(s.session_id)).read_text().splitlines()] \
        == [1, 2, 3, 4, 5]  # the archiver's own file, inside the repository
    status, _, error = job_states(settings.dsn)[second.snapshot_id]
    assert status == "failed" and layout.session_path(s.session_id) in error and "symbolic link" in error
    capsys.readouterr()
    assert main(["--dsn", settings.dsn, "archive", "status", "--repo", str(repo), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["repository"]["ok"] is False
    assert any(layout.session_path(s.session_id) in p and "symbolic link" in p for p in doc["repository"]["problems"])
    assert main(["--dsn", settings.dsn, "archive", "status", "--repo", str(repo)]) == 0
    text = capsys.readouterr().out
    assert "refused:" in text and layout.session_path(s.session_id) in text and "failed: job" in text

    # restore from a clone holding the attacker's commit: the links are listed, never read or followed
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(remote), str(clone)], check=True, capture_output=True)
    assert main(["--dsn", second_db, "restore", "--from-archive", str(clone), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    refused = {b["file"]: b["why"] for b in report["bad_lines"]}
    assert "symbolic link" in refused[layout.session_path(s.session_id)]
    assert "symbolic link" in refused[layout.meta_path(s.session_id)]
    untouched(file, folder)
    with psycopg.connect(second_db) as conn:
        assert conn.execute("SELECT count(*) FROM messages").fetchone() == (0,)
    assert main(["--dsn", settings.dsn, "archive", "verify", "--repo", str(clone), "--json"]) == 1
    differences = json.loads(capsys.readouterr().out)["differences"]
    assert any(d.startswith(layout.session_path(s.session_id) + ": a symbolic link") for d in differences)


def test_a_link_an_older_archiver_adopted_is_named_and_never_written_through(tmp_path: Path) -> None:
    file, folder = victims(tmp_path)
    (folder / Path(layout.session_path(SID)).name).write_text(VICTIM_TEXT)
    repo = tmp_path / "archive"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / layout.SESSIONS_DIR).symlink_to(folder, target_is_directory=True)
    git(repo, "add", "-A")
    git(repo, *AUTHOR, "commit", "-qm", "adopted before the check existed")
    gitrepo.init(repo)
    gitrepo.heal(repo)  # reset --hard and clean: git itself never follows the link either
    with pytest.raises(gitrepo.UnsafeArchive, match="symbolic link"):
        gitrepo.append_session_lines(repo, SID, [line(1)])
    assert (folder / Path(layout.session_path(SID)).name).read_text() == VICTIM_TEXT and file.read_text() == VICTIM_TEXT
    problems = gitrepo.inspect(repo)
    assert any(p.startswith("the local main") and "sessions: a symbolic link" in p for p in problems)
    assert any("symbolic link in the working tree" in p for p in problems)
