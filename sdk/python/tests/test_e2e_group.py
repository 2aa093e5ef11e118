"""End-to-end against a real `ax serve`, executors in groups: registration, heartbeats and
removal (5), broadcast shards (8), and the README's example run as a process, with ax's
conformance check against it (10)."""

import subprocess
import threading
import time
import unittest
import urllib.error
from typing import Any, Dict, List

from tests import support
from tests.support import (ADMIN_TOKEN, AX_BIN, EXECUTOR_TOKEN, SDK, SECRET, Ax,
                           dispatch_body, free_port, post_signed, wait_for)
from ax_executor import Executor, Run

ax: Ax


def setUpModule() -> None:
    global ax
    ax = Ax()


def tearDownModule() -> None:
    ax.close()


def member(group: str, url: str) -> Dict[str, Any]:
    """The group's member at ``url`` as ax lists it ({} if none)."""
    found = [m for m in ax.members(group) if m["url"].rstrip("/") == url.rstrip("/")]
    return found[0] if found else {}


class GroupTest(unittest.TestCase):
    def executor(self, group: str, **options: Any) -> Executor:
        url = f"http://127.0.0.1:{free_port()}"
        options = {"secret": SECRET, "ax_url": ax.url, "group": group, "url": url,
                   "token": EXECUTOR_TOKEN, "drain_delay": 0, "shutdown_grace": 1, **options}
        executor = Executor(**options)
        self.addCleanup(executor.stop)
        return executor

    def test_5_registration_heartbeats_and_removal(self) -> None:
        executor = self.executor("billing", capacity=4, drain_delay=1)
        executor.add_handler("/run", lambda run: "ran")
        executor.start()
        url = executor.url or ""
        joined = member("billing", url)
        self.assertEqual((joined.get("registered"), joined.get("state"), joined.get("capacity")),
                         (True, "HEALTHY", 4))

        # ax drops a member not heard from for 3 s (AX_EXECUTOR_MEMBER_TTL_SECS): heartbeats
        # (every second, as ax answers) keep it through twice that.
        first_seen = joined["lastSeenAt"]
        until = time.monotonic() + 6
        while time.monotonic() < until:
            now = member("billing", url)
            self.assertEqual((now.get("registered"), now.get("state")), (True, "HEALTHY"), now)
            time.sleep(0.25)
        self.assertGreater(member("billing", url)["lastSeenAt"], first_seen)

        # Shutdown: removed at once, and dispatches still answered during the drain delay.
        stopping = threading.Thread(target=executor.stop)
        stopping.start()
        gone = wait_for("the member to leave", lambda: member("billing", url).get("goneAt")
                        and member("billing", url), timeout=2)
        self.assertEqual(gone["state"], "GONE")
        self.assertIn("unregistered itself", gone["goneReason"])  # not expired
        self.assertEqual(post_signed(f"{url}/run", dispatch_body("drained"))[0], 200)
        stopping.join(10)
        with self.assertRaises(urllib.error.URLError):
            post_signed(f"{url}/run", dispatch_body("too-late"))

    def test_5_a_refused_registration_is_logged(self) -> None:
        executor = self.executor("billing", token="not-a-token-of-ax")
        with self.assertLogs("ax_executor", "ERROR") as logs:
            executor.start()
        self.assertIn("registration in group billing failed (HTTP 401", logs.output[0])
        self.assertEqual(member("billing", executor.url or ""), {})

    def test_8_a_broadcast_gives_each_member_its_shard(self) -> None:
        seen: List[tuple] = []
        lock = threading.Lock()
        executors = []
        for name in ("a", "b"):
            # Any group for an admin's token; the executor token is for billing only.
            executor = self.executor("shards", token=ADMIN_TOKEN)

            def shard(run: Run[Any], name: str = name) -> str:
                with lock:
                    seen.append((run.scheduled_at, name, run.shard_index, run.shard_total))
                return f"{name} took shard {run.shard_index}"

            executor.add_handler("/shard", shard)
            executors.append(executor.start())
        self.assertEqual(len([m for m in ax.members("shards") if m["registered"]]), 2)

        # A manual run of a broadcast task is one run: the schedule's fires are broadcast.
        task = ax.create_task("shards", cron="* * * * * *", timeoutMs=5000,
                              executor={"group": "shards", "path": "/shard",
                                        "routing": "BROADCAST"})["id"]

        def a_whole_fire() -> List[tuple]:
            with lock:
                fires = sorted({at for at, *_ in seen})
                for at in fires:
                    shards = sorted(entry[1:] for entry in seen if entry[0] == at)
                    if len(shards) == 2:
                        return shards
            return []

        shards = wait_for("both shards of a fire", a_whole_fire)
        ax.ok("POST", f"/api/tasks/{task}/pause")
        self.assertEqual(shards, [("a", 0, 2), ("b", 1, 2)])  # in registration order
        runs = [r for r in ax.runs_of(task) if r["shardTotal"] == 2]
        self.assertTrue({r["shardIndex"] for r in runs} >= {0, 1}, runs)


class ExampleTest(unittest.TestCase):
    """examples/reconcile.py as a user runs it, in group billing."""

    example: support.Process
    url: str

    @classmethod
    def setUpClass(cls) -> None:
        cls.url = f"http://127.0.0.1:{free_port()}"
        cls.example = support.python_process(SDK / "examples" / "reconcile.py", {
            "EXECUTOR_URL": cls.url, "AX_URL": ax.url, "AX_SIGNING_SECRET": SECRET,
            "AX_EXECUTOR_TOKEN": EXECUTOR_TOKEN})
        try:
            wait_for("the example to join billing", lambda: member("billing", cls.url)
                     .get("registered"))
        except BaseException:
            cls.example.close()
            raise

    @classmethod
    def tearDownClass(cls) -> None:
        cls.example.close()

    def test_example_reconciles_and_leaves_on_sigterm(self) -> None:
        task = ax.create_task("example", params={"region": "eu"},
                              executor={"group": "billing", "path": "/reconcile"})["id"]
        rid = ax.trigger(task)
        run = ax.final_run(rid)
        self.assertEqual((run["status"], run["message"]), ("SUCCESS", "reconciled eu"))
        self.assertEqual(run["member"].rstrip("/"), self.url)
        attempt = ax.ok("GET", f"/api/instances/{rid}/log")["attempts"][0]
        self.assertEqual([line["text"] for line in attempt["lines"]], ["reconciling eu"])
        self.assertEqual(attempt["progress"], 50)

    def test_10_ax_executor_check_passes(self) -> None:
        help = subprocess.run([AX_BIN, "executor", "check", "--help"], capture_output=True)
        if help.returncode != 0:
            self.fail(f"`{AX_BIN} executor check` is not in this binary (not written yet?): "
                      f"{help.stderr.decode(errors='replace')[:300]}")
        check = subprocess.run(
            [AX_BIN, "executor", "check", self.url, "--path", "/reconcile", "--secret", SECRET,
             "--params", '{"region":"eu"}'], capture_output=True, text=True, timeout=60)
        self.assertEqual(check.returncode, 0, f"{check.stdout}\n{check.stderr}")

    def test_z_sigterm_leaves_the_group_and_exits(self) -> None:
        self.example.signal(15)
        self.assertEqual(self.example.popen.wait(10), 0, self.example.output())
        self.assertIn("unregistered itself", member("billing", self.url).get("goneReason", ""))


if __name__ == "__main__":
    unittest.main()
