"""Paths the user names: an input that is not a file said to be what it is, and the files a
user asked for written all or nothing (checked first, staged, then renamed).

Every output worldsim writes at a path the user names (pages, cards, labels, reports, graphs,
locks, keys) goes through :func:`write_files`, so a path that cannot be written is one
``ConfigError`` naming it and the system's reason, never a traceback, and a failure leaves
nothing half-written.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import stat
from collections.abc import Collection, Iterable, Iterator, Mapping
from pathlib import Path

from worldsim.domain.errors import ConfigError

__all__ = [
    "check_file_targets",
    "check_folder_target",
    "flock_holder",
    "held_folder",
    "make_folder",
    "missing_file",
    "staging_folder",
    "write_files",
]

_OPEN_MODE = 0o666
"""What a plain ``open()`` creates a file with, before the umask takes its bits away."""
_PRIVATE_MODE = 0o600
_TEMP_NAME_CHARS = 64
"""A target's name is cut to this many characters in its temporary sibling's name, so that a
long name the file system takes does not become a temporary name it refuses."""


def missing_file(
    p: Path, what: str, error: type[ConfigError] = ConfigError, *, field: str | None = None
) -> ConfigError:
    """The error for an input file ``p`` (a ``what``, given as ``field``) that is not there:
    a folder is said to be one."""
    if p.is_dir():
        return error("is a folder, not a file", file=p, field=field)
    return error(f"{what} not found", file=p, field=field)


def _kind(path: Path, target: Path) -> str | None:
    """``"folder"``, ``"file"`` or None (nothing there) for ``path``; a path the system
    cannot look at (a name too long, a folder it may not search) is a ConfigError naming
    ``target``."""
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise ConfigError(f"cannot write: {exc.strerror or exc}", file=target) from None
    return "folder" if stat.S_ISDIR(mode) else "file"


def _file_in_the_way(path: Path) -> Path | None:
    """The nearest existing folder of ``path`` if it is not a folder (a file is where a
    folder must be), else None."""
    for folder in path.parents:
        kind = _kind(folder, path)
        if kind is not None:
            return None if kind == "folder" else folder
    return None


def check_folder_target(path: Path, field: str) -> None:
    """Refuse, before anything is written, an output folder that is a file or lies under
    one (a ConfigError naming it and ``field``)."""
    blocking = path if _kind(path, path) == "file" else _file_in_the_way(path)
    if blocking is not None:
        raise ConfigError("a file is where a folder must be", file=blocking, field=field)


def check_file_targets(paths: Iterable[Path]) -> None:
    """Refuse, before anything is written, an output file that is a folder or lies under a
    file, or that the system cannot look at (a ConfigError naming it)."""
    for path in paths:
        if _kind(path, path) == "folder":
            raise ConfigError("cannot write: is a folder, not a file", file=path)
        blocking = _file_in_the_way(path)
        if blocking is not None:
            raise ConfigError(f"cannot write: {blocking} is a file, not a folder", file=path)


def make_folder(folder: Path) -> list[Path]:
    """Create ``folder`` and its missing parents; the folders created, outermost first.

    A folder that cannot be created is a ConfigError naming it and the system's reason.
    """
    missing: list[Path] = []
    for f in (folder, *folder.parents):
        if _kind(f, folder) == "folder":
            break
        missing.append(f)
    created: list[Path] = []
    for f in reversed(missing):
        try:
            f.mkdir()
        except FileExistsError:
            if not f.is_dir():
                _remove_folders(created)
                raise ConfigError(
                    "cannot create the folder: a file is in the way", file=f
                ) from None
        except OSError as exc:
            _remove_folders(created)
            raise ConfigError(f"cannot create the folder: {exc.strerror or exc}", file=f) from None
        else:
            created.append(f)
    return created


def flock_holder(fd: int) -> int | None:
    """The process holding a ``flock`` on ``fd``'s file, read from ``/proc/locks`` (Linux)."""
    st = os.fstat(fd)
    inode = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        table = Path("/proc/locks").read_text()
    except OSError:
        return None
    for row in table.splitlines():
        cols = row.split()
        if len(cols) > 5 and cols[1] == "FLOCK" and cols[5] == inode and cols[4].isdigit():
            return int(cols[4])
    return None


@contextlib.contextmanager
def held_folder(folder: Path, lock_name: str, busy: str) -> Iterator[None]:
    """Hold ``folder`` (created if missing) under an exclusive ``flock`` on its file
    ``lock_name`` for the block: one writer at a time. Another process holding it is a
    ConfigError ``busy (pid N)`` naming the folder, raised at once; a folder this call created
    is removed again when nothing but the lock file was put in it."""
    created = make_folder(folder)
    lock = folder / lock_name
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        _remove_folders(created)
        raise ConfigError(f"cannot write: {exc.strerror or exc}", file=lock) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = flock_holder(fd)
            raise ConfigError(busy + (f" (pid {pid})" if pid else ""), file=folder) from None
        yield
    finally:
        os.close(fd)
        if created and [p.name for p in folder.iterdir()] == [lock_name]:
            lock.unlink(missing_ok=True)
            _remove_folders(created)


def _remove_folders(created: list[Path]) -> None:
    """Remove the folders :func:`make_folder` created, innermost first, where still empty."""
    for f in reversed(created):
        with contextlib.suppress(OSError):
            f.rmdir()


def staging_folder(target: Path) -> Path:
    """A new empty folder beside ``target`` (creating its parents), to fill and then rename
    onto ``target``; made with the mode ``mkdir`` gives (0777 less the umask), where
    ``tempfile.mkdtemp`` would give 0700. A ConfigError names ``target`` if it cannot be made."""
    make_folder(target.parent)
    for _ in range(100):
        folder = target.with_name(f".{target.name[:_TEMP_NAME_CHARS]}.{secrets.token_hex(6)}")
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        except OSError as exc:
            raise ConfigError(f"cannot write: {exc.strerror or exc}", file=target) from None
        return folder
    raise ConfigError("cannot write: no free temporary name beside it", file=target)


def _stage(path: Path, content: bytes, mode: int) -> Path:
    """Write ``content`` to a new temporary sibling of ``path``, created with ``mode`` less
    the umask (as ``open()`` creates a file); its path."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = path.with_name(f".{path.name[:_TEMP_NAME_CHARS]}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(tmp, flags, mode)
        except FileExistsError:
            continue
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(content)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return tmp
    raise FileExistsError(f"no free temporary name beside {path}")


def write_files(files: Mapping[Path, bytes], *, private: Collection[Path] = ()) -> None:
    """Write ``files`` (path → bytes) all or nothing, as far as a file system allows.

    Every target is checked before anything is written (one that is a folder, or lies under
    a file, is refused); their missing folders are created; each file is staged whole in a
    temporary sibling; then the temporaries are renamed onto the targets. A reader never sees
    a partly written file. Any failure before the renames removes every temporary and every
    folder created here, so no target is changed; a failure of a rename itself (the file
    system failing between two renames) leaves the targets renamed before it written. Nothing
    is flushed to disk: a crash of the machine may lose what was written.

    A file gets the mode ``open()`` would give a new one (0666 less the umask); a path in
    ``private`` gets 0600. A path that cannot be written is a ConfigError naming it and the
    system's reason ("cannot write: Permission denied").
    """
    check_file_targets(files)
    created: list[Path] = []
    staged: list[tuple[Path, Path]] = []
    done = 0  # staged files renamed onto their targets
    current: Path | None = None
    try:
        for current, content in files.items():
            created += make_folder(current.parent)
            mode = _PRIVATE_MODE if current in private else _OPEN_MODE
            staged.append((_stage(current, content, mode), current))
        for renamed, (tmp, current) in enumerate(staged, start=1):
            os.replace(tmp, current)
            done = renamed
    except BaseException as exc:
        for tmp, _ in staged[done:]:
            with contextlib.suppress(OSError):
                tmp.unlink()
        _remove_folders(created)
        if isinstance(exc, OSError) and current is not None:
            raise ConfigError(f"cannot write: {exc.strerror or exc}", file=current) from None
        raise
