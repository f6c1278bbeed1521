"""A run folder belongs to one process at a time: the lock file `run.lock` holds its owner's pid and host.

Taken when a training starts and released when it ends. The owner holds an OS lock on the file (flock) for as long
as it owns the folder: competitors on this host are excluded by the kernel, which also frees the lock the moment
the owner dies, however it dies. The JSON in the file is information (who owns it, since when) and the evidence
across hosts, where another machine's flock may not be visible (NFS): while held, a heartbeat thread refreshes the
file's modification time every HEARTBEAT_S seconds, so a lock whose owner died can be told from a live one:
- on the same host, the owner's pid is gone (or its heartbeat is older than STALE_AFTER_S: the pid was reused);
- on another host (a SLURM task requeued on a different node), the heartbeat is older than STALE_AFTER_S.
A stale lock is taken over; a live one is refused with RunLockedError naming the owner.

Exclusive, because every decision is taken under the flock: a process reads the owner and writes its own while it
holds it, so no competitor ever sees a half-written file and removes a live lock for a stale one. Released by
removing the file while still holding the flock; a competitor that opened the removed file finds, once it gets the
flock, that the path names another file (or none) and starts again.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType

LOCK = "run.lock"
HEARTBEAT_S = 30.0
STALE_AFTER_S = 300.0
LOCKED_EXIT = 75  # EX_TEMPFAIL: `pipelines.train`'s exit status for a folder another process holds (a sweep reads it)
BUSY_WAIT_S = 30.0  # how long to wait on a flock held by a process that has not yet written its name


class RunLockedError(RuntimeError):
    """Another live process holds the run folder."""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by another user
        return True
    return True


class RunLock:
    """`with RunLock(folder):` holds `folder/run.lock` for this process (see the module docstring)."""

    def __init__(self, folder: Path) -> None:
        self.path = Path(folder) / LOCK
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None
        self._fd: int | None = None

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, kind: type | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.release()

    def acquire(self) -> None:
        owner = {"pid": os.getpid(), "host": socket.gethostname(), "since": datetime.now(timezone.utc).isoformat()}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        busy_since: float | None = None
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # held by a live process of this host: the owner, or a competitor deciding
                os.close(fd)
                self._refuse_if_live(self._read(), busy=True)
                busy_since = busy_since or time.monotonic()
                if time.monotonic() - busy_since > BUSY_WAIT_S:
                    raise RunLockedError(
                        f"{self.path.parent}: in use by a process of this host that holds {self.path} without "
                        f"naming itself in it for {BUSY_WAIT_S:.0f} s; a run folder belongs to one process at a time"
                    ) from None
                time.sleep(0.05)
                continue
            except OSError as err:
                os.close(fd)
                if err.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                    raise OSError(
                        err.errno, f"{self.path}: this file system offers no file locks (flock): {err.strerror}"
                    ) from err
                raise
            try:
                if not self._same_file(fd):  # released (removed) after we opened it: start again
                    os.close(fd)
                    continue
                self._refuse_if_live(self._read(fd), busy=False)
                os.ftruncate(fd, 0)
                os.pwrite(fd, json.dumps(owner).encode(), 0)
                os.fsync(fd)
            except BaseException:
                os.close(fd)  # and with it the flock
                raise
            self._fd = fd
            break
        self._stop.clear()
        self._heartbeat = threading.Thread(target=self._beat, name="run-lock-heartbeat", daemon=True)
        self._heartbeat.start()

    def release(self) -> None:
        self._stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join()
            self._heartbeat = None
        if self._fd is not None:
            owner, _ = self._read(self._fd)
            mine = owner is not None and (owner.get("pid"), owner.get("host")) == (os.getpid(), socket.gethostname())
            if mine and self._same_file(self._fd):
                self.path.unlink(missing_ok=True)  # under the flock: see the module docstring
            os.close(self._fd)
            self._fd = None

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                os.utime(self.path)
            except FileNotFoundError:
                return

    def _same_file(self, fd: int) -> bool:
        try:
            return os.path.samestat(os.fstat(fd), os.stat(self.path))
        except FileNotFoundError:
            return False

    def _read(self, fd: int | None = None) -> tuple[dict | None, float]:
        """The owner the lock file names (None: empty, half-written or unreadable) and its last heartbeat."""
        try:
            if fd is None:
                raw, beat = self.path.read_bytes(), self.path.stat().st_mtime
            else:
                raw, beat = os.pread(fd, 1 << 16, 0), os.fstat(fd).st_mtime
        except FileNotFoundError:
            return None, 0.0
        try:
            owner = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None, beat
        return (owner, beat) if isinstance(owner, dict) and "pid" in owner else (None, beat)

    def _refuse_if_live(self, found: tuple[dict | None, float], busy: bool) -> None:
        """Raise RunLockedError if the lock names a live owner. A lock without a name is stale when its flock is free
        (a process killed while creating it), and a competitor about to write its name when the flock is `busy`."""
        owner, beat = found
        if owner is None:
            return
        silent = time.time() - beat
        same_host = owner.get("host") == socket.gethostname()
        try:
            pid = int(owner.get("pid", -1))
        except (TypeError, ValueError):
            pid = -1
        alive = silent < STALE_AFTER_S and (not same_host or _pid_alive(pid))
        if alive or (busy and same_host and pid > 0 and _pid_alive(pid)):
            raise RunLockedError(
                f"{self.path.parent}: in use by pid {owner.get('pid')} on {owner.get('host')} since "
                f"{owner.get('since')} (lock {self.path}, last heartbeat {silent:.0f} s ago); a run folder belongs to "
                f"one process at a time. Wait for it, or stop that process; a lock left by a dead process is taken "
                f"over automatically (same host: at once; another host: after {STALE_AFTER_S:.0f} s without heartbeat)"
            )
