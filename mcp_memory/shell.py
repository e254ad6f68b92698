"""Command lines printed for people to run (resume commands): built from argument lists with proper
quoting, never pasted together, so an id or a folder name taken from session meta stays one inert
argument. POSIX shells get `shlex` quoting; on Windows the line is for PowerShell."""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence


def posix_line(argv: Sequence[str], *, cwd: str | None = None) -> str:
    """`cd 'DIR' && prog 'arg' …` for sh, bash and zsh."""
    line = shlex.join(argv)
    return f"cd {shlex.quote(cwd)} && {line}" if cwd else line


def powershell_quote(text: str) -> str:
    """A PowerShell single-quoted string: the only special character inside is `'`, doubled.
    PowerShell also treats the typographic quotes U+2018–U+201B as single quotes."""
    for mark in ("\u2018", "\u2019", "\u201a", "\u201b"):
        text = text.replace(mark, mark * 2)
    return "'" + text.replace("'", "''") + "'"


def powershell_line(argv: Sequence[str], *, cwd: str | None = None) -> str:
    """`Set-Location -LiteralPath 'DIR'; & 'prog' 'arg' …` for PowerShell."""
    line = "& " + " ".join(powershell_quote(part) for part in argv)
    return f"Set-Location -LiteralPath {powershell_quote(cwd)}; {line}" if cwd else line


def command_line(argv: Sequence[str], *, cwd: str | None = None) -> str:
    """The line for this host's usual shell."""
    return powershell_line(argv, cwd=cwd) if os.name == "nt" else posix_line(argv, cwd=cwd)
