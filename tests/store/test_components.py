"""UI components in the store: every version kept, deletion keeps the versions."""

from __future__ import annotations

from agent_kernel.store import Store
from agent_kernel.store.components import Components, ComponentVersion

COUNTER = ComponentVersion(
    "counter",
    0,
    "Counts clicks.",
    "<button id=b>+1</button>",
    "button{color:red}",
    "ak.setState({n: 1})",
    {"n": 0, "label": "clicks"},
    ("done",),
    ("db_sql",),
)


def test_versions_are_kept_and_read_back(tmp_path):
    with Store(tmp_path / "a.duckdb").connect() as con:
        kept = Components(con)
        assert kept.get("counter") is None and kept.list() == []
        assert kept.save(COUNTER, "s1") == 1
        assert kept.save(ComponentVersion(**{**COUNTER.as_dict(), "html": "<p>v2</p>"}), "s1") == 2
        current = kept.get("counter")
        assert current is not None and current.version == 2 and current.html == "<p>v2</p>"
        first = kept.get("counter", 1)
        assert first == ComponentVersion(
            **{**COUNTER.as_dict(), "version": 1, "messages": ("done",), "tools": ("db_sql",)}
        )
        assert first.state == {"n": 0, "label": "clicks"}
        assert [c.name for c in kept.list()] == ["counter"]


def test_delete_keeps_the_versions_and_a_new_create_numbers_on(tmp_path):
    with Store(tmp_path / "a.duckdb").connect() as con:
        kept = Components(con)
        kept.save(COUNTER)
        assert kept.delete("counter") is True and kept.delete("counter") is False
        assert kept.get("counter") is None and not kept.exists("counter")
        assert kept.get("counter", 1) is not None  # an old version stays readable
        assert kept.save(COUNTER) == 2
