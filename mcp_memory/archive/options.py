"""The archiver's options: `[archive]` in the config file under the command's flags, and the
automatic snapshot policy (archive/daemon.py runs them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import Settings
from ..errors import Invalid
from .retry import RetryStrategy


@dataclass(frozen=True)
class ArchiverOptions:
    repo: Path
    remote: str | None = None
    poll_interval: float = 10.0  # seconds between polls when no NOTIFY arrives
    standby_interval: float = 1.0  # how often a standby tries the lock: the failover delay
    lock_wait: float = 10.0  # --once: how long to wait for the lock held by a daemon that just died
    lease: float = 120.0  # a claimed job returns to the queue this long after its archiver stops renewing
    batch: int = 50  # jobs per claim (one push per batch)
    push_timeout: float = 60.0
    retry: RetryStrategy = field(default_factory=RetryStrategy)
    auto: AutoSnapshot = field(default_factory=lambda: AutoSnapshot())

    @classmethod
    def resolve(cls, settings: Settings, *, repo: str | None = None, remote: str | None = None) -> ArchiverOptions:
        """Flags over `[archive]` in the config file (repo, remote, poll_interval, standby_interval,
        lease_seconds, batch, push_timeout, max_attempts, retry_base, retry_max_delay, …)."""
        section = settings.archive
        path = repo or section.get("repo")
        if not path:
            raise Invalid("no archive repository: pass --repo PATH or set [archive] repo in the config file")
        try:
            return cls(
                repo=Path(str(path)).expanduser().resolve(),
                remote=remote or section.get("remote") or None,
                poll_interval=float(section.get("poll_interval", cls.poll_interval)),
                standby_interval=float(section.get("standby_interval", cls.standby_interval)),
                lock_wait=float(section.get("lock_wait", cls.lock_wait)),
                lease=float(section.get("lease_seconds", cls.lease)),
                batch=int(section.get("batch", cls.batch)),
                push_timeout=float(section.get("push_timeout", cls.push_timeout)),
                retry=RetryStrategy.from_config(section),
                auto=AutoSnapshot.from_config(section),
            )
        except (TypeError, ValueError) as exc:
            raise Invalid(f"config [archive]: {exc}") from None


@dataclass(frozen=True)
class AutoSnapshot:
    """The automatic snapshot policy (`[archive]` auto_snapshot…): every `interval` seconds the active
    archiver snapshots each session of its projects that changed since its last snapshot (messages,
    meta, decisions, context) and is idle for `idle_seconds`, or holds `every_messages` messages beyond
    its last snapshot, so unsnapshotted work reaches git. 0 turns a rule off."""

    enabled: bool = True
    idle_seconds: float = 600.0
    every_messages: int = 500
    interval: float = 60.0
    batch: int = 200

    @classmethod
    def from_config(cls, section: dict[str, Any]) -> AutoSnapshot:
        enabled = section.get("auto_snapshot", cls.enabled)
        if not isinstance(enabled, bool):
            raise ValueError("auto_snapshot must be true or false")
        for key in ("auto_snapshot_idle_seconds", "auto_snapshot_every_messages", "auto_snapshot_interval",
                    "auto_snapshot_batch"):
            if isinstance(section.get(key), bool) or not isinstance(section.get(key, 0), int | float):
                raise ValueError(f"{key} must be a number, got {section.get(key)!r}")
        policy = cls(enabled=enabled,
                     idle_seconds=float(section.get("auto_snapshot_idle_seconds", cls.idle_seconds)),
                     every_messages=int(section.get("auto_snapshot_every_messages", cls.every_messages)),
                     interval=float(section.get("auto_snapshot_interval", cls.interval)),
                     batch=int(section.get("auto_snapshot_batch", cls.batch)))
        if policy.idle_seconds < 0 or policy.every_messages < 0 or policy.interval <= 0 \
                or not 1 <= policy.batch <= 10000:
            raise ValueError("auto_snapshot_idle_seconds and auto_snapshot_every_messages must be ≥ 0 (0: off), "
                             "auto_snapshot_interval > 0 and auto_snapshot_batch 1 to 10000")
        return policy

    @property
    def active(self) -> bool:
        return self.enabled and (self.idle_seconds > 0 or self.every_messages > 0)
