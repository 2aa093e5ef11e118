"""A dispatch as the executor reads it, and the state of a run executing here."""

import json
import threading
from dataclasses import dataclass
from typing import Any, Optional, Tuple

from .results import Result
from .run import Run


@dataclass(frozen=True)
class Dispatch:
    """A dispatch body's fields (unknown ones ignored)."""

    request_id: str
    task_id: int
    attempt: int
    scheduled_at: str
    callback_token: str
    params: Any
    callback_url: Optional[str]
    log_url: Optional[str]
    shard_index: int
    shard_total: int

    @classmethod
    def parse(cls, body: bytes) -> "Dispatch":
        """Raises ValueError saying what is wrong."""
        fields = json.loads(body)
        if not isinstance(fields, dict):
            raise ValueError("the body is not a JSON object")

        def need(name: str, kind: type) -> Any:
            value = fields.get(name)
            if not isinstance(value, kind) or isinstance(value, bool):
                raise ValueError(f"{name} missing or not a {kind.__name__}")
            return value

        def maybe(name: str, kind: type, default: Any) -> Any:
            return fields[name] if isinstance(fields.get(name), kind) else default

        return cls(
            request_id=need("requestId", str),
            task_id=need("taskId", int),
            attempt=need("attempt", int),
            scheduled_at=need("scheduledAt", str),
            callback_token=need("callbackToken", str),
            params=fields.get("params", {}),
            callback_url=maybe("callbackUrl", str, None),
            log_url=maybe("logUrl", str, None),
            shard_index=maybe("shardIndex", int, 0),
            shard_total=maybe("shardTotal", int, 1),
        )


class Flight:
    """A run executing here, from its first delivery until its result is reported.

    ``lock`` orders the three ends that can race: the handler finishing, the first delivery's
    wait for it running out (then it answers 202), and shutdown interrupting it. Whoever
    settles the result decides whether the waiting reply carries it or a callback must.
    """

    def __init__(self, dispatch: Dispatch, ax_url: str) -> None:
        self.request_id = dispatch.request_id
        self.first_attempt = dispatch.attempt
        self.lock = threading.Lock()
        self.settled = threading.Event()  # result known (or the run interrupted)
        self.reported = threading.Event()  # result replied, called back, or given up
        self.result: Optional[Result] = None
        self.interrupted = False
        self.reply_waiting = True  # the first delivery still waits to answer with the result
        self.run: Optional[Run[Any]] = None
        self._ax_url = ax_url
        self.latest = dispatch  # the newest delivery: results and log lines are for it

    def redelivered(self, dispatch: Dispatch) -> None:
        with self.lock:
            if dispatch.attempt > self.latest.attempt:
                self.latest = dispatch

    def log_target(self) -> Tuple[str, str, int]:
        with self.lock:
            latest = self.latest
        url = latest.log_url or f"{self._ax_url}/api/instances/{self.request_id}/log"
        return url, latest.callback_token, latest.attempt

    def settle(self, result: Result, interrupted: bool = False) -> Optional[Dispatch]:
        """Records the result once; answers the delivery to call back, or None when the
        waiting reply carries it (or it was settled already)."""
        with self.lock:
            if self.settled.is_set():
                return None
            self.result = result
            self.interrupted = interrupted
            self.settled.set()
            if self.reply_waiting and self.latest.attempt == self.first_attempt:
                return None
            return self.latest

    def reply_result(self, within: float) -> Optional[Result]:
        """Waits up to ``within`` for the result; None (and no longer waiting) if not there."""
        self.settled.wait(within)
        with self.lock:
            if self.result is None:
                self.reply_waiting = False
            return self.result
