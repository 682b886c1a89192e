"""Model prices: the built-in list, overrides, and the cost of a call."""

from __future__ import annotations

import pytest
from traitlets import TraitError

from agent_kernel.config import AgentKernel
from agent_kernel.model.prices import PRICES, Price, call_cost, price_for


def test_known_models_dated_snapshots_and_unknown_names():
    assert price_for("claude-sonnet-4-5") == Price(3, 15, 3.75, 0.30, 6)
    assert price_for("claude-haiku-4-5-20251001") == PRICES["claude-haiku-4-5"]
    assert price_for("claude-3-7-sonnet-latest") == PRICES["claude-3-7-sonnet"]
    # Never a price guessed from a similar name.
    for unknown in ("claude-sonnet-9", "my-proxy-model", "scripted-model", "", None):
        assert price_for(unknown) is None


def test_every_built_in_price_is_consistent():
    for name, price in PRICES.items():
        assert price.output > price.input > price.cache_read > 0, name
        assert price.cache_write >= price.input, name


def test_cost_of_a_call_with_cache_reads_and_writes():
    sonnet = PRICES["claude-sonnet-4-5"]  # $3 in, $15 out, $3.75 5m write, $6 1h write, $0.30 read
    cost = call_cost(sonnet, input_tokens=1_000, output_tokens=2_000, cache_read=100_000, cache_write=10_000)
    assert cost == pytest.approx((1_000 * 3 + 2_000 * 15 + 100_000 * 0.30 + 10_000 * 3.75) / 1e6)
    one_hour = call_cost(sonnet, input_tokens=0, output_tokens=0, cache_write=10_000, cache_write_1h=4_000)
    assert one_hour == pytest.approx((6_000 * 3.75 + 4_000 * 6) / 1e6)


def test_a_long_prompt_is_billed_at_the_long_tier():
    haiku = PRICES["claude-haiku-5-5"]
    short = call_cost(haiku, input_tokens=100_000, output_tokens=1_000)
    long = call_cost(haiku, input_tokens=60_000, output_tokens=1_000, cache_read=40_001)
    assert short == pytest.approx((100_000 * 0.10 + 1_000 * 0.50) / 1e6)
    assert long == pytest.approx((60_000 * 0.50 + 1_000 * 2.50 + 40_001 * 0.05) / 1e6)


def test_overrides_add_and_replace_models():
    overrides = {
        "my-proxy-model": {"input": 2, "output": 8},
        "claude-sonnet-4-5": {"input": 1, "output": 2, "cache_read": 0},
    }
    mine = price_for("my-proxy-model", overrides)
    assert (mine.input, mine.output, mine.cache_write, mine.cache_read) == (2, 8, 2.5, pytest.approx(0.2))
    assert price_for("claude-sonnet-4-5-20250929", overrides).cache_read == 0
    assert price_for("claude-opus-4-5", overrides) == PRICES["claude-opus-4-5"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"m": {"input": 1}}, "needs output"),
        ({"m": {"input": 1, "output": "cheap"}}, "output must be a number"),
        ({"m": {"input": -1, "output": 1}}, "input must be a number"),
        ({"m": {"input": 1, "output": 1, "cache_hit": 0.1}}, "unknown price field 'cache_hit'"),
        ({"m": 3}, "a price is a dict"),
    ],
)
def test_a_bad_prices_setting_says_what_is_wrong(value, message):
    with pytest.raises(TraitError, match=message):
        AgentKernel(prices=value)
