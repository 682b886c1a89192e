"""Form values: typed on the way back, errors that name the field."""

from __future__ import annotations

import pytest

from agent_kernel.display.form import FieldError, coerce, defaults, form_bundle, typed_values
from agent_kernel.display.waiting import STOPPED, Nobody


@pytest.mark.parametrize(
    ("field", "raw", "value"),
    [
        ({"type": "number"}, "42", 42),
        ({"type": "number"}, "2.5", 2.5),
        ({"type": "number"}, "1e3", 1000.0),
        ({"type": "number"}, 7, 7),
        ({"type": "number"}, "", None),
        ({"type": "checkbox"}, True, True),
        ({"type": "checkbox"}, None, False),
        ({"type": "date"}, "2026-03-01", "2026-03-01"),
        ({"type": "date"}, "2026-03-01T10:00", "2026-03-01"),
        ({"type": "select", "options": ["a", "b"]}, "b", "b"),
        ({"type": "text"}, "  spaced  ", "  spaced  "),
        ({"type": "textarea"}, "", None),
    ],
)
def test_values_are_typed(field, raw, value):
    assert coerce({"name": "f", **field}, raw) == value


@pytest.mark.parametrize(
    ("field", "raw", "message"),
    [
        ({"type": "number"}, "ten", "must be a number, not 'ten'"),
        ({"type": "number"}, "nan", "must be a finite number"),
        ({"type": "number"}, True, "must be a number"),
        ({"type": "date"}, "01/03/2026", "must be a date as YYYY-MM-DD"),
        ({"type": "select", "options": ["a", "b"]}, "c", "must be one of a, b"),
        ({"type": "text", "required": True}, " ", "is required"),
        ({"type": "checkbox"}, "yes", "must be true or false"),
    ],
)
def test_values_that_do_not_fit(field, raw, message):
    with pytest.raises(FieldError, match=message):
        coerce({"name": "f", **field}, raw)


def test_typed_values_collect_every_error_by_field():
    fields = [
        {"name": "n", "label": "Count", "type": "number", "required": True},
        {"name": "d", "label": "Day", "type": "date"},
    ]
    _, errors = typed_values(fields, {"n": "", "d": "soon"})
    assert errors == {"n": "Count is required.", "d": "Day must be a date as YYYY-MM-DD, not 'soon'."}
    assert defaults(fields) == {"n": None, "d": None}


def test_static_form_says_how_it_ended():
    fields = [{"name": "n", "label": "Count", "type": "number", "default": 3, "required": True}]
    assert form_bundle("Setup", fields, "Go", None)["text/plain"] == "Setup · Waiting for an answer\n  Count *: 3"
    assert form_bundle("Setup", fields, "Go", {"action": "submit", "data": {"n": 9}})["text/plain"].endswith(
        "Count *: 9"
    )
    assert form_bundle("Setup", fields, "Go", {"action": "dismiss"})["text/plain"] == "Setup · Dismissed\n  Count *: —"
    assert "Stopped before it was answered" in form_bundle("Setup", fields, "Go", STOPPED)["text/plain"]
    nobody = form_bundle("", fields, "Go", Nobody("papermill"))
    assert nobody["text/plain"].startswith("Form · No user present (papermill): the defaults were used")
    assert "<strong>Form</strong>" in nobody["text/html"]


def test_a_waiting_form_carries_its_static_record_for_a_notebook_reopened_without_its_kernel():
    from agent_kernel.display.fallback import WIDGET_VIEW_MIME, WIDGET_WITH_FALLBACK_MIME
    from agent_kernel.display.form import FormWidget

    form = FormWidget(title="Report", fields=[{"name": "owner", "label": "Owner", "type": "text", "required": True}])
    data, _ = form._repr_mimebundle_()
    assert data[WIDGET_WITH_FALLBACK_MIME] == data[WIDGET_VIEW_MIME]
    assert "Waiting for an answer" in data["text/html"] and data["text/plain"].startswith("Report · Waiting")
    form.close()
