"""Unit tests of the callback's back-off and of what it retries, against a stub ax."""

import unittest
from typing import List

from tests import support
from tests.support import StubAx
from ax_executor import backoff
from ax_executor.callback import send_callback


class BackoffTest(unittest.TestCase):
    def test_doubles_from_half_a_second_to_thirty(self) -> None:
        waits = list(backoff(rand=lambda: 1.0, total=200))
        self.assertEqual(waits[:8], [0.5, 1, 2, 4, 8, 16, 30, 30])
        self.assertLessEqual(sum(waits), 200)
        self.assertGreater(sum(waits) + 30, 200)  # stops only when the next would pass it

    def test_jitter_takes_half_to_all_of_each_step(self) -> None:
        low = list(backoff(rand=lambda: 0.0, total=100))
        self.assertEqual(low[:7], [0.25, 0.5, 1, 2, 4, 8, 15])
        for wait, step in zip(backoff(total=600), [0.5, 1, 2, 4, 8, 16, 30, 30, 30]):
            self.assertTrue(step / 2 <= wait <= step, (wait, step))

    def test_ten_minutes_by_default(self) -> None:
        waits = list(backoff(rand=lambda: 1.0))
        self.assertLessEqual(sum(waits), 600)
        self.assertGreater(sum(waits), 570)


BODY = {"requestId": "r1", "callbackToken": "t", "attempt": 1, "status": "SUCCESS"}


class SendCallbackTest(unittest.TestCase):
    def send(self, statuses: List[int], retry_for: float = 600) -> "tuple[bool, StubAx, list]":
        stub = StubAx(statuses)
        self.addCleanup(stub.close)
        slept: List[float] = []
        with self.assertLogs("ax_executor"):
            ok = send_callback(stub.url + "/api/callback", BODY, retry_for=retry_for, sleep=slept.append)
        return ok, stub, slept

    def test_retries_429_and_5xx_until_taken(self) -> None:
        ok, stub, slept = self.send([503, 429, 500, 200])
        self.assertTrue(ok)
        self.assertEqual(stub.bodies, [BODY] * 4)
        self.assertEqual(len(slept), 3)
        self.assertTrue(0.25 <= slept[0] <= 0.5 and 1 <= slept[2] <= 2, slept)

    def test_a_refusal_is_final(self) -> None:
        for status in (400, 403, 404, 409):
            ok, stub, slept = self.send([status, 200])
            self.assertFalse(ok)
            self.assertEqual((len(stub.bodies), slept), (1, []), status)

    def test_gives_up_after_retry_for(self) -> None:
        ok, stub, slept = self.send([503], retry_for=5)
        self.assertFalse(ok)
        self.assertLessEqual(sum(slept), 5)
        self.assertEqual(len(stub.bodies), len(slept) + 1)

    def test_no_connection_is_retried(self) -> None:
        url = f"http://127.0.0.1:{support.free_port()}/api/callback"  # nothing listens
        slept: List[float] = []
        with self.assertLogs("ax_executor", "ERROR") as logs:
            self.assertFalse(send_callback(url, BODY, retry_for=3, sleep=slept.append))
        self.assertGreaterEqual(len(slept), 2)
        self.assertIn("gave up", logs.output[-1])


if __name__ == "__main__":
    unittest.main()
