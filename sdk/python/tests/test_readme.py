"""The README says what the code does: its first example is examples/reconcile.py, and its
example of another dedupe store works as written."""

import re
import tempfile
import unittest
from pathlib import Path
from typing import Any, Dict, List

from tests import support
from ax_executor import Claim, Result

OK = Result("SUCCESS", message="done")


def python_blocks() -> List[str]:
    return re.findall(r"```python\n(.*?)```", (support.SDK / "README.md").read_text(), re.S)


class ReadmeTest(unittest.TestCase):
    def test_it_starts_with_the_example_file(self) -> None:
        readme = (support.SDK / "README.md").read_text()
        self.assertLess(readme.index("```python"), readme.index("\n## "))
        example = (support.SDK / "examples" / "reconcile.py").read_text()
        self.assertEqual(python_blocks()[0], example)
        self.assertLessEqual(len([line for line in example.splitlines() if line.strip()]), 13)

    def test_the_sqlite_store_works_as_written(self) -> None:
        block = next(code for code in python_blocks() if "class SqliteDedupe" in code)
        namespace: Dict[str, Any] = {}
        exec(block.split("executor = Executor(")[0], namespace)
        with tempfile.TemporaryDirectory() as tmp:
            store = namespace["SqliteDedupe"](str(Path(tmp) / "runs.db"))
            self.assertEqual(store.claim("r1"), Claim.new())
            self.assertEqual(store.claim("r1"), Claim.running())
            store.finish("r1", OK)
            self.assertEqual(store.claim("r1"), Claim.done(OK))
            store.release("r1")
            self.assertEqual(store.claim("r1"), Claim.new())
            store.db.close()


if __name__ == "__main__":
    unittest.main()
