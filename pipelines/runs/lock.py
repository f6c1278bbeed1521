"""A run folder belongs to one process at a time: the lock file `run.lock` holds its owner's pid and host.

Taken when a training starts and released when it ends. While held, a heartbeat thread refreshes the file's
modification time every HEARTBEAT_S seconds, so a lock whose owner died can be told from a live one:
- on the same host, the owner's pid is gone (or its heartbeat is older than STALE_AFTER_S: the pid was reused);
- on another host (a SLURM task requeued on a different node), the heartbeat is older than STALE_AFTER_S.
A stale lock is taken over; a live one is refused with RunLockedError naming the owner.
"""

from __future__ import annotations

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

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, kind: type | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.release()

    def acquire(self) -> None:
        owner = {"pid": os.getpid(), "host": socket.gethostname(), "since": datetime.now(timezone.utc).isoformat()}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            try:
                descriptor = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                self._remove_if_stale()  # or RunLockedError; then try again to create ours
            else:
                with os.fdopen(descriptor, "w") as handle:
                    json.dump(owner, handle)
                break
        self._heartbeat = threading.Thread(target=self._beat, name="run-lock-heartbeat", daemon=True)
        self._heartbeat.start()

    def release(self) -> None:
        self._stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join()
        self.path.unlink(missing_ok=True)

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                os.utime(self.path)
            except FileNotFoundError:
                return

    def _remove_if_stale(self) -> None:
        """Remove a stale lock; raise RunLockedError for a live one."""
        try:
            owner = json.loads(self.path.read_text())
            beat = self.path.stat().st_mtime
        except FileNotFoundError:
            return  # released meanwhile
        except (json.JSONDecodeError, UnicodeDecodeError):
            owner, beat = {}, 0.0  # half-written by a process killed while creating it: stale
        silent = time.time() - beat
        same_host = owner.get("host") == socket.gethostname()
        alive = silent < STALE_AFTER_S and (not same_host or _pid_alive(int(owner.get("pid", -1))))
        if alive:
            raise RunLockedError(
                f"{self.path.parent}: in use by pid {owner.get('pid')} on {owner.get('host')} since "
                f"{owner.get('since')} (lock {self.path}, last heartbeat {silent:.0f} s ago); a run folder belongs to "
                f"one process at a time. Wait for it, or stop that process; a lock left by a dead process is taken "
                f"over automatically (same host: at once; another host: after {STALE_AFTER_S:.0f} s without heartbeat)"
            )
        self.path.unlink(missing_ok=True)
