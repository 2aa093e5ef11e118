"""An executor process for the kill -9 and shutdown tests: `/work` works `seconds` (params),
or only on attempt 1 with `first_attempt_only`, and says on stdout what it does."""

import logging
import os
from typing import Any, Dict

from ax_executor import Executor, Run

# DEBUG: each request's answer is logged, so the tests see the 202 go out.
logging.basicConfig(level=logging.DEBUG, format="%(levelname)s %(message)s")
executor = Executor(port=int(os.environ["PORT"]), reply_within=0.2, drain_delay=0,
                    shutdown_grace=float(os.environ.get("GRACE", "30")))


@executor.handler("/work")
def work(run: Run[Dict[str, Any]]) -> str:
    print(f"started {run.request_id} {run.attempt}", flush=True)
    seconds = run.params.get("seconds", 0)
    if run.params.get("first_attempt_only") and run.attempt > 1:
        seconds = 0
    if run.stopping.wait(seconds):
        print(f"stopping {run.request_id}", flush=True)
        return "stopped early"
    print(f"finished {run.request_id} {run.attempt}", flush=True)
    return f"worked {seconds} s on attempt {run.attempt}"


executor.serve()
print("exited", flush=True)
