"""A run's result: what a handler returns or raises, and its wire form (protocol.md, "Reply")."""

from dataclasses import dataclass
from typing import Any, Dict, Optional, Union

SUCCESS = "SUCCESS"
FAILED = "FAILED"

# ax's limits on a result: a longer code is refused (and the result lost), a longer message is
# cut anyway, a longer output refused in a callback. Cutting here keeps every result deliverable.
MAX_CODE = 64
MAX_MESSAGE = 1024
MAX_OUTPUT_BYTES = 64 * 1024


@dataclass(frozen=True)
class Result:
    """A finished run as ax records it. Dedupe stores keep these (see :meth:`to_dict`)."""

    status: str
    code: Optional[str] = None
    message: Optional[str] = None
    output: Optional[str] = None
    stop_retry: bool = False

    def to_dict(self) -> Dict[str, Any]:
        """The reply/callback body fields, cut to ax's limits."""
        body: Dict[str, Any] = {"status": self.status}
        if self.code is not None:
            code = "".join(c for c in str(self.code) if c.isprintable())
            body["code"] = code[:MAX_CODE]
        if self.message is not None:
            body["message"] = self.message[:MAX_MESSAGE]
        if self.output is not None:
            # ax keeps an output's end; cut on bytes, dropping a split character.
            tail = self.output.encode()[-MAX_OUTPUT_BYTES:]
            body["output"] = tail.decode(errors="ignore")
        if self.stop_retry:
            body["stopRetry"] = True
        return body

    @classmethod
    def from_dict(cls, body: Dict[str, Any]) -> "Result":
        """The inverse of :meth:`to_dict`, for stores that keep results as JSON."""
        return cls(
            status=body["status"],
            code=body.get("code"),
            message=body.get("message"),
            output=body.get("output"),
            stop_retry=bool(body.get("stopRetry", False)),
        )


@dataclass(frozen=True)
class Success:
    """A handler's richer success: return it to set a ``code`` or ``output`` besides the
    ``message`` (a plain returned string is the message alone)."""

    message: Optional[str] = None
    code: Optional[str] = None
    output: Optional[str] = None


class Failed(Exception):
    """A failure the handler names: raise it (or return it) for result ``FAILED`` with this
    ``code`` and ``message``. ``stop_retry=True`` makes it final: ax does not retry."""

    def __init__(
        self,
        code: str,
        message: str = "",
        stop_retry: bool = False,
        output: Optional[str] = None,
    ) -> None:
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code
        self.message = message
        self.stop_retry = stop_retry
        self.output = output

    def result(self) -> Result:
        return Result(FAILED, self.code, self.message or None, self.output, self.stop_retry)


def result_of(returned: Union[None, str, Success, Failed, Result]) -> Result:
    """What a handler's return value means."""
    if returned is None:
        return Result(SUCCESS)
    if isinstance(returned, str):
        return Result(SUCCESS, message=returned)
    if isinstance(returned, Success):
        return Result(SUCCESS, returned.code, returned.message, returned.output)
    if isinstance(returned, Failed):
        return returned.result()
    if isinstance(returned, Result):
        return returned
    # Anything else (a dict, a number) is a success whose text is its message.
    return Result(SUCCESS, message=str(returned))


def error_result(error: BaseException) -> Result:
    """An unexpected exception: ``FAILED``, code ``ERROR``, retried by ax."""
    text = str(error)
    # The type's name makes KeyError('x') or an empty message say something.
    message = f"{type(error).__name__}: {text}" if text else type(error).__name__
    return Result(FAILED, "ERROR", message[:MAX_MESSAGE])
