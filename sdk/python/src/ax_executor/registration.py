"""Membership of an executor group: register, heartbeat, leave (protocol.md, "Registration,
heartbeats and removal")."""

import logging
import threading
from typing import Any, Dict, Optional
from urllib.parse import quote

from . import _http

log = logging.getLogger("ax_executor")

DEFAULT_HEARTBEAT_SECS = 10.0


class Registration:
    """Keeps ``url`` a member of ``group`` while started: ax drops a member it has not heard
    from for a while (30 s by default), so the registration is repeated every
    ``heartbeatSecs`` that ax answers."""

    def __init__(
        self,
        ax_url: str,
        group: str,
        url: str,
        token: Optional[str] = None,
        capacity: Optional[int] = None,
    ) -> None:
        self._members = f"{ax_url.rstrip('/')}/api/executors/{quote(group, safe='')}/members"
        self.group = group
        self.url = url
        self._token = token
        self._body: Dict[str, Any] = {"url": url}
        if capacity is not None:
            self._body["capacity"] = capacity
        self.heartbeat_secs = DEFAULT_HEARTBEAT_SECS
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> bool:
        """Registers now (so a caller knows whether ax took it) and starts the heartbeats;
        answers whether this first registration succeeded. A failure is retried at each beat:
        ax may be starting or restarting."""
        joined = self.beat()
        self._thread = threading.Thread(target=self._loop, name="ax-heartbeat", daemon=True)
        self._thread.start()
        return joined

    def beat(self) -> bool:
        answer = _http.call("POST", self._members, self._body, self._token)
        if answer.status in (200, 201):
            if isinstance(answer.body, dict) and answer.body.get("heartbeatSecs"):
                self.heartbeat_secs = float(answer.body["heartbeatSecs"])
            if answer.status == 201:
                log.info("joined group %s as %s", self.group, self.url)
            return True
        # 401/403 (a token missing, wrong, or not for this group) will not heal by itself.
        level = logging.ERROR if answer.status in (401, 403) else logging.WARNING
        log.log(level, "registration in group %s failed (%s), again in %.0f s", self.group,
                answer.reason(), self.heartbeat_secs)
        return False

    def close(self) -> None:
        """Stops the heartbeats and leaves the group, so ax stops routing runs here."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        answer = _http.call("DELETE", f"{self._members}?url={quote(self.url, safe='')}",
                            token=self._token)
        if answer.status == 204:
            log.info("left group %s", self.group)
        else:  # it expires on its own after executors.member_ttl_secs
            log.warning("leaving group %s failed: %s", self.group, answer.reason())

    def _loop(self) -> None:
        while not self._stop.wait(self.heartbeat_secs):
            self.beat()
