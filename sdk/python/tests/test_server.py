"""The executor's HTTP side in process, without ax: methods, paths, limits, signatures,
results in the reply, duplicates, and shutdown. (Callbacks go nowhere here: see test_e2e_*.)"""

import os
import threading
import unittest
import urllib.error
from typing import Any, Dict, List
from unittest import mock

from tests import support
from tests.support import SECRET, dispatch_body, http, post_signed
from ax_executor import Executor, Failed, MemoryDedupe, Run, Success


class ServerTest(unittest.TestCase):
    def start(self, **options: Any) -> Executor:
        self.ax = support.StubAx()  # takes callbacks and log lines
        self.addCleanup(self.ax.close)
        options = {"secret": SECRET, "port": 0, "drain_delay": 0, "shutdown_grace": 0.3,
                   "ax_url": self.ax.url, **options}
        executor = Executor(**options)
        self.release = threading.Event()
        self.calls: List[Run[Any]] = []

        @executor.handler("/ok")
        def ok(run: Run[Any]) -> Any:
            self.calls.append(run)
            return Success("fine", code="0")

        @executor.handler("/fail")
        def fail(run: Run[Any]) -> str:
            raise Failed("UPSTREAM_DOWN", "billing API 503", stop_retry=True)

        @executor.handler("/boom")
        def boom(run: Run[Any]) -> str:
            params: Dict[str, str] = {}
            return params["region"]

        @executor.handler("/wait", reply_within=0.1)
        def wait(run: Run[Any]) -> str:
            self.calls.append(run)
            self.release.wait(10) or run.stopping.wait(10)
            return "waited"

        self.addCleanup(self.release.set)
        self.addCleanup(executor.stop)
        return executor.start()

    def test_no_secret_no_executor(self) -> None:
        with mock.patch.dict(os.environ, {"AX_SIGNING_SECRET": ""}):
            with self.assertRaisesRegex(ValueError, "AX_SIGNING_SECRET"):
                Executor()

    def test_methods_paths_and_limits(self) -> None:
        url = self.start().base_url
        status, headers, body = http("GET", f"{url}/ok")
        self.assertEqual((status, headers["Allow"]), (405, "POST"))
        self.assertEqual(http("POST", f"{url}/nope", raw=b"{}")[0], 404)
        self.assertEqual(http("POST", f"{url}/ok", raw=b"x" * (1024 * 1024 + 1))[0], 413)
        self.assertEqual(post_signed(f"{url}/ok", b"{not json")[0], 400)
        self.assertEqual(post_signed(f"{url}/ok", b'{"requestId": "r"}')[0], 400)
        status, headers, body = http("POST", f"{url}/ok", raw=dispatch_body("r1"))
        self.assertEqual((status, body), (401, {"error": "missing X-Ax-Timestamp or X-Ax-Signature"}))
        self.assertEqual(headers["X-Ax-Protocol"], "1")
        self.assertEqual(self.calls, [])

    def test_results_in_the_reply(self) -> None:
        url = self.start().base_url
        status, headers, body = post_signed(f"{url}/ok", dispatch_body("r1", params={"a": 1},
                                                                        shardIndex=1, shardTotal=3))
        self.assertEqual((status, body), (200, {"status": "SUCCESS", "code": "0", "message": "fine"}))
        self.assertEqual((headers["X-Ax-Protocol"], headers["X-Ax-Idempotent"]), ("1", "true"))
        run = self.calls[0]
        self.assertEqual((run.request_id, run.task_id, run.attempt, run.params),
                         ("r1", 1, 1, {"a": 1}))
        self.assertEqual((run.shard_index, run.shard_total), (1, 3))
        self.assertEqual(run.scheduled_at.isoformat(), "2027-02-03T04:05:10+00:00")
        self.assertEqual(post_signed(f"{url}/fail", dispatch_body("r2"))[2],
                         {"status": "FAILED", "code": "UPSTREAM_DOWN",
                          "message": "billing API 503", "stopRetry": True})
        with self.assertLogs("ax_executor", "ERROR"):  # with its traceback
            self.assertEqual(post_signed(f"{url}/boom", dispatch_body("r3"))[2],
                             {"status": "FAILED", "code": "ERROR", "message": "KeyError: 'region'"})

    def test_duplicates(self) -> None:
        url = self.start().base_url
        first = post_signed(f"{url}/ok", dispatch_body("r1"))
        again = post_signed(f"{url}/ok", dispatch_body("r1", attempt=2))
        self.assertEqual(again[0], 200)
        self.assertEqual(again[2], first[2])
        self.assertEqual(again[1]["X-Ax-Duplicate"], "true")
        self.assertNotIn("X-Ax-Duplicate", first[1])
        self.assertEqual(len(self.calls), 1)
        # While the first delivery works: 202, the result to follow by callback.
        self.assertEqual(post_signed(f"{url}/wait", dispatch_body("r2"))[0], 202)
        status, headers, _ = post_signed(f"{url}/wait", dispatch_body("r2", attempt=2))
        self.assertEqual((status, headers.get("X-Ax-Duplicate")), (202, "true"))
        self.assertEqual(len(self.calls), 2)

    def test_without_dedupe_every_delivery_runs(self) -> None:
        url = self.start(dedupe=False).base_url
        for _ in range(2):
            status, headers, _ = post_signed(f"{url}/ok", dispatch_body("r1"))
            self.assertEqual(status, 200)
            self.assertNotIn("X-Ax-Idempotent", headers)
        self.assertEqual(len(self.calls), 2)

    def test_shutdown_interrupts_runs_past_the_grace(self) -> None:
        store = MemoryDedupe()
        executor = self.start(dedupe=store, reply_within=5)
        answers: List[Any] = []
        # /wait answers 202 after 0.1 s; /ok with a 5 s reply_within is held by a slow handler.
        hold = threading.Event()

        def slow(run: Run[Any]) -> None:
            self.calls.append(run)
            hold.wait(10)

        executor.add_handler("/slow", slow)
        self.addCleanup(hold.set)
        waiter = threading.Thread(
            target=lambda: answers.append(post_signed(f"{executor.base_url}/slow",
                                                      dispatch_body("r1"))))
        waiter.start()
        support.wait_for("the run to start", lambda: self.calls)
        with self.assertLogs("ax_executor", "WARNING") as logs:
            executor.stop()
        waiter.join(5)
        status, _, body = answers[0]
        self.assertEqual((status, body), (503, {"error": "the executor shut down before the run ended"}))
        self.assertIn("request r1 interrupted by shutdown", "\n".join(logs.output))
        self.assertEqual(store.claim("r1").state, "new")  # released: a re-delivery runs it
        with self.assertRaises(urllib.error.URLError):  # no longer listening
            post_signed(f"{executor.base_url}/ok", dispatch_body("r2"))

    def test_stopping_is_set_for_runs_past_the_grace(self) -> None:
        executor = self.start()
        self.assertEqual(post_signed(f"{executor.base_url}/wait", dispatch_body("r1"))[0], 202)
        support.wait_for("the handler", lambda: self.calls)
        with self.assertLogs("ax_executor", "WARNING"):
            executor.stop()
        self.assertTrue(self.calls[0].stopping.is_set())
        # Reported by callback (the reply was a 202), retry allowed.
        self.assertEqual(self.ax.bodies[-1], {
            "requestId": "r1", "callbackToken": "not-a-real-token", "attempt": 1,
            "status": "FAILED", "code": "EXECUTOR_SHUTDOWN",
            "message": "the executor shut down before the run ended"})


if __name__ == "__main__":
    unittest.main()
