"""A small JSON client over urllib, for the executor's calls to ax."""

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Dict, Optional

# Long enough for a loaded ax to commit a result; short enough that a hung one is retried.
TIMEOUT_SECS = 10.0


@dataclass(frozen=True)
class Answer:
    """An HTTP answer; ``status`` 0 when no answer came (connection refused, reset, timeout)."""

    status: int
    body: Any = None
    error: str = ""

    @property
    def retryable(self) -> bool:
        """Whether sending the same call again may succeed: no answer, 429 or a 5xx."""
        return self.status == 0 or self.status == 429 or self.status >= 500

    def reason(self) -> str:
        """What went wrong, for a log line: ax's error message when it sent one."""
        if self.error:
            return self.error
        if isinstance(self.body, dict) and isinstance(self.body.get("error"), dict):
            return f"HTTP {self.status}: {self.body['error'].get('message', '')}"
        return f"HTTP {self.status}"


def call(
    method: str,
    url: str,
    body: Optional[Dict[str, Any]] = None,
    token: Optional[str] = None,
    timeout: float = TIMEOUT_SECS,
) -> Answer:
    """Sends one request and reads its answer to the end; never raises for HTTP or network
    errors (they come back as an :class:`Answer`)."""
    headers = {"Accept": "application/json"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return Answer(response.status, _json(response.read()))
    except urllib.error.HTTPError as error:
        with error:
            return Answer(error.code, _json(error.read()))
    except (OSError, ValueError) as error:  # URLError, timeouts, resets; a bad URL
        return Answer(0, error=f"{type(error).__name__}: {error}")


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None
