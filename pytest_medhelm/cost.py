"""Prices and cost: what a request cost in USD, or ``None`` when nobody knows (never 0 for unknown).

Where a price comes from, first match wins:

1. the ``--medhelm-prices FILE`` (TOML), one table per model string, for models litellm does not know (local and
   hospital endpoints) or to pin the prices of a study (the paper used the prices of 2025-05-12)::

       ["openai/gpt-4o"]
       input_per_million = 2.50    # USD per million prompt tokens
       output_per_million = 10.00  # USD per million completion tokens

   The table name is matched exactly against the model as the user named it (``--medhelm-model`` /
   ``--medhelm-jury``), then against the litellm model string sent. Quote the name: TOML bare keys cannot hold
   ``/`` and a ``.`` would nest tables. An optional ``batch = 0.5`` is the factor of the provider's Batch API price
   (``--medhelm-batch``); see below.
2. litellm's *local* price table (``model_prices_and_context_window_backup.json`` shipped inside the litellm
   package, which is what ``litellm.model_cost`` holds with ``LITELLM_LOCAL_MODEL_COST_MAP=True``: no network).
   The exact model string is looked up, then, for ``provider/name``, the bare ``name`` when the table lists it
   under that same provider (``openai/gpt-4o-mini`` -> ``gpt-4o-mini``, provider ``openai``). A self-hosted
   model (``hosted_vllm/...``, ``openai/<anything>`` on a private server) is not in the table: its cost is unknown
   unless the prices file gives it (someone pays for the GPUs it runs on).
3. ``local/...`` (the llama.cpp server the plugin starts on this machine): $0, unless the prices file gives it a
   price. It runs here, on the machine that runs pytest; no provider bills it. So the main job's reports have a
   cost (``$0.00``, not ``unknown``) and a cost chart.

Exactness. A price per million ``p`` read from the file becomes the price per token by moving the decimal point
six places on ``p``'s shortest decimal form (``Decimal(repr(p)).scaleb(-6)``), so 2.50 becomes exactly the float
``2.5e-6`` and 10.00 exactly ``1e-5`` (``p / 1e6`` differs from the literal in about a quarter of two-decimal
prices). The cost of a request is then ``tokens_in * in_per_token + tokens_out * out_per_token``, in that order,
in plain float arithmetic: with 2.50 / 10.00 it is bit for bit ``tokens_in * 2.5e-6 + tokens_out * 1e-5``.

Batch rate (``--medhelm-batch``). A model whose requests a run sends through a provider's Batch API is priced at
its price times its batch factor: the ``batch`` key of its table in the prices file, else 0.5 for OpenAI's and
Anthropic's public APIs (``DEFAULT_BATCH_FACTORS``, their published discount), else 1 (a server of your own: give
its factor in the file). The run says which models it priced so (:attr:`Prices.batched`); every cost, the dry run's
and the budget's included, goes through :meth:`Prices.price_for`, so all of them use it.

Reading litellm's table does not import litellm when it is not imported yet (that takes seconds, and a run that
only talks to OpenAI-compatible endpoints never needs it): the bundled JSON file is read directly. If litellm is
already imported, its ``litellm.model_cost`` is used (it may carry the user's ``litellm.register_model`` entries).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from pytest_medhelm.thirdparty import litellm_price_table
from pytest_medhelm.values import is_llama_cpp_model

#: (USD per prompt token, USD per completion token)
Price = tuple[float, float]

PRICE_KEYS = ("input_per_million", "output_per_million")
#: the optional key of a model's table: the factor of its Batch API price
BATCH_KEY = "batch"
#: batch factors of providers' public APIs (OpenAI's and Anthropic's Batch APIs: half price)
DEFAULT_BATCH_FACTORS = {"openai": 0.5, "anthropic": 0.5}

#: ``local/...`` models: the llama.cpp server the plugin starts on this machine; no one bills for its tokens
LLAMA_CPP_PRICE: Price = (0.0, 0.0)


class PricesError(ValueError):
    """A prices file that cannot be used; the message names the file, the table and the key."""

    def __init__(self, path: str | os.PathLike[str], message: str, table: str | None = None,
                 key: str | None = None) -> None:
        self.path = str(path)
        self.table = table
        self.key = key
        where = f"prices file {self.path}"
        if table is not None:
            where += f", table [{json.dumps(table)}]"
        if key is not None:
            where += f", key {key}"
        super().__init__(f"{where}: {message}")


def per_token(per_million: float | int) -> float:
    """USD per million tokens -> USD per token, exactly the float literal with the exponent lowered by 6."""
    return float(Decimal(repr(per_million)).scaleb(-6))


def cost(tokens_in: int | None, tokens_out: int | None, price: Price | None) -> float | None:
    """USD for one request (or a total of tokens at one price); ``None`` when the price (or a count) is unknown."""
    if price is None or tokens_in is None or tokens_out is None:
        return None
    return tokens_in * price[0] + tokens_out * price[1]


def add_costs(costs: Iterable[float | None]) -> float | None:
    """The sum of several costs (``math.fsum``, correctly rounded), or ``None`` when any one is unknown."""
    values = []
    for value in costs:
        if value is None:
            return None
        values.append(value)
    return math.fsum(values)


def format_usd(value: float | None) -> str:
    """A cost as people read it: ``unknown`` when no price is known (never $0), ``$1,234.56`` from a dollar on,
    and below a dollar at least four decimals and two significant digits (``$0.0012``, ``$0.0000075``), so that
    a small known cost never prints as ``$0.0000``. Every report (terminal, Markdown, HTML, dry run) uses this."""
    if value is None or not math.isfinite(value):
        return "unknown"
    if value == 0:
        return "$0.00"
    if abs(value) >= 1:
        return f"${value:,.2f}"
    decimals = max(4, 1 - math.floor(math.log10(abs(value))))
    return f"${value:.{decimals}f}"


def model_row_costs(row: Mapping[str, Any]) -> tuple[str, str, str]:
    """The model's, the jury's and the total cost of a ``results["models"]`` row, as the reports print them.

    The jury's is ``-`` when no judge was asked (no jury tokens at no cost); the total is unknown when either part
    is. Terminal, Markdown and HTML leaderboards all show these three."""
    model, jury = row.get("cost_usd"), row.get("jury_cost_usd")
    no_jury = jury == 0 and not (row.get("jury_tokens_in") or row.get("jury_tokens_out"))
    return format_usd(model), "-" if no_jury else format_usd(jury), format_usd(model_row_total(row))


def model_row_total(row: Mapping[str, Any]) -> float | None:
    """A ``results["models"]`` row's total cost: the model's and the jury's (None when either is unknown, or not
    a finite number: a file's row may hold anything)."""
    def finite(value: Any) -> float | None:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        return float(value) if ok else None

    return add_costs([finite(row.get("cost_usd")), finite(row.get("jury_cost_usd", 0.0))])


def _per_token(value: object) -> float | None:
    """A price per token from the table: a finite non-negative number (a bool is not one), else None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0:
        return float(value)
    return None


def _table_entry_price(entry: Any) -> Price | None:
    if not isinstance(entry, Mapping):
        return None
    p_in, p_out = _per_token(entry.get("input_cost_per_token")), _per_token(entry.get("output_cost_per_token"))
    if p_in is None or p_out is None:
        return None
    return p_in, p_out


def litellm_price(model: str) -> Price | None:
    """The price of ``model`` in litellm's local table, or None."""
    table = litellm_price_table()
    price = _table_entry_price(table.get(model))
    if price is not None:
        return price
    provider, sep, bare = model.partition("/")
    if sep and bare:
        entry = table.get(bare)
        if isinstance(entry, Mapping) and entry.get("litellm_provider") == provider:
            return _table_entry_price(entry)
    return None


class Prices:
    """Prices of a run: the prices file's tables, then litellm's local table."""

    def __init__(self, table: Mapping[str, Price] | None = None, source: str | None = None,
                 use_litellm: bool = True, batch_factors: Mapping[str, float] | None = None) -> None:
        self.table: dict[str, Price] = dict(table or {})
        self.source = source
        self.use_litellm = use_litellm
        #: the prices file's ``batch`` factors, by table name
        self.batch_factors: dict[str, float] = dict(batch_factors or {})
        #: model (or judge) name -> the factor its price is multiplied by in this run (sent through a Batch API)
        self.batched: dict[str, float] = {}
        self._memo: dict[tuple[str, str | None], tuple[Price | None, str | None]] = {}

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None, use_litellm: bool = True) -> Prices:
        """The prices file at ``path`` (None: no file, litellm's table only). Raises :class:`PricesError`."""
        if path is None:
            return cls(use_litellm=use_litellm)
        table, factors = _parse(path)
        return cls(table, source=str(path), use_litellm=use_litellm, batch_factors=factors)

    def batch_factor(self, model_name: str, litellm_model: str | None, public_api: bool) -> float:
        """The factor of a model's price when it is sent through a Batch API: the prices file's ``batch`` key (its
        table by the model's name, then by the litellm string), else the provider's published discount when the
        model goes to that provider's public API (``public_api``), else 1."""
        for name in (model_name, litellm_model):
            if name and name in self.batch_factors:
                return self.batch_factors[name]
        provider = (litellm_model or model_name).partition("/")[0]
        return DEFAULT_BATCH_FACTORS.get(provider, 1.0) if public_api else 1.0

    def _scaled(self, model_name: str, price: Price | None) -> Price | None:
        factor = self.batched.get(model_name)
        if price is None or factor is None or factor == 1.0:
            return price
        return price[0] * factor, price[1] * factor

    def _lookup(self, model_name: str, litellm_model: str | None) -> tuple[Price | None, str | None]:
        key = (model_name, litellm_model)
        if key not in self._memo:
            found: tuple[Price | None, str | None] = (None, None)
            for name in (model_name, litellm_model):
                if name and name in self.table:
                    found = (self.table[name], "file")
                    break
            else:
                if is_llama_cpp_model(model_name):
                    found = (LLAMA_CPP_PRICE, "local")
                elif self.use_litellm:
                    for name in dict.fromkeys(n for n in (litellm_model, model_name) if n):
                        price = litellm_price(name)
                        if price is not None:
                            found = (price, "litellm")
                            break
            self._memo[key] = found
        return self._memo[key]

    def price_for(self, model_name: str, litellm_model: str | None = None) -> Price | None:
        """(USD per prompt token, USD per completion token) of a model, or None when unknown; at the batch rate
        when the run sends the model's requests through a Batch API."""
        return self._scaled(model_name, self._lookup(model_name, litellm_model)[0])

    def file_price_for(self, model_name: str, litellm_model: str | None = None) -> Price | None:
        """The prices file's price only (at the batch rate when batched), never litellm's table: for a model at an
        endpoint that is not its provider's public API (see pytest_medhelm.cache.identity)."""
        for name in (model_name, litellm_model):
            if name and name in self.table:
                return self._scaled(model_name, self.table[name])
        # a local/... model runs on this machine's llama.cpp server: no one bills for it, whatever its endpoint
        return LLAMA_CPP_PRICE if is_llama_cpp_model(model_name) else None

    def source_of(self, model_name: str, litellm_model: str | None = None) -> str | None:
        """Where the price came from: "file", "local" (a ``local/...`` model: $0), "litellm", or None (unknown)."""
        return self._lookup(model_name, litellm_model)[1]

    def cost(self, model_name: str, litellm_model: str | None, tokens_in: int, tokens_out: int) -> float | None:
        return cost(tokens_in, tokens_out, self.price_for(model_name, litellm_model))

    def total_cost(self, model_name: str, litellm_model: str | None, tokens_in: int, tokens_out: int,
                   costs: Iterable[float | None]) -> float | None:
        """A model's total over its answers (``costs``, their tokens summed in ``tokens_in``, ``tokens_out``):
        exactly its tokens × the prices file's price when the file prices it (the sum of the answers' costs can
        differ from that in the last bits); else the sum of the answers' costs, None when any is unknown."""
        if self.source_of(model_name, litellm_model) == "file":
            return self.cost(model_name, litellm_model, tokens_in, tokens_out)
        return add_costs(costs)

    def completion_cost(self, model_name: str, litellm_model: str | None, tokens_in: int, tokens_out: int,
                        reported: float | None = None, *, as_provider: bool = True) -> float | None:
        """The cost to record for one answer (of the model under test or a judge).

        The prices file wins (exact tokens × prices); else the cost the provider path reported (litellm's
        ``completion_cost``, which knows cached-token discounts and the like); else litellm's table; else None. A
        model at an endpoint that is not its provider's public API (``as_provider`` False) is priced by the prices
        file only: the provider's price (litellm's, reported or from its table) is not what that endpoint costs."""
        if not as_provider:
            return cost(tokens_in, tokens_out, self.file_price_for(model_name, litellm_model))
        price, source = self._lookup(model_name, litellm_model)
        price = self._scaled(model_name, price)
        if source == "file":
            return cost(tokens_in, tokens_out, price)
        if reported is not None:
            return float(reported) * self.batched.get(model_name, 1.0)
        return cost(tokens_in, tokens_out, price)


def parse_prices(path: str | os.PathLike[str]) -> dict[str, Price]:
    """Read and validate a prices file: ``{model: (USD per prompt token, USD per completion token)}``."""
    return _parse(path)[0]


def _parse(path: str | os.PathLike[str]) -> tuple[dict[str, Price], dict[str, float]]:
    """A prices file's prices and its ``batch`` factors, validated."""
    import tomllib

    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        raise PricesError(path, f"cannot be read ({exc.strerror or exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise PricesError(path, f"is not valid TOML ({exc})") from None
    expected = ("expected one table per model string with input_per_million and output_per_million in USD, "
                'e.g. ["openai/gpt-4o"] input_per_million = 2.50, output_per_million = 10.00')
    table: dict[str, Price] = {}
    factors: dict[str, float] = {}
    for model, entry in data.items():
        if not isinstance(entry, dict):
            raise PricesError(path, f"{model!r} is {_toml_type(entry)}, not a table; {expected}")
        if not model.strip():
            raise PricesError(path, f"empty model name; {expected}", table=model)
        for key, value in entry.items():
            if key not in PRICE_KEYS and key != BATCH_KEY:
                hint = ""
                if isinstance(value, dict):
                    hint = (f" (a dotted table name nests: quote the whole model name, "
                            f"[{json.dumps(model + '.' + key)}])")
                raise PricesError(path, f"unknown key; expected {' and '.join(PRICE_KEYS)}, and optionally "
                                        f"{BATCH_KEY} (the Batch API's price factor){hint}",
                                  table=model, key=key)
        values = []
        for key in PRICE_KEYS:
            if key not in entry:
                raise PricesError(path, "missing; expected a number of USD per million tokens", table=model,
                                  key=key)
            value = entry[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise PricesError(path, f"expected a number of USD per million tokens, got {_toml_type(value)} "
                                        f"{value!r}", table=model, key=key)
            if not math.isfinite(value) or value < 0:
                raise PricesError(path, f"expected a finite number >= 0 (USD per million tokens), got {value!r}",
                                  table=model, key=key)
            values.append(per_token(value))
        table[model] = (values[0], values[1])
        if BATCH_KEY in entry:
            factor = entry[BATCH_KEY]
            if (isinstance(factor, bool) or not isinstance(factor, (int, float)) or not math.isfinite(factor)
                    or not 0 < factor <= 1):
                raise PricesError(path, f"expected the Batch API's price factor, a number in (0, 1] (0.5: half "
                                        f"price), got {_toml_type(factor)} {factor!r}", table=model, key=BATCH_KEY)
            factors[model] = float(factor)
    return table, factors


def _toml_type(value: Any) -> str:
    return {str: "a string", bool: "a boolean", list: "an array", dict: "a table", int: "an integer",
            float: "a float"}.get(type(value), type(value).__name__)
