"""``--medhelm-report-text``: the question and the reference of each instance, for a reader of the reports.

Off by default: benchmark inputs and references may be patient data (gated and private benchmarks), and the
results JSON and the HTML report are files people share. With the option, each instance record carries
``question`` (the instance's input, with its lettered options for a multiple-choice question: what the model was
asked, without the benchmark's instructions) and ``reference`` (the gold answer as text).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.values import Instance

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
HOW = "--medhelm-report-text (ini: medhelm_report_text = true)"


def instance_texts(instance: "Instance") -> dict[str, str]:
    """``question`` and ``reference`` of one instance, as a person reads them."""
    question = instance.input.rstrip()
    if instance.choices:
        question += "\n" + "\n".join(f"{LETTERS[i]}. {text}" for i, text in enumerate(instance.choices))
    if instance.choices and instance.correct is not None:
        reference = f"{LETTERS[instance.correct]}. {instance.choices[instance.correct]}"
    else:
        reference = "\n\n".join(instance.references)
    return {"question": question, "reference": reference}
