"""Calibration records: a judge, a jury or a rubric grader measured against humans, kept beside the saved runs in
``<rootdir>/.medhelm/calibration/``, and the rule ``--medhelm-require-calibrated`` holds them to.

**A record** is one JSON file (``<UTC time>_<rater>_<prompt sha256 prefix>.json``)::

    {"format": "pytest-medhelm calibration", "version": 1, "rater": "openai/gpt-4.1-2025-04-14",
     "prompt_sha256": "<64 hex>", "instrument": "simple-evals@5e623c2", "statistic": "macro_f1",
     "value": 0.71, "human": 0.69, "n": 29511, "source": "healthbench_meta", "created": "2026-11-28T10:00:00+00:00"}

``rater`` is the grader or judge as the run names it (a litellm string), or a jury: its judges sorted and joined by
`` + ``; ``prompt_sha256`` the sha256 of the prompt *template* it was asked with (UTF-8, before any instance fills
it: the grader's ``GRADER_TEMPLATE``, a benchmark's judge prompt); ``value`` its agreement with the humans and
``human`` the humans' agreement with each other on the same data, by the same ``statistic``: ``macro_f1`` (a
``healthbench_meta`` run: the grader's pairwise macro-F1 against physicians, and the physicians' against each other)
or ``icc3k`` (``pytest-medhelm agreement --calibration-judge ...``: the jury's ICC(3,k) against the clinicians' mean,
and the clinicians' pairwise ICC(3,k)).

**The rule.** A rater is calibrated when its latest record for that exact prompt hash has ``value >= human``: it
agrees with the humans at least as well as they agree with each other, the bar both references set (HealthBench's
meta-evaluation compares the grader with physician-physician agreement; MedHELM validated its jury with an ICC of
0.47 against clinicians beside their own 0.43). A fixed number would not do: an F1 and an ICC are on different
scales, and what humans reach differs by data. A record without ``human`` (not measured) never calibrates.

**Untrusted files.** A record is read as data (JSON, at most :data:`MAX_RECORD_BYTES`), validated field by field; a
file that is not a record is :class:`CalibrationError` naming the file and what was wrong, and never counts.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

CALIBRATION_DIR = Path(".medhelm") / "calibration"
FORMAT = "pytest-medhelm calibration"
VERSION = 1
STATISTICS = {"macro_f1": "macro-F1", "icc3k": "ICC(3,k)"}
#: a record is a few hundred bytes: a larger file is not one (and is not read whole)
MAX_RECORD_BYTES = 64 * 1024
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class CalibrationError(ValueError):
    """A file of the calibration folder that is not a calibration record (the message names it and says why)."""


@dataclass(frozen=True)
class CalibrationRecord:
    rater: str
    prompt_sha256: str
    statistic: str
    value: float
    human: float | None
    n: int
    source: str = ""
    instrument: str | None = None
    created: str = ""
    path: Path | None = None

    @property
    def calibrated(self) -> bool:
        """The rule of the module docstring: at least the humans' own agreement."""
        return self.human is not None and self.value >= self.human

    def describe(self) -> str:
        name = STATISTICS.get(self.statistic, self.statistic)
        human = "not measured" if self.human is None else f"{self.human:.3f}"
        return (f"{name} {self.value:.3f} against humans' own {human} on {self.n} "
                f"({self.source or 'unknown source'}, {self.created or 'undated'})")

    def as_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "rater": self.rater, "prompt_sha256": self.prompt_sha256,
                "instrument": self.instrument, "statistic": self.statistic, "value": self.value,
                "human": self.human, "n": self.n, "source": self.source, "created": self.created}


def jury_rater(judges: Sequence[str]) -> str:
    """A jury as one rater: its judges sorted, joined by `` + `` (one judge: its name)."""
    return " + ".join(sorted(set(judges)))


def _number(data: dict[str, Any], key: str, where: str, optional: bool = False) -> float | None:
    value = data.get(key)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise CalibrationError(f"{where}: {key!r} must be a finite number, got {value!r:.40}")
    return float(value)


def parse_record(data: Any, where: str) -> CalibrationRecord:
    """A record from its JSON data; :class:`CalibrationError` for anything else."""
    if not isinstance(data, dict):
        raise CalibrationError(f"{where}: expected a JSON object, got {type(data).__name__}")
    version = data.get("version")
    if data.get("format") != FORMAT or type(version) is not int or version != VERSION:
        raise CalibrationError(f"{where}: not a {FORMAT!r} record of version {VERSION}")
    rater, prompt = data.get("rater"), data.get("prompt_sha256")
    if not isinstance(rater, str) or not rater.strip() or len(rater) > 1000:
        raise CalibrationError(f"{where}: 'rater' must be a model name, got {rater!r:.40}")
    if not isinstance(prompt, str) or not _HEX64.match(prompt):
        raise CalibrationError(f"{where}: 'prompt_sha256' must be 64 lowercase hex digits, got {prompt!r:.80}")
    statistic = data.get("statistic")
    if not isinstance(statistic, str) or statistic not in STATISTICS:  # (a list is no key: found by fuzzing)
        raise CalibrationError(f"{where}: 'statistic' must be one of {', '.join(STATISTICS)}, got {statistic!r:.40}")
    n = data.get("n")
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n < 2 ** 63:
        raise CalibrationError(f"{where}: 'n' must be a count, got {n!r:.40}")
    texts = {}
    for key in ("source", "instrument", "created"):
        value = data.get(key)
        if value is not None and not (isinstance(value, str) and len(value) <= 1000):
            raise CalibrationError(f"{where}: {key!r} must be text, got {value!r:.40}")
        texts[key] = value
    value = _number(data, "value", where)
    assert value is not None  # (not optional)
    return CalibrationRecord(rater=rater, prompt_sha256=prompt, statistic=statistic, value=value,
                             human=_number(data, "human", where, optional=True), n=n,
                             source=texts["source"] or "", instrument=texts["instrument"],
                             created=texts["created"] or "")


def read_record(path: Path) -> CalibrationRecord:
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_RECORD_BYTES + 1)
    except OSError as exc:
        raise CalibrationError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if len(raw) > MAX_RECORD_BYTES:
        raise CalibrationError(f"{path}: larger than {MAX_RECORD_BYTES:,} bytes: not a calibration record")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise CalibrationError(f"{path}: not JSON ({type(exc).__name__})") from None
    record = parse_record(data, str(path))
    return CalibrationRecord(**{**record.__dict__, "path": path})


def read_all(rootdir: Path | str) -> tuple[list[CalibrationRecord], list[str]]:
    """Every record of ``<rootdir>/.medhelm/calibration/`` and the problems of the files that are not records."""
    folder = Path(rootdir) / CALIBRATION_DIR
    records, problems = [], []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            records.append(read_record(path))
        except CalibrationError as exc:
            problems.append(str(exc))
    return records, problems


def latest(records: Sequence[CalibrationRecord], rater: str, prompt_sha256: str) -> CalibrationRecord | None:
    """The newest record of exactly this rater and prompt hash (by its time, then its file name)."""
    matching = [r for r in records if r.rater == rater and r.prompt_sha256 == prompt_sha256]
    return max(matching, key=lambda r: (r.created, str(r.path))) if matching else None


def write_record(record: CalibrationRecord, rootdir: Path | str) -> Path:
    """``record`` as a new file of the calibration folder (created private to the user, as the saved runs')."""
    folder = Path(rootdir) / CALIBRATION_DIR
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    created = record.created or datetime.now(UTC).isoformat(timespec="seconds")
    stamp = re.sub(r"[^0-9]", "", created)[:14]
    rater = re.sub(r"[^A-Za-z0-9._-]+", "_", record.rater).strip("._")[:80] or "rater"
    path = folder / f"{stamp}_{rater}_{record.prompt_sha256[:12]}.json"
    number = 1
    while path.exists():
        number += 1
        path = folder / f"{stamp}_{rater}_{record.prompt_sha256[:12]}_{number}.json"
    data = {**record.as_json(), "created": created}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path
