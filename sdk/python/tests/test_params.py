"""Unit tests of typed params and of what a handler's return value means."""

import unittest
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from tests import support  # noqa: F401
from ax_executor import BadParams, Failed, Result, Success
from ax_executor.results import error_result, result_of
from ax_executor.run import build_params


@dataclass
class Window:
    days: int


@dataclass
class Reconcile:
    region: str
    limit: Optional[int] = None
    ratio: float = 1.0
    tags: List[str] = field(default_factory=list)
    window: Optional[Window] = None
    extra: Any = None


class ParamsTest(unittest.TestCase):
    def test_untyped_params_are_the_json_value(self) -> None:
        self.assertEqual(build_params(None, {"a": [1]}), {"a": [1]})

    def test_a_dataclass_is_built_and_checked(self) -> None:
        params = build_params(Reconcile, {"region": "eu", "limit": 3, "ratio": 2,
                                          "window": {"days": 7}, "extra": {"x": 1}})
        self.assertEqual(params, Reconcile("eu", 3, 2, [], Window(7), {"x": 1}))
        self.assertEqual(build_params(Reconcile, {"region": "eu", "limit": None}).limit, None)

    def bad(self, raw: Any, says: str, params_type: Any = Reconcile) -> None:
        with self.assertRaises(BadParams) as bad:
            build_params(params_type, raw)
        self.assertIn(says, str(bad.exception))

    def test_params_that_do_not_fit(self) -> None:
        self.bad({}, "missing field 'region'")
        self.bad({"zone": "eu"}, "unknown field 'zone'")
        self.bad({"region": 5}, "params.region must be str, not a number")
        self.bad({"region": "eu", "limit": "3"}, "params.limit must be int, not a string")
        self.bad({"region": "eu", "limit": True}, "params.limit")  # a bool is no int
        self.bad({"region": "eu", "tags": "a"}, "params.tags must be List[str]")
        self.bad({"region": "eu", "window": {"days": "7"}}, "params.window.days must be int")
        self.bad(["eu"], "params must be a JSON object, not an array")

    def test_a_callable_parses_and_its_errors_mean_bad_params(self) -> None:
        def parse(raw: Dict[str, Any]) -> str:
            return raw["region"].upper()

        self.assertEqual(build_params(parse, {"region": "eu"}), "EU")
        self.bad({}, "params: 'region'", parse)


class ResultOfTest(unittest.TestCase):
    def test_return_values(self) -> None:
        self.assertEqual(result_of(None), Result("SUCCESS"))
        self.assertEqual(result_of("42 rows"), Result("SUCCESS", message="42 rows"))
        self.assertEqual(result_of(Success("42 rows", code="0", output="log")),
                         Result("SUCCESS", "0", "42 rows", "log"))
        self.assertEqual(result_of(Failed("UPSTREAM_DOWN", "503", stop_retry=True)),
                         Result("FAILED", "UPSTREAM_DOWN", "503", stop_retry=True))
        self.assertEqual(result_of(Result("FAILED", "X")), Result("FAILED", "X"))

    def test_an_unexpected_error_is_a_retried_failure_with_its_text(self) -> None:
        self.assertEqual(error_result(KeyError("region")),
                         Result("FAILED", "ERROR", "KeyError: 'region'"))
        self.assertEqual(error_result(RuntimeError()), Result("FAILED", "ERROR", "RuntimeError"))
        self.assertEqual(len(error_result(ValueError("x" * 5000)).message or ""), 1024)
        self.assertFalse(error_result(ValueError()).stop_retry)


if __name__ == "__main__":
    unittest.main()
