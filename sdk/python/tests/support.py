"""What the end-to-end tests share: a real `ax serve` in a temp dir, its API, free ports,
signed dispatches, executor processes, and polling with a deadline."""

import json
import logging
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, List, Optional, Tuple, TypeVar

SDK = Path(__file__).resolve().parents[1]
SRC = SDK / "src"
# The tests run the SDK from its source tree, installed or not.
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

from ax_executor import sign  # noqa: E402

# The SDK's warnings (callbacks retried, runs interrupted) are what many tests provoke: shown
# only when asked for (AX_SDK_TEST_LOG=1); assertLogs still sees them.
if not os.environ.get("AX_SDK_TEST_LOG"):
    logging.getLogger("ax_executor").addHandler(logging.NullHandler())
    logging.getLogger("ax_executor").propagate = False
else:
    logging.basicConfig(level=logging.DEBUG)

REPO = SDK.parents[1]
AX_BIN = os.environ.get("AX_BIN", str(REPO / "target" / "debug" / "ax"))
SECRET = "sdk-python-test-secret-0123456789"
ADMIN_TOKEN = "admin-token-for-the-sdk-tests"
EXECUTOR_TOKEN = "executor-token-for-the-sdk-tests"
FINAL = ("SUCCESS", "FAILED", "CANCELLED", "SKIPPED", "MISSED")

T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(what: str, probe: Callable[[], Optional[T]], timeout: float = 15.0,
             every: float = 0.05) -> T:
    """Polls ``probe`` until it answers something truthy; fails naming ``what`` at the
    deadline, with the last value seen."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")


def http(method: str, url: str, body: Any = None, headers: Optional[Dict[str, str]] = None,
         raw: Optional[bytes] = None, timeout: float = 10.0) -> Tuple[int, Dict[str, str], Any]:
    """One request: (status, headers, JSON body or None)."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    request = urllib.request.Request(url, data=data, method=method, headers=dict(headers or {}))
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, answer_headers, payload = response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        status, answer_headers, payload = error.code, error.headers, error.read()
    try:
        decoded = json.loads(payload) if payload else None
    except ValueError:
        decoded = payload.decode(errors="replace")
    return status, dict(answer_headers.items()), decoded


def dispatch_body(request_id: str, attempt: int = 1, params: Any = None,
                  **extra: Any) -> bytes:
    body = {"taskId": 1, "requestId": request_id, "params": params if params is not None else {},
            "scheduledAt": "2027-02-03T04:05:10.000Z", "attempt": attempt,
            "callbackToken": "not-a-real-token", **extra}
    return json.dumps(body).encode()


def post_signed(url: str, body: bytes, secret: str = SECRET,
                timestamp: Optional[int] = None) -> Tuple[int, Dict[str, str], Any]:
    """POSTs a dispatch as ax does: signed with ``secret`` at ``timestamp`` (now)."""
    ts = int(time.time()) if timestamp is None else timestamp
    headers = {"X-Ax-Timestamp": str(ts), "X-Ax-Signature": sign(secret, ts, body),
               "X-Ax-Protocol": "1"}
    return http("POST", url, headers=headers, raw=body)


class StubAx(ThreadingHTTPServer):
    """A stand-in for ax's callback and log endpoints: answers each POST with the next status
    of ``statuses`` (the last one repeated), keeping the bodies."""

    def __init__(self, statuses: Optional[List[int]] = None) -> None:
        self.statuses = statuses or [200]
        self.bodies: List[Any] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                outer.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                status = outer.statuses[min(len(outer.bodies), len(outer.statuses)) - 1]
                payload = json.dumps({"status": "SUCCESS"} if status == 200 else
                                     {"error": {"code": "X", "message": f"said {status}"}}).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def close(self) -> None:
        self.shutdown()
        self.server_close()


class Ax:
    """A real `ax serve` on a free port, with an admin and an executor token (group
    `billing`); members heartbeat every second and expire after three."""

    def __init__(self, **env: str) -> None:
        if not os.access(AX_BIN, os.X_OK):
            raise RuntimeError(f"no ax binary at {AX_BIN}: build it (cargo build) or set AX_BIN")
        self.dir = Path(tempfile.mkdtemp(prefix="ax-sdk-python-"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        (self.dir / "ax.yaml").write_text(
            "server:\n"
            f'  admin_token: "{ADMIN_TOKEN}"\n'
            "  tokens:\n"
            f'    - {{name: billing-executor, token: "{EXECUTOR_TOKEN}", role: executor, '
            "groups: [billing]}\n")
        full_env = {
            **os.environ,
            "AX_STORE_URL": f"sqlite://{self.dir}/ax.db",
            "AX_BIND": "127.0.0.1",
            "AX_PORT": str(self.port),
            "AX_SIGNING_SECRET": SECRET,
            "AX_RETRY_BACKOFF_SECS": "1",
            "AX_EXECUTOR_HEARTBEAT_SECS": "1",
            "AX_EXECUTOR_MEMBER_TTL_SECS": "3",
            **env,
        }
        self.log_file = open(self.dir / "ax.log", "wb")
        self.process = subprocess.Popen(
            [AX_BIN, "serve", "--config", str(self.dir / "ax.yaml")], cwd=self.dir,
            env=full_env, stdout=self.log_file, stderr=subprocess.STDOUT)
        try:
            wait_for("ax's /healthz", self._healthy, timeout=30)
        except BaseException:
            self.close()
            raise

    def _healthy(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"ax exited: {self.log()[-2000:]}")
        try:
            return http("GET", f"{self.url}/healthz", timeout=1)[0] == 200
        except OSError:
            return False

    def log(self) -> str:
        self.log_file.flush()
        return (self.dir / "ax.log").read_text(errors="replace")

    def close(self) -> None:
        stop(self.process)
        self.log_file.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # ---- the API, as the admin ----

    def api(self, method: str, path: str, body: Any = None,
            token: Optional[str] = ADMIN_TOKEN) -> Tuple[int, Any]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        status, _, answer = http(method, self.url + path, body, headers)
        return status, answer

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        status, answer = self.api(method, path, body)
        if status >= 300:
            raise AssertionError(f"{method} {path}: {status} {answer}")
        return answer

    def create_task(self, name: str, **fields: Any) -> Dict[str, Any]:
        task = {"name": name, "cron": "0 0 0 1 1 *", "maxRetry": 0, "timeoutMs": 10000,
                **fields}
        return self.ok("POST", "/api/tasks", task)

    def trigger(self, task_id: int) -> str:
        return self.ok("POST", f"/api/tasks/{task_id}/trigger")["requestId"]

    def run(self, request_id: str) -> Dict[str, Any]:
        return self.ok("GET", f"/api/instances/{request_id}")

    def final_run(self, request_id: str, timeout: float = 20.0) -> Dict[str, Any]:
        def final() -> Optional[Dict[str, Any]]:
            run = self.run(request_id)
            return run if run["status"] in FINAL else None
        return wait_for(f"run {request_id} to end", final, timeout)

    def runs_of(self, task_id: int) -> List[Dict[str, Any]]:
        return self.ok("GET", f"/api/tasks/{task_id}/instances")["items"]

    def members(self, group: str) -> List[Dict[str, Any]]:
        status, answer = self.api("GET", f"/api/executors/{group}")
        return answer["members"] if status == 200 else []


class Process:
    """A child process whose stdout lines are collected as they come."""

    def __init__(self, args: List[str], env: Dict[str, str]) -> None:
        self.popen = subprocess.Popen(args, env={**os.environ, **env}, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True, bufsize=1)
        self.lines: "queue.Queue[str]" = queue.Queue()
        self.seen: List[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        try:
            for line in self.popen.stdout:
                self.lines.put(line.rstrip("\n"))
        except (OSError, ValueError):  # closed by close()
            pass

    def expect(self, text: str, timeout: float = 15.0) -> str:
        """The next line holding ``text`` (earlier lines are kept in ``seen``)."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            try:
                line = self.lines.get(timeout=max(0.01, remaining))
            except queue.Empty:
                raise AssertionError(f"no line {text!r} within {timeout} s; "
                                     f"output so far: {self.output()}") from None
            self.seen.append(line)
            if text in line:
                return line
            if remaining <= 0:
                raise AssertionError(f"no line {text!r}; output: {self.output()}")

    def output(self) -> str:
        while not self.lines.empty():
            self.seen.append(self.lines.get_nowait())
        return "\n".join(self.seen)

    def signal(self, signum: int) -> None:
        self.popen.send_signal(signum)

    def close(self) -> None:
        stop(self.popen)


def stop(process: "subprocess.Popen[Any]") -> None:
    """Ends a child we started: SIGTERM, then SIGKILL if it lingers."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()


def python_process(script: Path, env: Dict[str, str]) -> Process:
    """Runs ``script`` with this Python, the SDK's source on its path."""
    path = os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))
    return Process([sys.executable, "-u", str(script)],
                   {"PYTHONPATH": path, "PYTHONUNBUFFERED": "1", **env})
