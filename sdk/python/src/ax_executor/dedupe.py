"""Which runs were taken, keyed by ``requestId``.

ax delivers at least once: the same run (same ``requestId``) comes again after a timeout, a lost
reply or a crash of either side. The store makes each run execute once per executor: a
re-delivery while the run works is told so, one after it ends gets the kept result.
"""

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Dict, Optional, Protocol, Tuple

from .results import Result


NEW = "new"
RUNNING = "running"
DONE = "done"


@dataclass(frozen=True)
class Claim:
    """What :meth:`DedupeStore.claim` found: ``state`` is ``"new"`` (the caller now owns the
    run), ``"running"`` (another delivery works on it) or ``"done"`` (with its ``result``)."""

    state: str
    result: Optional[Result] = None

    @classmethod
    def new(cls) -> "Claim":
        return cls(NEW)

    @classmethod
    def running(cls) -> "Claim":
        return cls(RUNNING)

    @classmethod
    def done(cls, result: Result) -> "Claim":
        return cls(DONE, result)


class DedupeStore(Protocol):
    """The three operations the executor needs; implement them to keep runs elsewhere (a
    database table shared by the replicas of a group, say). Called from several threads."""

    def claim(self, request_id: str) -> Claim:
        """Atomically: mark ``request_id`` running if unknown (``Claim.new()``), else say
        what it is."""
        ...

    def finish(self, request_id: str, result: Result) -> None:
        """The run ended with ``result``: later claims get ``Claim.done(result)``."""
        ...

    def release(self, request_id: str) -> None:
        """Forget ``request_id`` (a run interrupted by shutdown), so a re-delivery runs it."""
        ...


class MemoryDedupe:
    """The default store: in this process's memory, so it dedupes the deliveries this process
    receives (a restart forgets; ax's retry then runs the job again).

    Finished results are kept ``ttl`` seconds (24 h: far longer than ax retries a run) and at
    most ``max_entries`` in all, the oldest finished dropped first. Running runs are never
    dropped: their number is bounded by the work in flight.
    """

    def __init__(
        self,
        ttl: float = 24 * 3600,
        max_entries: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self._clock = clock
        self._lock = threading.Lock()
        self._running: Dict[str, None] = {}
        # Finished runs in the order they finished, each with when: the front is the oldest.
        self._done: "OrderedDict[str, Tuple[float, Result]]" = OrderedDict()

    def claim(self, request_id: str) -> Claim:
        with self._lock:
            self._expire()
            if request_id in self._running:
                return Claim.running()
            kept = self._done.get(request_id)
            if kept is not None:
                return Claim.done(kept[1])
            self._running[request_id] = None
            self._trim()
            return Claim.new()

    def finish(self, request_id: str, result: Result) -> None:
        with self._lock:
            self._running.pop(request_id, None)
            self._done.pop(request_id, None)
            self._done[request_id] = (self._clock(), result)
            self._trim()

    def release(self, request_id: str) -> None:
        with self._lock:
            self._running.pop(request_id, None)
            self._done.pop(request_id, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._running) + len(self._done)

    def _expire(self) -> None:
        cutoff = self._clock() - self.ttl
        while self._done:
            request_id, (finished_at, _) = next(iter(self._done.items()))
            if finished_at > cutoff:
                break
            del self._done[request_id]

    def _trim(self) -> None:
        while self._done and len(self._running) + len(self._done) > self.max_entries:
            self._done.popitem(last=False)
