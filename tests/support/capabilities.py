"""What this Python's packages can do, for tests that need it.

On Python 3.10 pip installs ipykernel 7.3 and DuckDB 1.x (the newer ones need 3.11).
agent-kernel degrades there on purpose — widgets that wait report that nobody can answer,
and db_sql is not offered — so the tests of those features run where they exist. CI runs
Python 3.11, where every test runs.
"""

from __future__ import annotations

import pytest

from agent_kernel.display.presence import widget_replies_during_cells
from agent_kernel.sql.guard import sql_guard_available

needs_widget_replies = pytest.mark.skipif(
    not widget_replies_during_cells(),
    reason="ipykernel < 7.4 (all Python 3.10 gets) hands widget messages to a cell only after it ends",
)
needs_sql_guard = pytest.mark.skipif(
    not sql_guard_available(), reason="db_sql needs DuckDB 2.0, which has no wheels for Python 3.10"
)
