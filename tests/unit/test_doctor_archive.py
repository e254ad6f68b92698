"""doctor's archive check on an archiver host: a standby has no repository until it takes the lease."""

from __future__ import annotations

from pathlib import Path

from mcp_memory.commands.doctor import _archive_check
from mcp_memory.config import load_settings


def settings_with_repo(tmp_path: Path, repo: Path) -> object:
    config = tmp_path / "config.toml"
    config.write_text(f'[database]\ndsn = "postgresql://archiver@db.example/mem"\n\n[archive]\nrepo = "{repo}"\n'
                      'remote = "git@git.example:team/archive.git"\n')
    return load_settings(environ={"MCP_MEMORY_CONFIG": str(config), "MCP_MEMORY_HOME": str(tmp_path / "home")})


def test_a_standby_whose_repo_is_not_made_yet_is_green(tmp_path: Path) -> None:
    check = _archive_check(settings_with_repo(tmp_path, tmp_path / "archive"))  # type: ignore[arg-type]
    assert check.ok and "when it takes the lease" in check.detail and "git.example" not in check.detail


def test_a_folder_that_is_no_repository_still_fails(tmp_path: Path) -> None:
    (tmp_path / "archive").mkdir()
    check = _archive_check(settings_with_repo(tmp_path, tmp_path / "archive"))  # type: ignore[arg-type]
    assert not check.ok and "not a git repository" in check.detail
