"""End-to-end against a real `ax serve`, executors as processes: killed with SIGKILL mid-run
(6), and shut down with SIGTERM with a run in flight (7)."""

import signal
import unittest
from pathlib import Path
from typing import Any

from tests import support
from tests.support import SECRET, Ax, free_port

WORKER = Path(__file__).with_name("worker.py")
ax: Ax


def setUpModule() -> None:
    global ax
    ax = Ax()


def tearDownModule() -> None:
    ax.close()


class ProcessTest(unittest.TestCase):
    def setUp(self) -> None:
        self.port = free_port()

    def worker(self, grace: float = 30) -> support.Process:
        process = support.python_process(WORKER, {
            "PORT": str(self.port), "GRACE": str(grace), "AX_URL": ax.url,
            "AX_SIGNING_SECRET": SECRET})
        self.addCleanup(process.close)
        process.expect("executor listening on")
        return process

    def task(self, **fields: Any) -> int:
        return ax.create_task(self.id().rsplit(".", 1)[-1],
                              handlerUrl=f"http://127.0.0.1:{self.port}/work", **fields)["id"]

    def test_6_a_run_killed_mid_way_is_retried_and_succeeds(self) -> None:
        first = self.worker()
        task = self.task(params={"seconds": 60, "first_attempt_only": True}, timeoutMs=1500,
                         maxRetry=2)
        rid = ax.trigger(task)
        first.expect(f"started {rid} 1")
        first.expect('"POST /work HTTP/1.1" 202')  # answered: the result is to come by callback
        first.popen.kill()  # SIGKILL: nothing reported, nothing cleaned up
        first.popen.wait(5)
        again = self.worker()  # on the same port: ax's retry lands here
        again.expect(f"finished {rid} 2")
        run = ax.final_run(rid)
        self.assertEqual((run["status"], run["requestId"]), ("SUCCESS", rid))
        self.assertGreaterEqual(run["attempt"], 2)
        self.assertEqual(run["message"], f"worked 0 s on attempt {run['attempt']}")
        self.assertEqual(run["attempts"][0]["code"], "TIMEOUT")
        self.assertEqual(len(ax.runs_of(task)), 1)

    def test_7_sigterm_lets_a_run_in_flight_finish(self) -> None:
        worker = self.worker()
        rid = ax.trigger(self.task(params={"seconds": 1.5}))
        worker.expect(f"started {rid} 1")
        worker.expect('"POST /work HTTP/1.1" 202')
        worker.signal(signal.SIGTERM)
        worker.expect(f"finished {rid} 1")
        worker.expect("exited")
        self.assertEqual(worker.popen.wait(5), 0)
        run = ax.final_run(rid)
        self.assertEqual((run["status"], run["attempt"], run["message"]),
                         ("SUCCESS", 1, "worked 1.5 s on attempt 1"))

    def test_7_past_the_grace_a_run_is_reported_executor_shutdown_and_retried(self) -> None:
        worker = self.worker(grace=0.5)
        task = self.task(params={"seconds": 60, "first_attempt_only": True}, maxRetry=1)
        rid = ax.trigger(task)
        worker.expect(f"started {rid} 1")
        worker.expect('"POST /work HTTP/1.1" 202')
        worker.signal(signal.SIGTERM)
        worker.expect(f"stopping {rid}")  # run.stopping set at the end of the grace
        worker.expect("exited", timeout=10)
        self.assertEqual(worker.popen.wait(5), 0)
        # Reported as a failure that may be retried: ax retries it, here on a new process.
        failed = support.wait_for("the failure recorded", lambda: ax.run(rid)["attempts"])
        self.assertEqual((failed[0]["code"], failed[0]["message"]),
                         ("EXECUTOR_SHUTDOWN", "the executor shut down before the run ended"))
        self.worker()
        run = ax.final_run(rid)
        self.assertEqual((run["status"], run["attempt"]), ("SUCCESS", 2))


if __name__ == "__main__":
    unittest.main()
