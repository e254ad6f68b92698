"""install/install.sh in --dry-run: the steps an admin's host would run (isolated env, login,
registration with each agent found on PATH, doctor), without installing anything."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "install" / "install.sh"


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_install_sh_dry_run_registers_agents_found(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("claude", "codex"):
        fake = bin_dir / name
        fake.write_text("#!/bin/sh\nexit 0\n")
        fake.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")}
    out = subprocess.run(["bash", str(SCRIPT), "--dsn", "postgresql://host-a@db.example/mem", "--token-stdin",
                          "--pgbouncer", "--direct-dsn", "postgresql://host-a@db.example:5432/mem", "--dry-run"], check=False, capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert any("venv" in line or "pipx install" in line for line in lines)
    assert any("login --dsn postgresql://host-a@db.example/mem --token-stdin --pgbouncer "
               "--direct-dsn postgresql://host-a@db.example:5432/mem" in line for line in lines)
    assert any(line.endswith("install claude-code") for line in lines)
    assert any(line.endswith("install codex") for line in lines)
    assert "skip opencode" in out.stdout and any(line.endswith(" doctor") for line in lines)
    assert not (tmp_path / "data").exists()  # nothing was installed


def test_install_sh_rejects_unknown_options() -> None:
    out = subprocess.run(["bash", str(SCRIPT), "--bogus"], check=False, capture_output=True, text=True,
                         env={**os.environ}, timeout=30)
    assert out.returncode == 2 and "unknown option" in out.stderr
