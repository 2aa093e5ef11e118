import os
from dataclasses import dataclass
from ax_executor import Executor, Run

@dataclass
class Reconcile:
    region: str

executor = Executor(group="billing", url=os.environ.get("EXECUTOR_URL", "http://127.0.0.1:9000"))

@executor.handler("/reconcile", params=Reconcile)
def reconcile(run: Run[Reconcile]) -> str:
    run.log(f"reconciling {run.params.region}")
    run.progress(50)
    return f"reconciled {run.params.region}"

executor.serve()
