"""``--medhelm-report-text``: the question and the reference of each instance, for a reader of the reports.

Off by default: benchmark inputs and references may be patient data (gated and private benchmarks), and the
results JSON and the HTML report are files people share. With the option, each instance record carries
``question`` (the instance's input, with its lettered options for a multiple-choice question: what the model was
asked, without the benchmark's instructions) and ``reference`` (the gold answer as text), and the files written
from such results (JSON, HTML, saved runs) are private to the user (0600), as the answer cache is.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.values import Instance

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
HOW = "--medhelm-report-text (ini: medhelm_report_text = true)"


def instance_texts(instance: Instance) -> dict[str, str]:
    """``question`` and ``reference`` of one instance, as a person reads them."""
    question = instance.input.rstrip()
    if instance.choices:
        question += "\n" + "\n".join(f"{LETTERS[i]}. {text}" for i, text in enumerate(instance.choices))
    if instance.choices and instance.correct is not None:
        reference = f"{LETTERS[instance.correct]}. {instance.choices[instance.correct]}"
    else:
        reference = "\n\n".join(instance.references)
    return {"question": question, "reference": reference}


def holds_texts(results: Mapping[str, Any]) -> bool:
    """Whether ``results`` carry the instances' texts (``--medhelm-report-text``): possibly patient data."""
    instances = results.get("instances") or ()
    return any(isinstance(r, Mapping) and ("question" in r or "reference" in r) for r in instances)


def open_report(path: str | os.PathLike[str], results: Mapping[str, Any]) -> IO[str]:
    """A new file for a report of ``results`` (a temporary file, renamed into place by the caller): readable by the
    user only (0600) when the results hold the instances' texts, else with the usual permissions."""
    mode = 0o600 if holds_texts(results) else 0o666  # (0o666: the umask decides, as for open())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    if mode == 0o600:
        os.fchmod(fd, 0o600)  # (a temporary file left behind by a crash kept its old permissions)
    return os.fdopen(fd, "w", encoding="utf-8")
