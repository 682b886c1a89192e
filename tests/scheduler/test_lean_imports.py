"""The scheduler's own processes skip jsonschema's IRI checker and still read notebooks."""

from __future__ import annotations

import json
import subprocess
import sys

CHECK = r"""
import json, sys
from agent_kernel.scheduler.lean_imports import refuse_unused_slow_imports

refuse_unused_slow_imports()
import jsonschema, nbformat

nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")])
nbformat.validate(nb)
print(json.dumps({
    "refused": sys.modules["rfc3987_syntax"] is None,
    "lark_imported": "lark" in sys.modules,
    "iri_checked": "iri" in jsonschema.FormatChecker().checkers,
    "uri_checked": "uri-reference" in jsonschema.Draft7Validator.FORMAT_CHECKER.checkers,
    "read_back": nbformat.reads(nbformat.writes(nb), as_version=4).cells[0].source,
}))
"""


def test_a_runner_process_refuses_the_iri_grammar_and_still_validates_notebooks():
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report == {
        "refused": True, "lark_imported": False, "iri_checked": False, "uri_checked": True, "read_back": "1 + 1",
    }  # fmt: skip
