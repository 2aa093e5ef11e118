"""The executor: handlers by path, each dispatch checked, deduplicated, run and reported."""

import ipaddress
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Set, Tuple, TypeVar, Union
from urllib.parse import urlsplit

from . import signature
from .callback import callback_body, send_callback
from .dedupe import DONE, RUNNING, DedupeStore, MemoryDedupe
from .flight import Dispatch, Flight
from .logs import LogBuffer, LogShipper
from .registration import Registration
from .results import FAILED, Failed, Result, error_result, result_of
from .run import BadParams, ParamsType, Run, build_params, parse_time
from .server import DispatchServer, Headers, Reply, error

log = logging.getLogger("ax_executor")

DEFAULT_AX_URL = "http://127.0.0.1:8901"
DEFAULT_PORT = 9000
SHUTDOWN_CODE = "EXECUTOR_SHUTDOWN"
SHUTDOWN_MESSAGE = "the executor shut down before the run ended"
# A result reported while the executor shuts down is retried this long, not the usual 10 min.
SHUTDOWN_CALLBACK_SECS = 5.0

H = TypeVar("H", bound=Callable[..., Any])
Handler = Callable[[Run[Any]], Any]


@dataclass(frozen=True)
class _Route:
    handler: Handler
    params: Optional[ParamsType]
    reply_within: Optional[float]


class Executor:
    """An executor for ax: ``@executor.handler("/path")`` functions, served over HTTP.

    Every argument falls back to an environment variable where one is named, then a default:

    - ``secret`` (``AX_SIGNING_SECRET``, required): ax's ``security.signing_secret``.
    - ``ax_url`` (``AX_URL``, ``http://127.0.0.1:8901``): ax's API, for registration, and for
      results and log lines of dispatches that do not say where to send them.
    - ``token`` (``AX_EXECUTOR_TOKEN``): bearer token for registration and removal.
    - ``group``, ``url``, ``capacity``: join the executor group ``group`` as ``url`` (the base
      URL ax reaches this executor on), taking at most ``capacity`` runs at once.
    - ``host``, ``port``: where to listen; by default ``url``'s port, on 127.0.0.1 when
      ``url`` is a loopback address and on every interface otherwise (9000 without ``url``).
      Port 0 picks a free one (see :attr:`port`).
    - ``reply_within`` (2 s): how long a dispatch waits for its handler before answering 202
      and reporting the result by callback; 0 always answers 202.
    - ``dedupe``: the request-id store (:class:`MemoryDedupe` by default); ``False`` for none.
    - ``shutdown_grace`` (30 s): how long shutdown waits for runs in flight.
    - ``drain_delay`` (2 s): how long dispatches are still taken after leaving the group.
    - ``callback_retry_for`` (600 s): how long a result is retried while ax cannot take it.
    """

    def __init__(
        self,
        *,
        secret: Union[str, bytes, None] = None,
        ax_url: Optional[str] = None,
        token: Optional[str] = None,
        group: Optional[str] = None,
        url: Optional[str] = None,
        capacity: Optional[int] = None,
        host: Optional[str] = None,
        port: Optional[int] = None,
        reply_within: float = 2.0,
        dedupe: Union[DedupeStore, bool, None] = None,
        shutdown_grace: float = 30.0,
        drain_delay: float = 2.0,
        callback_retry_for: float = 600.0,
    ) -> None:
        secret = secret or os.environ.get("AX_SIGNING_SECRET")
        if not secret:
            # Without it anyone who can reach the port runs any handler with any params.
            raise ValueError("no signing secret: pass secret= or set AX_SIGNING_SECRET "
                             "(ax's security.signing_secret)")
        if group and not url:
            raise ValueError("a group needs url=, the base URL ax reaches this executor on")
        if reply_within < 0:
            raise ValueError("reply_within must be 0 or more")
        self._secret = secret
        self.ax_url = (ax_url or os.environ.get("AX_URL") or DEFAULT_AX_URL).rstrip("/")
        self._token = token or os.environ.get("AX_EXECUTOR_TOKEN") or None
        self.group = group
        self.url = url
        self.capacity = capacity
        self.host, self._port = _listen_address(url, host, port)
        self.reply_within = reply_within
        self.dedupe: Optional[DedupeStore] = (
            MemoryDedupe() if dedupe is None or dedupe is True
            else None if dedupe is False else dedupe)
        self.shutdown_grace = shutdown_grace
        self.drain_delay = drain_delay
        self.callback_retry_for = callback_retry_for

        self._routes: Dict[str, _Route] = {}
        self._flights: Dict[str, Flight] = {}  # by requestId, while dedupe is on
        self._in_flight: Set[Flight] = set()
        self._lock = threading.Lock()
        self._closed = False  # past the drain delay: dispatches get 503
        self._abort = threading.Event()  # the end of shutdown: callbacks stop retrying
        self._stop_requested = threading.Event()
        self._stopped = threading.Event()
        self._stop_lock = threading.Lock()
        self._server: Optional[DispatchServer] = None
        self._registration: Optional[Registration] = None
        self._logs: Optional[LogShipper] = None

    # ---- handlers ----

    def handler(
        self,
        path: str,
        *,
        params: Optional[ParamsType] = None,
        reply_within: Optional[float] = None,
    ) -> Callable[[H], H]:
        """Decorator: ``fn(run)`` handles the dispatches POSTed to ``path``. ``params`` types
        ``run.params`` (a dataclass, or any callable taking the JSON value); ``reply_within``
        overrides the executor's for this path."""

        def register(fn: H) -> H:
            self.add_handler(path, fn, params=params, reply_within=reply_within)
            return fn

        return register

    def add_handler(
        self,
        path: str,
        fn: Handler,
        *,
        params: Optional[ParamsType] = None,
        reply_within: Optional[float] = None,
    ) -> None:
        if not path.startswith("/"):
            raise ValueError(f"a handler path starts with /: {path!r}")
        if path in self._routes:
            raise ValueError(f"a handler is registered at {path} already")
        self._routes[path] = _Route(fn, params, reply_within)

    # ---- lifecycle ----

    @property
    def port(self) -> int:
        """The port listened on (the one picked, once started with port 0)."""
        return self._server.server_address[1] if self._server else self._port

    @property
    def base_url(self) -> str:
        """``url``, or where this executor listens."""
        if self.url:
            return self.url.rstrip("/")
        host = "127.0.0.1" if self.host in ("", "0.0.0.0") else self.host
        return f"http://{host}:{self.port}"

    def start(self) -> "Executor":
        """Listens (on a background thread) and joins the group, if any. Returns at once."""
        if self._server is not None:
            raise RuntimeError("the executor is started already")
        self._logs = LogShipper()
        self._server = DispatchServer((self.host, self._port), self._dispatch,
                                      self._routes.keys(), self.dedupe is not None)
        # A short poll interval: closing the listener (shutdown) waits for one.
        threading.Thread(target=self._server.serve_forever, args=(0.1,),
                         name="ax-executor-http", daemon=True).start()
        log.info("executor listening on %s:%d (%s)", self.host, self.port,
                 ", ".join(sorted(self._routes)) or "no handlers")
        # After binding: ax may route a run here the moment the member exists.
        if self.group and self.url:
            self._registration = Registration(self.ax_url, self.group, self.url, self._token,
                                              self.capacity)
            self._registration.start()
        return self

    def serve(self) -> None:
        """Starts, then blocks until SIGTERM or SIGINT (or :meth:`stop` from elsewhere), and
        shuts down gracefully."""
        if not logging.getLogger().handlers:
            logging.basicConfig(level=logging.INFO,
                                format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        previous: Dict[Any, Any] = {}

        def on_signal(signum: int, _frame: Any) -> None:
            log.info("%s: shutting down", signal.Signals(signum).name)
            # A second signal acts as if the SDK were not there (kills, or KeyboardInterrupt).
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self._stop_requested.set()

        # Signal handlers can only be set from the main thread; elsewhere, stop() ends it.
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, on_signal)
        self.start()
        # Waits in short slices: the main thread must come back to Python for signals.
        while not self._stop_requested.wait(0.5):
            pass
        self.stop()

    def stop(self) -> None:
        """Graceful shutdown (protocol.md): leave the group, keep answering for
        ``drain_delay``, stop listening, let runs in flight end within ``shutdown_grace``,
        report the others ``EXECUTOR_SHUTDOWN`` (retried by ax), flush the logs."""
        self._stop_requested.set()
        with self._stop_lock:
            if self._stopped.is_set() or self._server is None:
                return
            if self._registration is not None:
                self._registration.close()
            if self.drain_delay > 0:
                time.sleep(self.drain_delay)
            with self._lock:
                self._closed = True
            self._server.shutdown()
            self._server.server_close()
            self._finish_in_flight()
            if self._logs is not None:
                self._logs.close()
            self._abort.set()
            self._stopped.set()
            log.info("executor stopped")

    close = stop

    def __enter__(self) -> "Executor":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def _finish_in_flight(self) -> None:
        deadline = time.monotonic() + self.shutdown_grace
        with self._lock:
            flights = list(self._in_flight)
        if flights:
            log.info("waiting up to %.0f s for %d runs in flight", self.shutdown_grace,
                     len(flights))
        for flight in flights:
            flight.reported.wait(max(0.0, deadline - time.monotonic()))
        reports = []
        for flight in flights:
            if flight.settled.is_set():
                continue  # finished; its callback, still retrying, is cut short by _abort
            if flight.run is not None:
                flight.run.stopping.set()
            to_call = flight.settle(Result(FAILED, SHUTDOWN_CODE, SHUTDOWN_MESSAGE),
                                    interrupted=True)
            # Forgotten, so that ax's retry of it (here after a restart, or elsewhere) runs.
            if self.dedupe is not None:
                self.dedupe.release(flight.request_id)
            self._forget(flight)
            log.warning("request %s interrupted by shutdown", flight.request_id)
            if to_call is not None:
                reports.append(threading.Thread(
                    target=self._call_back, args=(flight, to_call, SHUTDOWN_CALLBACK_SECS)))
        # In parallel: with ax unreachable, each one retries for a while.
        for report in reports:
            report.start()
        for report in reports:
            report.join()

    # ---- dispatches ----

    def _dispatch(self, path: str, headers: Headers, body: bytes) -> Reply:
        route = self._routes[path]
        try:
            signature.verify(self._secret, headers.get("X-Ax-Timestamp"),
                             headers.get("X-Ax-Signature"), body)
        except signature.SignatureError as refused:
            log.warning("dispatch to %s refused: %s", path, refused)
            return error(401, str(refused))
        try:
            dispatch = Dispatch.parse(body)
        except ValueError as bad:
            return error(400, f"bad dispatch: {bad}")
        if self._closed:
            return error(503, "the executor is shutting down")

        flight = Flight(dispatch, self.ax_url)
        if self.dedupe is not None:
            duplicate = self._claim(flight, dispatch)
            if duplicate is not None:
                return duplicate
        with self._lock:
            # Checked again with the lock stop() takes to list the runs it waits for: a run
            # is either among them or refused.
            closing = self._closed
            if not closing:
                self._in_flight.add(flight)
        if closing:
            if self.dedupe is not None:
                self.dedupe.release(dispatch.request_id)
                self._forget(flight)
            return error(503, "the executor is shutting down")
        threading.Thread(target=self._execute, args=(flight, route, dispatch),
                         name=f"ax-run-{dispatch.request_id}", daemon=True).start()

        within = self.reply_within if route.reply_within is None else route.reply_within
        result = flight.reply_result(within)
        if result is None:
            return Reply(202)
        self._reported(flight)
        if flight.interrupted:
            return error(503, SHUTDOWN_MESSAGE)
        return Reply(200, result.to_dict())

    def _claim(self, flight: Flight, dispatch: Dispatch) -> Optional[Reply]:
        """Makes ``flight`` the run's (None), or answers the duplicate delivery it is."""
        assert self.dedupe is not None
        request_id = dispatch.request_id
        # Noted here before the store is asked, so that a re-delivery the store calls running
        # always finds the flight to record its attempt on.
        with self._lock:
            local = self._flights.setdefault(request_id, flight)
        claim = self.dedupe.claim(request_id)
        if claim.state not in (RUNNING, DONE):
            with self._lock:
                self._flights[request_id] = flight
            return None
        if local is flight:  # taken by another process sharing the store
            self._forget(flight)
            return _duplicate(claim.result)
        local.redelivered(dispatch)
        with local.lock:
            result = claim.result or (None if local.interrupted else local.result)
        return _duplicate(result)

    def _execute(self, flight: Flight, route: _Route, dispatch: Dispatch) -> None:
        logs = LogBuffer(dispatch.request_id, flight.log_target, self._logs_shipper())
        try:
            run: Run[Any] = Run(
                request_id=dispatch.request_id,
                task_id=dispatch.task_id,
                attempt=dispatch.attempt,
                scheduled_at=parse_time(dispatch.scheduled_at),
                params=build_params(route.params, dispatch.params),
                shard_index=dispatch.shard_index,
                shard_total=dispatch.shard_total,
                _logs=logs,
            )
            flight.run = run
            result = result_of(route.handler(run))
        except BadParams as bad:
            result = Result(FAILED, "BAD_PARAMS", str(bad), stop_retry=True)
        except Failed as failed:
            result = failed.result()
        except BaseException as err:  # noqa: B902 - a handler's SystemExit must not hang a run
            log.exception("handler of request %s raised", dispatch.request_id)
            result = error_result(err)
        logs.flush()  # the whole log is there before the run turns final
        if flight.settled.is_set():  # interrupted by shutdown, reported already
            return
        # Kept before anyone is told, so that a re-delivery after the result gets it.
        if self.dedupe is not None:
            self.dedupe.finish(dispatch.request_id, result)
        to_call = flight.settle(result)
        self._forget(flight)
        if to_call is not None:
            self._call_back(flight, to_call, self.callback_retry_for)

    def _call_back(self, flight: Flight, to: Dispatch, retry_for: float) -> None:
        assert flight.result is not None
        url = to.callback_url or f"{self.ax_url}/api/callback"
        body = callback_body(to.request_id, to.callback_token, to.attempt, flight.result)
        send_callback(url, body, retry_for=retry_for, stop=self._abort)
        self._reported(flight)

    def _forget(self, flight: Flight) -> None:
        """The run no longer runs here: the store answers for it from now on."""
        with self._lock:
            if self._flights.get(flight.request_id) is flight:
                del self._flights[flight.request_id]

    def _reported(self, flight: Flight) -> None:
        """Its result is with ax (or given up): shutdown no longer waits for it."""
        flight.reported.set()
        with self._lock:
            self._in_flight.discard(flight)

    def _logs_shipper(self) -> LogShipper:
        assert self._logs is not None, "started executors only"
        return self._logs


def _duplicate(result: Optional[Result]) -> Reply:
    headers = {"X-Ax-Duplicate": "true"}
    if result is None:  # still running: the result follows by callback, for the newest attempt
        return Reply(202, headers=headers)
    return Reply(200, result.to_dict(), headers)


def _listen_address(url: Optional[str], host: Optional[str], port: Optional[int]) -> Tuple[str, int]:
    parts = urlsplit(url) if url else None
    if port is None:
        port = (parts.port or (443 if parts.scheme == "https" else 80)) if parts else DEFAULT_PORT
    if host is None:
        host = "127.0.0.1" if parts is None or _loopback(parts.hostname or "") else "0.0.0.0"
    return host, port


def _loopback(name: str) -> bool:
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False
