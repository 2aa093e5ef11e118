"""What a handler gets: the run it executes, typed params, and ways to report as it goes."""

import dataclasses
import threading
import types
import typing
from datetime import datetime, timezone
from typing import Any, Callable, Dict, Generic, Optional, TypeVar

from .logs import LogBuffer

P = TypeVar("P")

#: How a handler's params are built from the dispatch's: a dataclass (called with the JSON
#: object's members as keywords, their types checked) or any callable taking the raw value.
ParamsType = Callable[[Any], Any]


# Union[X, Y], and X | Y from Python 3.10 on.
_UNIONS = (typing.Union, getattr(types, "UnionType", typing.Union))


class BadParams(ValueError):
    """Params that do not fit the handler's declared type; the run fails ``BAD_PARAMS``."""


@dataclasses.dataclass
class Run(Generic[P]):
    """One delivery of a run, as the handler sees it."""

    request_id: str
    task_id: int
    attempt: int
    scheduled_at: datetime
    params: P
    #: The broadcast shard this run is (0 of 1 for a task that is not ``BROADCAST``).
    shard_index: int = 0
    shard_total: int = 1
    #: Set when the executor shuts down and the grace for runs in flight is over: a long job
    #: checks it (or waits on it) to stop early. Its result is no longer reported then.
    stopping: threading.Event = dataclasses.field(default_factory=threading.Event)
    _logs: Optional[LogBuffer] = dataclasses.field(default=None, repr=False)

    def log(self, *lines: Any) -> None:
        """Adds lines to the run's log in ax (each argument a line; newlines split it)."""
        if self._logs is not None:
            self._logs.add(lines)

    def progress(self, percent: int) -> None:
        """Sets the run's progress, 0 to 100, shown in ax's console."""
        if self._logs is not None:
            self._logs.set_progress(percent)


def parse_time(text: str) -> datetime:
    """An RFC 3339 UTC time as ax writes it (``2027-02-03T04:05:10.000Z``)."""
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def build_params(params_type: Optional[ParamsType], raw: Any) -> Any:
    """The handler's params from the dispatch's; raises :class:`BadParams` saying why not."""
    if params_type is None:
        return raw
    if dataclasses.is_dataclass(params_type) and isinstance(params_type, type):
        return _dataclass(params_type, raw, "params")
    try:
        return params_type(raw)
    except Exception as error:  # whatever the user's parser raises means "does not fit"
        raise BadParams(f"params: {error}") from error


def _dataclass(cls: type, raw: Any, where: str) -> Any:
    if not isinstance(raw, dict):
        raise BadParams(f"{where} must be a JSON object, not {_json_type(raw)}")
    # get_type_hints resolves string annotations (from __future__ import annotations).
    hints = typing.get_type_hints(cls)
    fields = {field.name: field for field in dataclasses.fields(cls) if field.init}
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        raise BadParams(f"{where}: unknown field {', '.join(map(repr, unknown))}")
    values: Dict[str, Any] = {}
    for name, field in fields.items():
        if name not in raw:
            if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
                raise BadParams(f"{where}: missing field {name!r}")
            continue
        values[name] = _typed(hints.get(name, Any), raw[name], f"{where}.{name}")
    try:
        return cls(**values)
    except Exception as error:  # a __post_init__ refusing a value
        raise BadParams(f"{where}: {error}") from error


def _typed(hint: Any, value: Any, where: str) -> Any:
    """``value`` checked against ``hint`` (shallowly for containers), nested dataclasses
    built. Hints it does not know are taken on trust."""
    if hint is Any:
        return value
    origin = typing.get_origin(hint)
    if origin in _UNIONS:  # Optional[X] is Union[X, None]
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        options = tuple(option for option in options if option is not type(None))
        if len(options) == 1:  # Optional[X]: X's own message says more
            return _typed(options[0], value, where)
        for option in options:
            try:
                return _typed(option, value, where)
            except BadParams:
                pass
        raise BadParams(f"{where} must be {_name(hint)}, not {_json_type(value)}")
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return _dataclass(hint, value, where)
    expected = origin or hint
    if expected is type(None):
        ok = value is None
    elif expected is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif expected is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif expected in (str, bool, list, dict):
        ok = isinstance(value, expected)
    else:
        return value
    if not ok:
        raise BadParams(f"{where} must be {_name(hint)}, not {_json_type(value)}")
    return value


def _name(hint: Any) -> str:
    # A class by its name (str); a typing construct as written (Optional[int], List[str]).
    return hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")


def _json_type(value: Any) -> str:
    names = {type(None): "null", bool: "a boolean", int: "a number", float: "a number",
             str: "a string", list: "an array", dict: "an object"}
    return names.get(type(value), type(value).__name__)
