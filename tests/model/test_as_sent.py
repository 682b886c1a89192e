"""The tool inputs kept as the model sent them (agent_kernel.model.as_sent): what the
dispatcher runs for run_code when the conversation records a redacted copy."""

from __future__ import annotations

from agent_kernel.model import as_sent
from agent_kernel.secrets import scrub

TOKEN = "ghp_" + "Xa81Lq2Nw7Vc3Zt6Hy5Km0Bd4Rf9Gs1Jp2Ue"


def use(tool_use_id: str, code: str) -> dict:
    return {"type": "tool_use", "id": tool_use_id, "name": "run_code", "input": {"code": code}}


def test_a_redacted_input_is_given_back_as_sent_once_and_only_for_its_recorded_copy():
    arrived = [
        {"type": "text", "text": "running"},
        use("toolu_as_sent_1", f"t = {TOKEN!r}"),
        use("toolu_as_sent_2", "x = 1"),
    ]
    recorded = scrub(arrived)
    as_sent.keep(arrived, recorded)
    kept = recorded[1]["input"]
    assert kept == {"code": "t = '[secret GitHub Token]'"}
    assert as_sent.take("toolu_as_sent_2", recorded[2]["input"]) is recorded[2]["input"]  # nothing redacted: not kept
    assert as_sent.take("toolu_as_sent_1", {"code": "changed on the way"}) == {"code": "changed on the way"}
    as_sent.keep(arrived, recorded)
    assert as_sent.take("toolu_as_sent_1", kept) == {"code": f"t = {TOKEN!r}"}
    assert as_sent.take("toolu_as_sent_1", kept) is kept  # taken once
    assert as_sent.take(None, kept) is kept  # a component's call has no id


def test_the_input_as_sent_is_still_encodable_and_calls_nobody_took_give_way():
    arrived = [use("toolu_as_sent_3", f"t = {TOKEN!r}  # \ud800")]
    recorded = scrub(arrived)
    as_sent.keep(arrived, recorded)
    assert as_sent.take("toolu_as_sent_3", recorded[0]["input"]) == {"code": f"t = {TOKEN!r}  # \ufffd"}
    for n in range(as_sent.KEPT_CALLS + 10):
        arrived = [use(f"toolu_as_sent_many_{n}", f"t = {TOKEN!r}")]
        as_sent.keep(arrived, scrub(arrived))
    oldest, newest = ({"code": "t = '[secret GitHub Token]'"},) * 2
    assert as_sent.take("toolu_as_sent_many_0", oldest) is oldest
    assert as_sent.take(f"toolu_as_sent_many_{as_sent.KEPT_CALLS + 9}", newest) == {"code": f"t = {TOKEN!r}"}
