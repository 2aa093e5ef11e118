"""End-to-end against a real `ax serve`, executors in this process: duplicates (1), forged and
stale dispatches (2), 202 then callback (3), log lines and progress (4), typed params (9)."""

import threading
import time
import unittest
from dataclasses import dataclass
from typing import Any, List, Optional

from tests import support
from tests.support import SECRET, Ax, dispatch_body, http, post_signed, wait_for
from ax_executor import Claim, Executor, Failed, MemoryDedupe, Run, Success

ax: Ax


def setUpModule() -> None:
    global ax
    ax = Ax()


def tearDownModule() -> None:
    ax.close()


class SpyStore(MemoryDedupe):
    """The default store, noting each claim's answer."""

    def __init__(self) -> None:
        super().__init__()
        self.claims: List[tuple] = []

    def claim(self, request_id: str) -> Claim:
        claim = super().claim(request_id)
        self.claims.append((request_id, claim.state))
        return claim


@dataclass
class Reconcile:
    region: str
    limit: Optional[int] = None


class DispatchTest(unittest.TestCase):
    def executor(self, **options: Any) -> Executor:
        options = {"secret": SECRET, "ax_url": ax.url, "port": 0, "drain_delay": 0,
                   "shutdown_grace": 1, **options}
        executor = Executor(**options)
        self.addCleanup(executor.stop)
        return executor

    def task(self, executor: Executor, path: str, **fields: Any) -> int:
        name = fields.pop("name", f"{self.id().rsplit('.', 1)[-1]} {executor.port}{path}")
        return ax.create_task(name, handlerUrl=executor.base_url + path, **fields)["id"]

    def test_1_a_run_delivered_twice_is_handled_once(self) -> None:
        store = SpyStore()
        executor = self.executor(dedupe=store)
        calls: List[Run[Any]] = []
        redelivered = threading.Event()

        @executor.handler("/once")
        def once(run: Run[Any]) -> str:
            calls.append(run)
            redelivered.wait(20)  # past the attempt's timeoutMs: ax delivers it again
            return "reconciled once"

        executor.start()
        # Attempt 1 times out after 1 s (the handler still works), attempt 2 comes 1 s later.
        task = self.task(executor, "/once", timeoutMs=1000, maxRetry=2)
        rid = ax.trigger(task)
        wait_for("the second delivery", lambda: (rid, "running") in store.claims)
        redelivered.set()
        run = ax.final_run(rid)
        self.assertEqual((run["status"], run["message"]), ("SUCCESS", "reconciled once"))
        self.assertEqual(run["attempt"], 2)  # the result was called back for the newest attempt
        self.assertEqual([a["code"] for a in run["attempts"]], ["TIMEOUT"])
        self.assertEqual(store.claims, [(rid, "new"), (rid, "running")])
        self.assertEqual(len(calls), 1)
        self.assertEqual(calls[0].attempt, 1)

        # The same run POSTed again, signed: the kept result, the handler not called.
        status, headers, body = post_signed(executor.base_url + "/once",
                                            dispatch_body(rid, attempt=3))
        self.assertEqual((status, body), (200, {"status": "SUCCESS", "message": "reconciled once"}))
        self.assertEqual((headers["X-Ax-Duplicate"], headers["X-Ax-Idempotent"]), ("true", "true"))
        self.assertEqual(len(calls), 1)
        self.assertEqual(len(ax.runs_of(task)), 1)

    def test_2_forged_and_stale_dispatches_are_refused(self) -> None:
        executor = self.executor()
        calls: List[Run[Any]] = []
        executor.add_handler("/guarded", calls.append)
        executor.start()
        url = executor.base_url + "/guarded"
        body = dispatch_body("forged-1")
        refusals = [
            post_signed(url, body, secret="not-the-secret-of-ax"),  # forged
            post_signed(url, body, timestamp=int(time.time()) - 600),  # replayed 10 min later
            post_signed(url, body, timestamp=int(time.time()) + 600),
            http("POST", url, raw=body),  # unsigned
        ]
        for status, headers, answer in refusals:
            self.assertEqual(status, 401)
            self.assertEqual(headers["X-Ax-Protocol"], "1")
            self.assertIn("error", answer)
        self.assertEqual(refusals[1][2], {"error": "stale timestamp"})

        # ax itself, signing with a secret this executor does not have: HTTP_401, no run.
        other = self.executor(secret="another-secret-than-ax-has")
        other.add_handler("/guarded", calls.append)
        other.start()
        run = ax.final_run(ax.trigger(self.task(other, "/guarded")))
        self.assertEqual((run["status"], run["code"]), ("FAILED", "HTTP_401"))
        self.assertEqual(calls, [])

        # A dispatch ax signed is taken by the executor with ax's secret.
        run = ax.final_run(ax.trigger(self.task(executor, "/guarded")))
        self.assertEqual(run["status"], "SUCCESS")
        self.assertEqual(len(calls), 1)

    def test_3_a_slow_handler_answers_202_then_calls_back(self) -> None:
        executor = self.executor(reply_within=0.2)

        @executor.handler("/slow")
        def slow(run: Run[Any]) -> Success:
            time.sleep(1)
            return Success("slow and done", code="0", output="42 rows written")

        @executor.handler("/slow-failure")
        def slow_failure(run: Run[Any]) -> None:
            time.sleep(0.5)
            raise Failed("UPSTREAM_DOWN", "billing API 503")

        @executor.handler("/slow-error")
        def slow_error(run: Run[Any]) -> None:
            time.sleep(0.5)
            raise RuntimeError("disk full")

        executor.start()
        with self.assertLogs("ax_executor", "INFO") as logs:
            rids = [ax.trigger(self.task(executor, path)) for path in
                    ("/slow", "/slow-failure", "/slow-error")]
            runs = [ax.final_run(rid) for rid in rids]
        self.assertEqual([(r["status"], r["code"], r["message"]) for r in runs], [
            ("SUCCESS", "0", "slow and done"),
            ("FAILED", "UPSTREAM_DOWN", "billing API 503"),
            ("FAILED", "ERROR", "RuntimeError: disk full"),
        ])
        # Each came by callback (the dispatch got 202), taken by ax at once.
        said = "\n".join(logs.output)
        self.assertIn(f"callback for request {rids[0]} attempt 1 (SUCCESS): ax says SUCCESS", said)
        self.assertIn(f"callback for request {rids[1]} attempt 1 (FAILED): ax says FAILED", said)
        log = ax.ok("GET", f"/api/instances/{rids[0]}/log")
        self.assertEqual(log["attempts"][0]["output"], "42 rows written")

    def test_4_log_lines_and_progress_show_on_the_run(self) -> None:
        executor = self.executor(reply_within=0.5)

        @executor.handler("/chatty")
        def chatty(run: Run[Any]) -> str:
            run.log("starting", "two lines\nin one")
            run.progress(10)
            for n in range(150):  # more than a batch
                run.log(f"row {n}")
            time.sleep(0.6)  # a flush on the way
            run.progress(70)
            run.log("done")
            return "chatted"

        executor.start()
        # Once answered in the reply, once by callback: the whole log is there either way.
        rid_reply = ax.trigger(self.task(executor, "/chatty"))
        slow = self.executor(reply_within=0)
        slow.add_handler("/chatty", chatty)
        slow.start()
        rid_callback = ax.trigger(self.task(slow, "/chatty"))
        want = (["starting", "two lines", "in one"] + [f"row {n}" for n in range(150)]
                + ["done"])
        for rid in (rid_reply, rid_callback):
            self.assertEqual(ax.final_run(rid)["status"], "SUCCESS")
            attempt = ax.ok("GET", f"/api/instances/{rid}/log")["attempts"][0]
            self.assertEqual([line["text"] for line in attempt["lines"]], want)
            self.assertEqual((attempt["attempt"], attempt["progress"]), (1, 70))

    def test_9_params_that_do_not_fit_fail_bad_params_without_retry(self) -> None:
        executor = self.executor()
        seen: List[Any] = []

        @executor.handler("/typed", params=Reconcile)
        def typed(run: Run[Reconcile]) -> str:
            seen.append(run.params)
            return f"reconciled {run.params.region}"

        executor.start()
        good = ax.final_run(ax.trigger(self.task(executor, "/typed", params={"region": "eu"})))
        self.assertEqual((good["status"], good["message"]), ("SUCCESS", "reconciled eu"))
        self.assertEqual(seen, [Reconcile("eu")])
        for params, says in (({"zone": "eu"}, "unknown field 'zone'"),
                             ({"region": 5}, "params.region must be str, not a number")):
            task = self.task(executor, "/typed", params=params, maxRetry=3,
                             name=f"typed {params}")
            run = ax.final_run(ax.trigger(task))
            self.assertEqual((run["status"], run["code"]), ("FAILED", "BAD_PARAMS"))
            self.assertIn(says, run["message"])
            self.assertEqual((run["attempt"], run["retryCount"], run["nextAttemptAt"]), (1, 0, None))
        self.assertEqual(len(seen), 1)


if __name__ == "__main__":
    unittest.main()
