"""Prices (the --medhelm-prices TOML file and litellm's local table) and exact cost arithmetic."""

from __future__ import annotations

import json
import math
import random

import pytest
from report_fixtures import MODELS, PRICES_TOML, no_network

from pytest_medhelm.cost import (
    Prices,
    PricesError,
    add_costs,
    cost,
    litellm_price,
    parse_prices,
    per_token,
)


@pytest.fixture
def prices_file(tmp_path):
    def write(text: str):
        path = tmp_path / "prices.toml"
        path.write_text(text, encoding="utf-8")
        return path

    return write


def test_prices_file_gives_per_token_prices(prices_file):
    prices = Prices.load(prices_file(PRICES_TOML))
    assert prices.price_for("openai/gpt-4o") == (2.5e-6, 1e-5)
    assert prices.price_for("hosted_vllm/llama-3.3-70b") == (7.1e-7, 7.1e-7)
    assert prices.source_of("openai/gpt-4o") == "file"
    # the user's name first, then the litellm model string sent
    assert prices.price_for("local/mine", "hosted_vllm/llama-3.3-70b") == (7.1e-7, 7.1e-7)


def test_empty_prices_file_is_valid(prices_file):
    assert parse_prices(prices_file("# nothing priced yet\n")) == {}


def test_integer_prices_are_accepted(prices_file):
    path = prices_file('["m"]\ninput_per_million = 3\noutput_per_million = 15\n')
    assert parse_prices(path) == {"m": (3e-6, 1.5e-5)}


def test_cost_with_2_50_and_10_00_is_exactly_tokens_times_prices(prices_file):
    prices = Prices.load(prices_file(PRICES_TOML))
    rng = random.Random(0)
    for _ in range(2000):
        tokens_in, tokens_out = rng.randrange(0, 200_000), rng.randrange(0, 8192)
        value = prices.cost("openai/gpt-4o", "openai/gpt-4o", tokens_in, tokens_out)
        assert value == tokens_in * 2.5e-6 + tokens_out * 1e-5  # bit for bit, not approximately
        # and so is the cost recorded for an answer, whatever litellm would have said
        assert prices.completion_cost("openai/gpt-4o", "openai/gpt-4o", tokens_in, tokens_out,
                                      reported=123.0) == value


def test_cost_survives_the_json_round_trip_exactly(prices_file):
    """The JSON results file holds the same float: json writes the shortest repr, which reads back exactly."""
    from report_fixtures import sample_records

    prices = Prices.load(prices_file(PRICES_TOML))
    records = sample_records(prices)
    back = json.loads(json.dumps(records))
    for rec in back:
        if rec["model"] == "openai/gpt-4o" and rec["error"] is None:
            assert rec["cost_usd"] == rec["tokens_in"] * 2.5e-6 + rec["tokens_out"] * 1e-5


def test_per_token_is_the_decimal_literal_shifted_by_six_places():
    # p / 1e6 is off by one unit in the last place for many two-decimal prices; per_token never is
    rng = random.Random(1)
    for _ in range(20_000):
        text = f"{rng.randrange(0, 100_000) / 100:.2f}"
        assert per_token(float(text)) == float(text + "e-6")
    assert per_token(2.50) == 2.5e-6 and per_token(10.00) == 1e-5 and per_token(0) == 0.0


@pytest.mark.parametrize("text, table, key, words", [
    ('["m"]\ninput_per_million = 1.0\n', "m", "output_per_million", "missing"),
    ('["m"]\ninput_per_million = 1.0\noutput_per_million = 2.0\ncurrency = "USD"\n', "m", "currency",
     "unknown key"),
    ('["m"]\ninput_per_million = -1.0\noutput_per_million = 2.0\n', "m", "input_per_million", ">= 0"),
    ('["m"]\ninput_per_million = "2.50"\noutput_per_million = 2.0\n', "m", "input_per_million", "a string"),
    ('["m"]\ninput_per_million = true\noutput_per_million = 2.0\n', "m", "input_per_million", "a boolean"),
    ('["m"]\ninput_per_million = nan\noutput_per_million = 2.0\n', "m", "input_per_million", "finite"),
    ('["m"]\ninput_per_million = 1.0\noutput_per_million = inf\n', "m", "output_per_million", "finite"),
    ('[gpt-4o.mini]\ninput_per_million = 1.0\noutput_per_million = 2.0\n', "gpt-4o", "mini", "quote"),
])
def test_bad_prices_name_the_file_the_table_and_the_key(prices_file, text, table, key, words):
    path = prices_file(text)
    with pytest.raises(PricesError) as info:
        Prices.load(path)
    message = str(info.value)
    assert str(path) in message and f'["{table}"]' in message and f"key {key}" in message and words in message
    assert (info.value.path, info.value.table, info.value.key) == (str(path), table, key)


def test_a_value_that_is_not_a_table_and_invalid_toml_are_errors(prices_file):
    path = prices_file('"openai/gpt-4o" = 2.5\n')
    with pytest.raises(PricesError, match="'openai/gpt-4o' is a float, not a table"):
        Prices.load(path)
    path = prices_file('["m"\ninput_per_million = 1\n')
    with pytest.raises(PricesError, match="not valid TOML") as info:
        Prices.load(path)
    assert str(path) in str(info.value)
    with pytest.raises(PricesError, match="cannot be read"):
        Prices.load(path.parent / "absent.toml")


def test_litellm_local_table_knows_gpt_4o_mini_offline():
    """litellm's own table (LITELLM_LOCAL_MODEL_COST_MAP: the copy it ships) prices gpt-4o-mini, offline."""
    from pytest_medhelm.thirdparty import import_litellm

    litellm = import_litellm()
    entry = litellm.model_cost["gpt-4o-mini"]
    with no_network() as attempts:
        price = Prices().price_for("openai/gpt-4o-mini")
    assert attempts == []
    assert price == (entry["input_cost_per_token"], entry["output_cost_per_token"])
    assert price is not None and 0 < price[0] < price[1]
    assert Prices().source_of("openai/gpt-4o-mini") == "litellm"
    assert litellm_price("gpt-4o-mini") == price  # the bare name too


def test_the_bundled_file_read_without_litellm_is_litellms_table():
    """Without litellm imported, the same table is read from the JSON file litellm ships (no seconds-long import)."""
    from pytest_medhelm.thirdparty import bundled_price_table, import_litellm

    with no_network() as attempts:
        table = bundled_price_table()
    assert attempts == [] and table is not None
    model_cost = import_litellm().model_cost
    for name in ("gpt-4o-mini", "gpt-4o", "together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo"):
        assert table[name]["input_cost_per_token"] == model_cost[name]["input_cost_per_token"]
        assert table[name]["output_cost_per_token"] == model_cost[name]["output_cost_per_token"]


def test_a_prices_file_overrides_litellm(prices_file):
    prices = Prices.load(prices_file('["openai/gpt-4o-mini"]\ninput_per_million = 1\noutput_per_million = 2\n'))
    assert prices.price_for("openai/gpt-4o-mini") == (1e-6, 2e-6)


def test_unknown_models_cost_unknown_never_zero():
    prices = Prices()
    for name in ("hosted_vllm/my-finetune", "openai/toy-model"):  # (local/...: $0, tests/e2e/test_local_model_run.py)
        assert prices.price_for(name) is None
        assert prices.cost(name, name, 100, 10) is None
        assert prices.completion_cost(name, name, 100, 10, reported=None) is None
    # a provider prefix only falls back to the bare name under that same provider
    assert prices.price_for("hosted_vllm/gpt-4o-mini") is None
    assert cost(10, 10, None) is None and cost(None, 10, (1.0, 1.0)) is None


def test_completion_cost_prefers_file_then_reported_then_table(prices_file):
    prices = Prices.load(prices_file(PRICES_TOML))
    assert prices.completion_cost("openai/gpt-4o-mini", "openai/gpt-4o-mini", 1000, 10, reported=0.5) == 0.5
    table = prices.price_for("openai/gpt-4o-mini")
    assert prices.completion_cost("openai/gpt-4o-mini", "openai/gpt-4o-mini", 1000, 10) == cost(1000, 10, table)


def test_add_costs():
    assert add_costs([0.1, 0.2, 0.3]) == 0.6  # fsum: correctly rounded
    assert add_costs([0.1, None]) is None
    assert add_costs([]) == 0.0


def test_model_totals_equal_total_tokens_times_file_prices(prices_file):
    from report_fixtures import JUDGES, catalogue, sample_records

    from pytest_medhelm.report.results import build_results

    prices = Prices.load(prices_file(PRICES_TOML))
    records = sample_records(prices)
    results = build_results(records, catalogue(), models=list(MODELS), judges=list(JUDGES), prices=prices)
    rows = {r["model"]: r for r in results["models"]}
    gpt = rows["openai/gpt-4o"]
    instance_sum = math.fsum(i["cost_usd"] for i in results["instances"] if i["model"] == "openai/gpt-4o")
    assert gpt["cost_usd"] == pytest.approx(instance_sum, rel=1e-12)
    assert gpt["cost_usd"] == gpt["tokens_in"] * 2.5e-6 + gpt["tokens_out"] * 1e-5  # exactly
    # priced where the rows are built: whatever the answers' recorded costs (a provider's reported one), a model
    # the file prices costs its tokens at the file's prices; without prices, the sum of the answers' costs
    reported = [{**r, "cost_usd": 0.125} for r in records]
    n_gpt = sum(r["model"] == "openai/gpt-4o" for r in reported)
    unpriced = {r["model"]: r for r in build_results(reported, catalogue(), models=list(MODELS))["models"]}
    assert unpriced["openai/gpt-4o"]["cost_usd"] == 0.125 * n_gpt
    priced = {r["model"]: r for r in build_results(reported, catalogue(), models=list(MODELS), prices=prices)["models"]}
    assert priced["openai/gpt-4o"]["cost_usd"] == gpt["cost_usd"]
    llama = rows["hosted_vllm/llama-3.3-70b"]
    assert llama["cost_usd"] == llama["tokens_in"] * 7.1e-7 + llama["tokens_out"] * 7.1e-7
    # a model priced by litellm only keeps the sum of its instances (None when one is unknown)
    assert prices.total_cost("openai/gpt-4o-mini", None, 10, 1, [0.25, 0.25]) == 0.5
    assert prices.total_cost("openai/gpt-4o-mini", None, 10, 1, [0.25, None]) is None
    assert prices.total_cost("openai/gpt-4o", None, 10, 1, [None]) == 10 * 2.5e-6 + 1e-5


def test_a_model_at_its_own_endpoint_is_priced_by_the_file_only(prices_file):
    prices = Prices.load(prices_file(PRICES_TOML))
    # gpt-4o-mini has a litellm price and a reported cost: neither is what a private endpoint costs
    assert prices.completion_cost("openai/gpt-4o-mini", None, 1000, 10, reported=0.5, as_provider=False) is None
    assert prices.completion_cost("openai/gpt-4o", None, 1000, 10, reported=0.5, as_provider=False) == (
        1000 * 2.5e-6 + 10 * 1e-5)


def test_the_example_prices_file_holds_the_papers_prices():
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "examples" / "prices-medhelm-paper.toml"
    table = parse_prices(path)
    assert table["openai/gpt-4o-2024-05-13"] == (2.5e-6, 1e-5)
    assert table["anthropic/claude-3-7-sonnet-20250219"] == (3e-6, 1.5e-5)
    assert table["together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo"] == (7.1e-7, 7.1e-7)
    from pytest_medhelm.jury import DEFAULT_JUDGES

    assert set(DEFAULT_JUDGES) <= set(table)  # the default jury is priced


@pytest.mark.parametrize("value, text", [(None, "unknown"), (0.0, "$0.00"), (7.5e-6, "$0.0000075"),
                                         (0.0012, "$0.0012"), (0.5, "$0.5000"), (1234.5, "$1,234.50")])
def test_a_small_known_cost_never_prints_as_zero(value, text):
    from pytest_medhelm.cost import format_usd

    assert format_usd(value) == text
