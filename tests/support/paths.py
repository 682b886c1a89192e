"""Where things are in the checkout, for tests in any folder (tests/<package>/, tests/browser/, ...)."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
NOTEBOOKS = REPO / "notebooks"
# What a failing browser test leaves behind (git ignores tests/artifacts/).
ARTIFACTS = TESTS / "artifacts" / "browser"
# The documentation's screenshots, rewritten by `make screenshots`.
SCREENSHOTS = REPO / "docs" / "screenshots"
# Scripts the tests run as processes of their own.
MCP_SERVER = str(TESTS / "support" / "mcp_server.py")
INSTALL_CHECK = TESTS / "support" / "install_check.py"
