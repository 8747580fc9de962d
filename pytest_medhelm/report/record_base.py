"""The base of the results JSON's records (:mod:`pytest_medhelm.report.records`): a record that keeps the fields it
does not declare, the fields every record of a kind has, and the helpers that give a field its description."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field


def _schema_extra(schema: dict[str, Any], cls: type) -> None:
    """The fields a file written by this version always holds are required in the schema (reading is lenient)."""
    always = getattr(cls, "ALWAYS", None)
    properties = schema.get("properties", {})
    names = list(properties) if always is None else list(always)
    schema["required"] = [name for name in names if name in properties]
    identity = getattr(cls, "SCHEMA_IDENTITY", None)  # (the file's root record: its $id and title)
    if identity is not None:
        schema["$id"], schema["title"] = identity


class Record(BaseModel):
    """A record of the results JSON: its declared fields, and any other field it comes with, kept as is.

    ``ALWAYS``: the fields every record of the kind has (None: all declared ones). A record built or read without
    one gets its default, and is written with it; the schema requires them. Reading accepts records without them
    (older files, a hand-made baseline): only the identifying fields have no default."""

    model_config = ConfigDict(extra="allow", json_schema_extra=_schema_extra)
    ALWAYS: ClassVar[tuple[str, ...] | None] = None

    def model_post_init(self, context: Any, /) -> None:
        # the fields every record of the kind has count as set (written) even when built or read without them
        always = type(self).ALWAYS
        self.__pydantic_fields_set__.update(type(self).model_fields if always is None else always)


def about(text: str, default: Any = None) -> Any:
    """A field's default and its description (in the schema and in docs/contract.md's field tables)."""
    return Field(default, description=text)


def many(text: str, factory: Any) -> Any:
    """A field whose default is a new empty ``factory()``, and its description."""
    return Field(default_factory=factory, description=text)


def _as_text(value: Any) -> Any:
    """A value written as its text: an instance id (a benchmark's float, UUID or int id alike), a metric's detail."""
    return None if value is None else str(value)


#: a str field that takes any value as its text (ids from a data file, a custom metric's detail)
Text = Annotated[str | None, BeforeValidator(_as_text)]


#: the largest token count an instance's record holds (over every call of its item; each call's own count is at
#: most 10^9, pytest_medhelm.sending.replies): a larger one is refused into ``metrics.invalid_fields``, so that no
#: sum, price or JSON writing of the report meets an integer of thousands of digits
MAX_RECORD_COUNT = 10**15
#: the largest cost (USD) or duration (s) an instance's record holds, likewise
MAX_RECORD_AMOUNT = 1e12

#: an int field of token counts: 0 to MAX_RECORD_COUNT
Count = Annotated[int, Field(ge=0, le=MAX_RECORD_COUNT)]
#: a float field of a cost or a duration: finite, 0 to MAX_RECORD_AMOUNT
Amount = Annotated[float, Field(ge=0, le=MAX_RECORD_AMOUNT, allow_inf_nan=False)]


def huge_int(value: Any) -> bool:
    """An integer no float can hold (bit length over 1,024): execnet cannot carry one of thousands of digits, nor
    JSON write it (beyond 4,300 digits it cannot even be written as text)."""
    return isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 1024


def not_finite(value: Any) -> bool:
    """A float that is not finite, or a :func:`huge_int`: JSON has no value for either."""
    return huge_int(value) or (isinstance(value, float) and not math.isfinite(value))


def scrubbed(value: Any, refused: Callable[[Any], bool], path: str, found: list[str]) -> Any:
    """``value`` (plain data: dicts, lists, numbers, text) with every number ``refused`` picks replaced by None, its
    path (``metrics.bleu``, ``ran_out.reasoning_tokens``, ``[2]``) appended to ``found``. A number of another type
    (numpy's float32) is read as a float first."""
    if isinstance(value, (str, bool)) or value is None:  # (the common values first: this walks every record)
        return value
    if not isinstance(value, (int, float, dict, list, tuple)) and isinstance(value, numbers.Real):
        value = float(value)
    if isinstance(value, (int, float)):
        if refused(value):
            found.append(path)
            return None
        return value
    if isinstance(value, (dict, Mapping)):
        return {k: scrubbed(v, refused, f"{path}.{k}" if path else str(k), found) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrubbed(v, refused, f"{path}[{i}]", found) for i, v in enumerate(value)]
    return value
