"""The widgets' ES modules, built from display/js/: each is one valid module, what widgets share
is written once, and tsc's check of the scripts covers every file."""

from __future__ import annotations

import fnmatch
import json
import re
import subprocess

import pytest

from agent_kernel.display.cells_button import InsertCellsButton
from agent_kernel.display.choice import ChoiceCard
from agent_kernel.display.components import ComponentWidget
from agent_kernel.display.form import FormWidget
from agent_kernel.display.scripts import SCRIPTS, widget_script
from agent_kernel.display.stop import INTERRUPT_AFTER_MS, StopButton
from agent_kernel.display.table_widget import TableWidget
from tests.support.paths import REPO

WIDGETS = [ChoiceCard, FormWidget, ComponentWidget, TableWidget, StopButton, InsertCellsButton]
SHARED = {"ack.js": ["acknowledge"], "attention.js": ["announce", "mayTakeFocus", "waitForPerson", "keepFocusOn"]}


def declared_functions(script: str) -> list[str]:
    return re.findall(r"^function (\w+)\(", script, flags=re.MULTILINE)


@pytest.mark.parametrize("widget", WIDGETS, ids=lambda w: w.__name__)
def test_each_widget_gets_one_module_that_parses(widget, tmp_path):
    module = widget._esm
    assert module.startswith((SCRIPTS / "ack.js").read_text(encoding="utf-8"))
    assert module.count("export default") == 1
    names = declared_functions(module)
    assert "acknowledge" in names and len(names) == len(set(names)), names  # a module declares a name once
    path = tmp_path / f"{widget.__name__}.mjs"
    path.write_text(module, encoding="utf-8")
    checked = subprocess.run(["node", "--check", str(path)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stderr


def test_the_cards_that_wait_share_one_copy_of_announcing_and_focus():
    for widget in (ChoiceCard, FormWidget):
        assert set(SHARED["attention.js"]) <= set(declared_functions(widget._esm))
    for path in SCRIPTS.glob("*.js"):
        if path.name in SHARED:
            assert declared_functions(path.read_text(encoding="utf-8")) == SHARED[path.name]
            continue
        own = set(declared_functions(path.read_text(encoding="utf-8")))
        copied = own & {name for names in SHARED.values() for name in names}
        assert not copied, f"{path.name} declares {copied}: they are in ack.js / attention.js"


def test_shared_files_then_constants_then_the_widgets_own_script():
    module = widget_script("stop.js", "attention.js", constants={"INTERRUPT_AFTER_MS": 250, "LABEL": 'say "hi"'})
    ack, attention, stop = (SCRIPTS / name for name in ("ack.js", "attention.js", "stop.js"))
    constants = 'const INTERRUPT_AFTER_MS = 250;\nconst LABEL = "say \\"hi\\"";\n'
    expected = "".join(p.read_text(encoding="utf-8") for p in (ack, attention)) + constants
    assert module == expected + stop.read_text(encoding="utf-8")
    assert f"const INTERRUPT_AFTER_MS = {INTERRUPT_AFTER_MS};\n" in StopButton._esm


def test_tsc_checks_every_widget_script():
    config = json.loads((REPO / "labextension" / "tsconfig.widgets.json").read_text(encoding="utf-8"))
    base = REPO / "labextension"
    patterns = [(base / pattern).resolve().as_posix() for pattern in config["include"]]
    unchecked = [
        path.name for path in SCRIPTS.glob("*.js") if not any(fnmatch.fnmatch(path.as_posix(), p) for p in patterns)
    ]
    assert unchecked == []
    assert config["compilerOptions"]["checkJs"] is True
    assert all(path.read_text(encoding="utf-8").startswith("// @ts-check") for path in SCRIPTS.glob("*.js"))
