"""Unit tests of the in-memory dedupe store and of results' wire form."""

import threading
import unittest

from tests import support  # noqa: F401
from ax_executor import Claim, MemoryDedupe, Result


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


OK = Result("SUCCESS", message="done")


class MemoryDedupeTest(unittest.TestCase):
    def test_new_then_running_then_done_with_its_result(self) -> None:
        store = MemoryDedupe()
        self.assertEqual(store.claim("r1"), Claim.new())
        self.assertEqual(store.claim("r1"), Claim.running())
        self.assertEqual(store.claim("r2"), Claim.new())  # another run is its own
        store.finish("r1", OK)
        self.assertEqual(store.claim("r1"), Claim.done(OK))
        self.assertEqual(store.claim("r1").result, OK)

    def test_release_forgets_a_run_so_it_runs_again(self) -> None:
        store = MemoryDedupe()
        store.claim("r1")
        store.release("r1")
        self.assertEqual(store.claim("r1"), Claim.new())
        store.finish("r1", OK)
        store.release("r1")
        self.assertEqual(store.claim("r1"), Claim.new())

    def test_results_expire_after_the_ttl(self) -> None:
        clock = FakeClock()
        store = MemoryDedupe(ttl=60, clock=clock)
        store.claim("r1")
        store.finish("r1", OK)
        clock.now += 59
        self.assertEqual(store.claim("r1").state, "done")
        clock.now += 2
        self.assertEqual(store.claim("r1"), Claim.new())

    def test_running_runs_do_not_expire(self) -> None:
        clock = FakeClock()
        store = MemoryDedupe(ttl=60, clock=clock)
        store.claim("r1")
        clock.now += 3600
        self.assertEqual(store.claim("r1"), Claim.running())

    def test_the_oldest_finished_go_first_past_max_entries(self) -> None:
        clock = FakeClock()
        store = MemoryDedupe(max_entries=3, clock=clock)
        store.claim("running")
        for name in ("a", "b", "c"):
            clock.now += 1
            store.claim(name)
            store.finish(name, Result("SUCCESS", message=name))
        self.assertEqual(len(store), 3)
        self.assertEqual(store.claim("a"), Claim.new())  # the oldest finished, dropped
        self.assertEqual(store.claim("running"), Claim.running())  # never dropped
        self.assertEqual(store.claim("c").state, "done")
        self.assertLessEqual(len(store), 3)

    def test_concurrent_claims_give_one_new(self) -> None:
        store = MemoryDedupe()
        claims = []
        barrier = threading.Barrier(16)

        def claim() -> None:
            barrier.wait()
            claims.append(store.claim("same").state)

        threads = [threading.Thread(target=claim) for _ in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual(sorted(claims), ["new"] + ["running"] * 15)


class ResultTest(unittest.TestCase):
    def test_round_trip_through_the_wire_form(self) -> None:
        result = Result("FAILED", "UPSTREAM_DOWN", "billing API 503", "out", stop_retry=True)
        body = result.to_dict()
        self.assertEqual(body, {"status": "FAILED", "code": "UPSTREAM_DOWN",
                                "message": "billing API 503", "output": "out",
                                "stopRetry": True})
        self.assertEqual(Result.from_dict(body), result)
        self.assertEqual(Result("SUCCESS").to_dict(), {"status": "SUCCESS"})

    def test_fields_are_cut_to_what_ax_takes(self) -> None:
        body = Result("FAILED", "C\x1bODE" + "x" * 100, "m" * 2000, "é" * 40000).to_dict()
        self.assertEqual(body["code"], "CODE" + "x" * 60)  # control characters dropped, 64
        self.assertEqual(len(body["message"]), 1024)
        self.assertLessEqual(len(body["output"].encode()), 64 * 1024)
        self.assertTrue(set(body["output"]) == {"é"})  # no character cut in half


if __name__ == "__main__":
    unittest.main()
