"""The HTTP side: takes ax's POSTs and writes the answers the executor decides.

Only transport concerns live here (methods, paths, body size, writing the reply); what a
dispatch means is the executor's (``executor.py``).
"""

import json
import logging
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Collection, Dict, Optional, Protocol, Tuple
from urllib.parse import urlsplit

log = logging.getLogger("ax_executor")

#: Largest dispatch body taken; ax sends params of at most 64 KiB, so this is generous.
MAX_BODY = 1024 * 1024
DISCARD_LIMIT = 8 * MAX_BODY
PROTOCOL_VERSION = "1"


@dataclass
class Reply:
    status: int
    body: Optional[Dict[str, Any]] = None
    headers: Dict[str, str] = field(default_factory=dict)


def error(status: int, message: str) -> Reply:
    return Reply(status, {"error": message})


class Headers(Protocol):
    """A request's headers, looked up case-insensitively (http.server's ``self.headers``)."""

    def get(self, name: str) -> Optional[str]: ...


#: What the server calls for each POST on a handler's path: (path, headers, body) -> Reply.
Dispatch = Callable[[str, Headers, bytes], Reply]


class DispatchServer(ThreadingHTTPServer):
    # Request threads must not hold the process up at exit (a handler past the shutdown grace
    # is abandoned), and closing the listener must not wait for them.
    daemon_threads = True
    block_on_close = False

    def __init__(
        self,
        address: Tuple[str, int],
        dispatch: Dispatch,
        paths: Collection[str],
        idempotent: bool,
    ) -> None:
        super().__init__(address, _RequestHandler)
        self.dispatch = dispatch
        self.paths = paths
        self.common_headers = {"X-Ax-Protocol": PROTOCOL_VERSION}
        if idempotent:
            self.common_headers["X-Ax-Idempotent"] = "true"


class _RequestHandler(BaseHTTPRequestHandler):
    server: DispatchServer
    server_version = "ax-executor-python"
    # One request a connection: no idle thread kept alive, and closing the listener refuses
    # new dispatches at once. Said in a header too, so that pooling clients do not reuse it.
    protocol_version = "HTTP/1.0"

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        if path not in self.server.paths:
            return self._send(error(404, f"no handler at {path}"))
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self._send(error(411, "a Content-Length is required"))
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            return self._send(error(400, "bad Content-Length"))
        if length > MAX_BODY or length < 0:
            # Read (and drop) a moderately large body first: a client still sending when the
            # connection closes sees a reset instead of the 413.
            self._discard(min(max(length, 0), DISCARD_LIMIT))
            return self._send(error(413, f"body larger than {MAX_BODY} bytes"))
        body = self.rfile.read(length)
        try:
            reply = self.server.dispatch(path, self.headers, body)
        except Exception:  # a bug of the SDK's or a store's: answer, and keep serving
            log.exception("dispatch to %s failed", path)
            reply = error(500, "internal error")
        self._send(reply)

    def _discard(self, length: int) -> None:
        while length > 0:
            chunk = self.rfile.read(min(length, 64 * 1024))
            if not chunk:
                return
            length -= len(chunk)

    def _not_post(self) -> None:
        path = urlsplit(self.path).path
        if path not in self.server.paths:
            return self._send(error(404, f"no handler at {path}"))
        self._send(Reply(405, {"error": "only POST"}, {"Allow": "POST"}))

    do_GET = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _not_post

    def do_HEAD(self) -> None:
        path = urlsplit(self.path).path
        self._send(Reply(405 if path in self.server.paths else 404), head=True)

    def _send(self, reply: Reply, head: bool = False) -> None:
        payload = json.dumps(reply.body).encode() if reply.body is not None else b""
        try:
            self.send_response(reply.status)
            for name, value in {**self.server.common_headers, **reply.headers}.items():
                self.send_header(name, value)
            if reply.body is not None:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("Connection", "close")
            self.end_headers()
            if not head:
                self.wfile.write(payload)
        except OSError as err:  # ax gave up on the request (its timeout) before the answer
            log.info("reply %d to %s not delivered: %s", reply.status, self.path, err)
            return
        # Logged once written (not as http.server does, before): "202" means ax has it.
        log.debug('%s "%s" %d', self.address_string(), self.requestline, reply.status)

    def log_request(self, code: Any = "-", size: Any = "-") -> None:
        pass  # see _send

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)
