"""The adapter framework: pure conversions between an agent's native sessions and neutral ones.

An adapter never touches the database. `read` turns native files into `NeutralSession`s, `write`
turns a `NeutralSession` into native files; both fill a `MappingReport` that names every field or
record type that was dropped, transformed or synthesised, so that nothing is lost silently. The native
record is kept under `metadata["native"]` so that a round trip into the same agent is lossless.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from ..schema import MappingReport, NeutralSession

if TYPE_CHECKING:
    from .install_support import Installer

ThinkingPolicy = Literal["drop", "text"]


class FormatError(ValueError):
    """A file that is not in the agent's format, or is damaged: the CLI shows it as `[invalid]`,
    naming the file. Adapters raise it for foreign or broken input; any other exception is a bug."""


@dataclass
class WriteOptions:
    """How to render foreign data that the target cannot carry natively."""

    thinking: ThinkingPolicy = "drop"  # reasoning without a valid native signature: drop, or keep as text
    cwd: Path | None = None  # project directory the written session belongs to
    extra: dict[str, Any] = field(default_factory=dict)  # agent-specific switches


@dataclass
class WrittenSession:
    native_id: str
    files: list[Path]
    report: MappingReport
    resume_command: str | None = None


class Adapter(ABC):
    """Base class of every agent adapter. Subclasses are pure: files in, files out."""

    name: ClassVar[str]  # CLI name: claude-code, opencode, codex, gemini, hermes, openai
    display_name: ClassVar[str]
    # what a relay into this format cannot keep as such (relay.py categories, e.g. "tool pair" for a
    # Markdown history): the write maps it to something else and its report says so
    cannot_hold: ClassVar[frozenset[str]] = frozenset()

    @abstractmethod
    def read(self, paths: Sequence[Path]) -> list[NeutralSession]:
        """Native files or folders → neutral sessions, each with its own read report. Raises
        FormatError for a file that is not this agent's."""

    def read_files(self, paths: Sequence[Path]) -> list[NeutralSession]:
        """`read`, for files that anyone may have crafted (see `format_guard`)."""
        with format_guard(self.display_name, paths):
            return self.read(paths)

    @abstractmethod
    def write(self, session: NeutralSession, out_dir: Path, options: WriteOptions) -> WrittenSession:
        """Neutral session → native file(s) under out_dir, with a write report."""

    def read_incremental(
        self, path: Path, cursor: dict[str, Any] | None
    ) -> tuple[list[NeutralSession], dict[str, Any]]:
        """For capture hooks: the sessions in `path` with only what is new since `cursor` (a JSON-able
        dict this method returned last time; None the first time), and the new cursor. The messages
        returned carry the same append_ids a full `read` would give them. Default: a full read."""
        return self.read([path]), {}

    def install_dir(self, cwd: Path, env: Mapping[str, str]) -> Path | None:
        """Where the agent itself looks for sessions of project `cwd` (honouring its env vars);
        None for formats that have no such place (then `export --install` is refused)."""
        return None

    def install(
        self, session: NeutralSession, *, cwd: Path, env: Mapping[str, str], options: WriteOptions
    ) -> WrittenSession:
        """Write where the agent looks and return the exact resume command. Adapters whose agent
        imports through its own CLI (OpenCode) override this."""
        target = self.install_dir(cwd, env)
        if target is None:
            raise ValueError(f"{self.display_name} sessions cannot be installed; use --out")
        return self.write(session, target, options)


def parse_time(value: Any) -> datetime | None:
    """A native timestamp (RFC 3339 text, or epoch seconds) → aware datetime; None when absent or
    unreadable. A time without zone is taken as UTC, as the agents write them."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, tz=UTC)
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def epoch_ms(value: Any) -> int | None:
    """A datetime or RFC 3339 text → epoch milliseconds, as OpenCode and the DeepSeek harness store
    times; None when absent or unreadable."""
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, str):
        try:
            return int(datetime.fromisoformat(value).timestamp() * 1000)
        except ValueError:
            return None
    return None


def plain_text(content: Any) -> str:
    """A message's text for formats that hold one string: its text parts joined by newlines."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(getattr(p, "text", "") or "" for p in content if getattr(p, "type", None) == "text")
    return ""


def stable_id(*parts: object, prefix: str = "") -> str:
    """A deterministic id from native identifiers: re-importing a file yields the same append_ids."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:32]
    return f"{prefix}{digest}"


@contextmanager
def format_guard(display_name: str, paths: Sequence[Path]) -> Iterator[None]:
    """Native files may be crafted or come from a newer agent version: a structure the parser did
    not expect (a list where an object belongs, a missing key, bad UTF-8) becomes a FormatError that
    names the files, so that the CLI answers `[invalid]` and stores nothing."""
    try:
        yield
    except FormatError:
        raise
    except (ValueError, KeyError, IndexError, TypeError, AttributeError, UnicodeDecodeError) as exc:
        names = ", ".join(str(p) for p in paths)
        raise FormatError(f"{names} is not a {display_name} file this version understands "
                          f"({type(exc).__name__}: {exc})") from exc


@dataclass(frozen=True)
class CaptureTarget:
    """What `mcp-memory sync` reads: a key for its cursor file, and how to read what is new."""

    key: str
    read: Callable[[dict[str, Any] | None], tuple[list[NeutralSession], dict[str, Any]]]


class Agent(ABC):
    """One agent: its adapter, how its current session is located for capture, and its installer.
    Subclasses live in `agents/<name>/__init__.py`; their parts are imported on first use."""

    name: ClassVar[str]
    display_name: ClassVar[str]
    write_options: ClassVar[dict[str, str]] = {}  # `export --option KEY=VALUE` switches, with their help

    @abstractmethod
    def adapter(self) -> Adapter:
        """A new adapter of this agent's format."""

    @property
    def can_install(self) -> bool:
        return self.installer() is not None

    def installer(self) -> Installer | None:
        """The agent's install module (an `Installer`: install_support.py), if it launches MCP servers."""
        return None

    def capture_target(
        self, *, path: Path | None, session: str | None, hook: Mapping[str, Any], environ: Mapping[str, str]
    ) -> CaptureTarget:
        """The session `sync` captures: the file named by `--path`, else what the hook JSON names.
        Agents whose sessions live elsewhere than in one file (a database) override this."""
        path = path or self.path_from_hook(hook)
        if path is None:
            raise FormatError(f"say which {self.display_name} session to sync: --path FILE"
                              + (" (or --hook with the hook JSON on stdin)" if self.path_from_hook is not
                                 Agent.path_from_hook else ""))
        if not path.exists():
            raise FormatError(f"no such session file: {path}")
        adapter = self.adapter()

        def read(cursor: dict[str, Any] | None) -> tuple[list[NeutralSession], dict[str, Any]]:
            with format_guard(self.display_name, [path]):
                return adapter.read_incremental(path, cursor)

        return CaptureTarget(key=f"{self.name}:{path.resolve()}", read=read)

    def watched_files(self, *, path: Path | None, environ: Mapping[str, str]) -> list[Path]:
        """The files whose change means there may be something new to capture (`mcp-memory watch`
        polls their size and time and captures only after a change); empty: capture every round."""
        return [path] if path else []

    def recall_file(self, *, path: Path | None, environ: Mapping[str, str]) -> Path | None:
        """For agents without a start hook that read a file into every session (Aider's `--read`, a
        rules file): where `mcp-memory watch` keeps the project's recall; None: no such file."""
        return None

    def path_from_hook(self, hook: Mapping[str, Any]) -> Path | None:
        """The session file a hook's JSON names, for agents whose hooks name one."""
        return None

    def session_start_output(self, context: str) -> dict[str, Any] | None:
        """What a session-start hook prints so that the agent adds `context` to the new session, for
        agents whose hooks can (`recall --hook`)."""
        return None

    def recall_wanted(self, hook: Mapping[str, Any]) -> bool:
        """Whether `recall --hook` run with this hook payload adds the recall: agents whose recall
        hook fires on every prompt (Gemini CLI's BeforeAgent) add it to a session's first prompt only."""
        return True
