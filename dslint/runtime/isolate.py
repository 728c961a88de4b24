"""Run a measurement in a forked child process, under time limits, and clean up after it.

The child becomes the leader of its own process group, so every process it starts
(DataLoader workers, spawned ranks, a forkserver, multiprocessing's resource
tracker) can be killed with one ``killpg``, whether the measurement finished,
raised, crashed or hung. Its stdout/stderr go to a log file, so a dataset that
prints (or a worker traceback) never mixes with ``dslint verify``'s own output.

Inside the child, ``phase(name, limit)`` starts a new time limit (the parent
kills the child when a phase overruns) and ``progress(text)`` says how far it got,
which the parent quotes when it has to kill it.

No torch here: the parent that uses this never needs it.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
import traceback
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from typing import Any, Callable, Dict, List, Optional

#: the pipe to the parent, set in an isolated child
_CHANNEL = None
_LAST_PROGRESS = 0.0


def in_isolated_child() -> bool:
    return _CHANNEL is not None


def _send(message) -> None:
    if _CHANNEL is None:
        return
    try:
        _CHANNEL.send(message)
    except (OSError, ValueError):
        pass


def phase(name: str, limit: Optional[float] = None) -> None:
    """Start a named phase with its own time limit (seconds; None keeps the current one)."""
    _send(("phase", name, limit))


def progress(text: str, *, force: bool = False) -> None:
    """Report how far the current phase got (throttled to a few messages a second)."""
    global _LAST_PROGRESS
    now = time.monotonic()
    if force or now - _LAST_PROGRESS > 0.25:
        _LAST_PROGRESS = now
        _send(("progress", text))


@dataclass
class Outcome:
    ok: bool
    value: Any = None
    #: one line: "ValueError: ...", "timed out after 20 s in bad: fd-growth (epoch 1, 12 samples)"
    error: Optional[str] = None
    kind: str = "ok"  # ok | raised | timeout | died
    traceback: str = ""
    log_tail: str = ""
    seconds: float = 0.0
    phases: List[str] = field(default_factory=list)


def _child_main(conn, fn, args, kwargs, log_path) -> None:
    global _CHANNEL
    os.setpgid(0, 0)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    _CHANNEL = conn
    try:
        value = fn(*args, **(kwargs or {}))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        _send(("raised", describe(exc), traceback.format_exc()))
    else:
        try:
            conn.send(("ok", value))
        except Exception as exc:  # unpicklable result
            _send(("raised", f"probe result could not be sent: {type(exc).__name__}: {exc}", traceback.format_exc()))
    finally:
        try:
            conn.close()
        except OSError:
            pass


def describe(exc: BaseException) -> str:
    """``Type: message``, with the direct cause when there is one (torch chains the worker's signal)."""
    text = f"{type(exc).__name__}: {exc}".strip()
    cause = exc.__cause__
    if cause is not None and str(cause) and str(cause) not in text:
        text += f" (caused by {type(cause).__name__}: {str(cause).strip().splitlines()[0]})"
    return text


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class IsolatedRun:
    """One measurement in a child process; ``poll`` advances it, ``outcome`` is set when done."""

    def __init__(self, fn: Callable, args=(), kwargs=None, *, limit: float = 60.0, log_path: str,
                 on_event: Optional[Callable[[str, str], None]] = None):
        self.limit = limit
        self.log_path = log_path
        self.on_event = on_event
        self.outcome: Optional[Outcome] = None
        self.phase_name = "start"
        self.last_progress = ""
        self.phases: List[str] = []
        ctx = multiprocessing.get_context("fork")
        self._recv, send = ctx.Pipe(duplex=False)
        self.started = time.monotonic()
        self.deadline = self.started + limit
        self.proc = ctx.Process(target=_child_main, args=(send, fn, args, kwargs, log_path), daemon=False)
        self.proc.start()
        send.close()
        # the child makes itself a group leader; do it here too so there is no window
        try:
            os.setpgid(self.proc.pid, self.proc.pid)
        except (PermissionError, ProcessLookupError, OSError):
            pass

    # -- parent side ---------------------------------------------------------------
    def waitables(self) -> list:
        return [self._recv, self.proc.sentinel] if self.outcome is None else []

    def poll(self) -> bool:
        """Handle whatever the child sent; True once finished."""
        if self.outcome is not None:
            return True
        while True:
            try:
                ready = self._recv.poll()
            except (OSError, EOFError):
                ready = False
            if not ready:
                break
            try:
                message = self._recv.recv()
            except (EOFError, OSError):
                break
            kind = message[0]
            if kind == "phase":
                _, name, limit = message
                self.phase_name = name
                self.phases.append(name)
                self.last_progress = ""
                self.deadline = time.monotonic() + (limit if limit is not None else self.limit)
                self._event("phase", name)
            elif kind == "progress":
                self.last_progress = message[1]
                self._event("progress", message[1])
            elif kind == "ok":
                return self._finish(Outcome(True, value=message[1]))
            elif kind == "raised":
                return self._finish(Outcome(False, error=message[1], kind="raised", traceback=message[2]))
        if not self.proc.is_alive():
            # drain anything sent just before exit
            try:
                while self._recv.poll():
                    message = self._recv.recv()
                    if message[0] == "ok":
                        return self._finish(Outcome(True, value=message[1]))
                    if message[0] == "raised":
                        return self._finish(Outcome(False, error=message[1], kind="raised", traceback=message[2]))
            except (EOFError, OSError):
                pass
            code = self.proc.exitcode
            how = f"killed by signal {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
            where = f" in {self.phase_name}" + (f" ({self.last_progress})" if self.last_progress else "")
            return self._finish(Outcome(False, error=f"probe process died ({how}){where}", kind="died"))
        if time.monotonic() >= self.deadline:
            spent = time.monotonic() - self.started
            where = f" in {self.phase_name}" + (f" ({self.last_progress})" if self.last_progress else "")
            return self._finish(Outcome(False, error=f"timed out after {spent:.0f} s{where}", kind="timeout"))
        return False

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def _event(self, kind: str, text: str) -> None:
        if self.on_event is not None:
            self.on_event(kind, text)

    def _finish(self, outcome: Outcome) -> bool:
        outcome.seconds = time.monotonic() - self.started
        outcome.phases = list(self.phases)
        if outcome.kind in ("timeout",):
            kill_group(self.proc.pid)
        else:
            self.proc.join(timeout=5)
        kill_group(self.proc.pid)  # stragglers: workers, spawned ranks, trackers
        self.proc.join(timeout=5)
        if self.proc.is_alive():  # pragma: no cover - SIGKILL could not be delivered
            self.proc.kill()
            self.proc.join(timeout=5)
        try:
            self._recv.close()
        except OSError:
            pass
        outcome.log_tail = _tail(self.log_path)
        self.outcome = outcome
        return True

    def kill(self) -> None:
        if self.outcome is None:
            self._finish(Outcome(False, error="interrupted", kind="timeout"))


def _tail(path: str, lines: int = 40) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 16384))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def run_isolated(fn: Callable, args=(), kwargs=None, *, limit: float = 60.0, log_path: Optional[str] = None) -> Outcome:
    """Run ``fn(*args, **kwargs)`` in a forked child; never hangs longer than its phase limits."""
    import tempfile

    own_log = log_path is None
    if own_log:
        handle, log_path = tempfile.mkstemp(prefix="dslint-probe-", suffix=".log")
        os.close(handle)
    run = IsolatedRun(fn, args, kwargs, limit=limit, log_path=log_path)
    try:
        while not run.poll():
            wait(run.waitables(), timeout=min(0.5, max(0.01, run.remaining())))
    finally:
        run.kill()
        if own_log:
            try:
                os.unlink(log_path)
            except OSError:
                pass
    return run.outcome


def run_many(jobs: List[Dict[str, Any]], *, parallel: int = 1,
             on_done: Optional[Callable[[Dict[str, Any], Outcome], None]] = None) -> None:
    """Run isolated jobs ({fn, args, kwargs, limit, log_path, exclusive}), at most ``parallel`` at a time.

    Exclusive jobs (timing-sensitive ones) run alone.
    """
    pending = list(jobs)
    active: List[tuple] = []
    try:
        while pending or active:
            while pending:
                job = pending[0]
                exclusive = job.get("exclusive", False)
                busy_exclusive = any(j.get("exclusive") for j, _ in active)
                if busy_exclusive or (exclusive and active) or len(active) >= parallel:
                    break
                pending.pop(0)
                run = IsolatedRun(job["fn"], job.get("args", ()), job.get("kwargs"), limit=job.get("limit", 60.0),
                                  log_path=job["log_path"], on_event=job.get("on_event"))
                active.append((job, run))
            waitables = [w for _, run in active for w in run.waitables()]
            timeout = min([0.5] + [run.remaining() for _, run in active])
            if waitables:
                wait(waitables, timeout=max(0.01, timeout))
            still = []
            for job, run in active:
                if run.poll():
                    if on_done is not None:
                        on_done(job, run.outcome)
                else:
                    still.append((job, run))
            active = still
    finally:
        for _, run in active:
            run.kill()
