"""A run's log lines and progress, sent to ax in batches (protocol.md, "Log lines and
progress").

Lines are buffered so that a chatty job makes a few calls, not one per line: a batch goes every
``FLUSH_SECS`` or as soon as ``BATCH_LINES`` wait, and everything left goes before the result
(so the run's page has the whole log when it turns final). A log call failing never fails the
job: it is tried a couple of times, then dropped with a warning.
"""

import logging
import threading
import time
import weakref
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import _http

log = logging.getLogger("ax_executor")

FLUSH_SECS = 0.5
BATCH_LINES = 100
# ax takes at most 1,000 lines a call, counted once split on newlines.
MAX_LINES_PER_CALL = 1000
RETRY_WAITS = (0.2, 0.5)

#: Where and as what a batch goes: (log URL, callbackToken, attempt), asked at each send so
#: that lines follow the newest delivery of the run.
Target = Callable[[], Tuple[str, str, int]]


class LogBuffer:
    """One run's pending lines and progress."""

    def __init__(self, request_id: str, target: Target, shipper: "LogShipper") -> None:
        self.request_id = request_id
        self._target = target
        self._shipper = shipper
        self._lock = threading.Lock()  # guards the pending lines and progress
        self._send_lock = threading.Lock()  # one batch at a time, so lines stay in order
        self._lines: List[str] = []
        self._progress: Optional[int] = None
        self._closed = False  # ax said 409: the run's log is closed
        shipper.watch(self)

    def add(self, lines: Tuple[Any, ...]) -> None:
        # One string may hold several lines; ax counts them split, and so does the batching.
        split = [part for line in lines for part in str(line).split("\n")]
        with self._lock:
            self._lines.extend(split)
            full = len(self._lines) >= BATCH_LINES
        if full:
            self._shipper.wake()

    def set_progress(self, percent: int) -> None:
        with self._lock:
            self._progress = max(0, min(100, int(percent)))

    @property
    def pending(self) -> bool:
        with self._lock:
            return bool(self._lines) or self._progress is not None

    def flush(self) -> None:
        """Sends everything pending, now, on the caller's thread."""
        with self._send_lock:
            while True:
                with self._lock:
                    lines = self._lines[:MAX_LINES_PER_CALL]
                    del self._lines[:MAX_LINES_PER_CALL]
                    progress, self._progress = self._progress, None
                if not lines and progress is None:
                    return
                self._send(lines, progress)

    def _send(self, lines: List[str], progress: Optional[int]) -> None:
        if self._closed:
            return
        url, token, attempt = self._target()
        body: Dict[str, Any] = {"callbackToken": token, "attempt": attempt}
        if lines:
            body["lines"] = lines
        if progress is not None:
            body["progress"] = progress
        for pause in (*RETRY_WAITS, None):
            answer = _http.call("POST", url, body)
            if answer.status == 200:
                return
            if answer.status == 409:
                self._closed = True
                log.warning("log of request %s closed by ax: %s", self.request_id,
                            answer.reason())
                return
            if not answer.retryable or pause is None:
                break
            time.sleep(pause)
        log.warning("log of request %s: %d lines dropped (%s)", self.request_id, len(lines),
                    answer.reason())


class LogShipper:
    """One thread for the executor that sends every run's pending lines each ``FLUSH_SECS``
    (or at once when a run has ``BATCH_LINES`` waiting)."""

    def __init__(self) -> None:
        # Weak: a run's buffer goes away with the run, flushed by it before its result.
        self._buffers: "weakref.WeakSet[LogBuffer]" = weakref.WeakSet()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ax-log-shipper", daemon=True)
        self._thread.start()

    def watch(self, buffer: LogBuffer) -> None:
        with self._lock:
            self._buffers.add(buffer)

    def wake(self) -> None:
        self._wake.set()

    def close(self) -> None:
        """Sends what is pending and stops the thread."""
        self._stop.set()
        self._wake.set()
        self._thread.join()

    def _loop(self) -> None:
        while True:
            self._wake.wait(FLUSH_SECS)
            self._wake.clear()
            with self._lock:
                buffers = [buffer for buffer in self._buffers if buffer.pending]
            for buffer in buffers:
                buffer.flush()
            if self._stop.is_set():
                return
