"""ax-executor: write executors for ax, the distributed cron scheduler, in a few lines.

    executor = Executor(group="billing", url="http://127.0.0.1:9000")

    @executor.handler("/reconcile", params=ReconcileParams)
    def reconcile(run: Run[ReconcileParams]) -> str:
        ...

    executor.serve()

The wire protocol is ax's docs/protocol.md.
"""

from .callback import backoff
from .dedupe import Claim, DedupeStore, MemoryDedupe
from .executor import Executor
from .results import Failed, Result, Success
from .run import BadParams, Run
from .signature import SignatureError, sign, verify

__version__ = "0.1.0"

__all__ = [
    "BadParams",
    "Claim",
    "DedupeStore",
    "Executor",
    "Failed",
    "MemoryDedupe",
    "Result",
    "Run",
    "SignatureError",
    "Success",
    "backoff",
    "sign",
    "verify",
]
