"""Reporting a result to ax by callback, with retries (protocol.md, "Callback").

A callback is safe to send again (ax counts a result once), so anything that may be transient
(no connection, 429, 5xx: ax restarting, its store failing over) is retried with back-off;
an answer saying the call itself is wrong (400/403/404/409) is final.
"""

import logging
import random
import threading
from typing import Any, Callable, Dict, Iterator, Optional

from . import _http
from .results import Result

log = logging.getLogger("ax_executor")


def backoff(
    initial: float = 0.5,
    maximum: float = 30.0,
    total: float = 600.0,
    rand: Callable[[], float] = random.random,
) -> Iterator[float]:
    """The waits between tries: ``initial`` doubling up to ``maximum``, each with jitter (a
    random half to whole of it, so executors that lost ax together do not call back in
    step), ending once their sum would pass ``total``."""
    spent = 0.0
    step = initial
    while True:
        wait = step * (0.5 + rand() / 2)
        if spent + wait > total:
            return
        spent += wait
        yield wait
        step = min(step * 2, maximum)


def callback_body(request_id: str, token: str, attempt: int, result: Result) -> Dict[str, Any]:
    return {"requestId": request_id, "callbackToken": token, "attempt": attempt,
            **result.to_dict()}


def send_callback(
    url: str,
    body: Dict[str, Any],
    *,
    retry_for: float = 600.0,
    stop: Optional[threading.Event] = None,
    sleep: Optional[Callable[[float], Any]] = None,
) -> bool:
    """POSTs ``body`` to ``url`` until ax takes it, refuses it for good, or ``retry_for``
    seconds of back-off are spent. Answers whether ax took it. ``stop`` set cuts the waits
    short (shutdown); ``sleep`` replaces them (tests)."""
    wait = sleep or (stop.wait if stop is not None else threading.Event().wait)
    what = f"callback for request {body['requestId']} attempt {body['attempt']}"
    waits = backoff(total=retry_for)
    while True:
        answer = _http.call("POST", url, body)
        if answer.status == 200:
            state = answer.body.get("status") if isinstance(answer.body, dict) else None
            log.info("%s (%s): ax says %s", what, body["status"], state)
            return True
        if not answer.retryable:
            log.error("%s refused, not sent again: %s", what, answer.reason())
            return False
        pause = next(waits, None)
        if pause is None:
            log.error("%s: gave up after %.0f s: %s", what, retry_for, answer.reason())
            return False
        log.warning("%s failed (%s), again in %.1f s", what, answer.reason(), pause)
        if wait(pause) is True:  # Event.wait answers True once stop is set
            log.error("%s: shutting down, given up: %s", what, answer.reason())
            return False
