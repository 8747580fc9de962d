"""MIMIC-IV billing codes: micro precision / recall / F1 over the ICD-10 codes found in the answer (HELM
``MIMICIVBillingCodeMetric``).

Per instance, the codes are extracted from the reference (the comma-joined target list) and from the answer,
de-duplicated, and compared as sets: precision = |found ∩ gold| / |found|, recall = |found ∩ gold| / |gold|,
F1 = 2·P·R / (P + R); 0 when a denominator is 0, so an instance with no code on either side scores 0 (sklearn's
``average="micro", zero_division=0`` on a one-row multilabel binarisation, which is exactly this). The score is
F1 (``mimiciv_billing_code_f1``, HELM's main metric); precision and recall are recorded in ``Score.extra``. The
benchmark value is the mean over instances.

**HELM's extraction** (``compat="helm"``): remove ``**``, then
``re.findall(r"\\b[A-Z]\\d{1,3}(?:\\.\\d{1,4})?\\.?\\b")`` and strip a trailing ``.``. That pattern only knows a
letter followed by digits, so it misreads real ICD-10 codes:

* **a letter after the first character is never matched**:

  - 7th-character extensions and the placeholder ``X``: ``S72.001A`` is read as ``S72`` (the regex backs off to
    ``S72.`` where a word boundary exists, and the ``.`` is stripped), ``T84.52XA`` as ``T84``, ``W19.XXXA`` as
    ``W19``: the code collapses to its 3-character category, and two different fractures both become ``S72``;
  - a letter in the 3rd position: ``M1A.0`` (chronic gout), ``C7A.010``, ``D3A.00``, ``O9A.211``, ``Z3A.20`` give
    **nothing at all** (no word boundary between ``1`` and ``A``, and the pattern must start at a boundary);

* **undotted codes**: ``E785`` (E78.5) is extracted as ``E785``, which never equals ``E78.5``; an undotted code
  of 5 or more characters (``E1165`` for E11.65, ``I2510`` for I25.10) gives nothing;
* one- and two-character "codes" such as ``A1`` are accepted.

Both the reference and the answer go through the same regex, so a reference code it cannot read is lost (or
truncated) on both sides; the MIMIC-IV targets of HELM's file (``JoakimEdin/medical-coding-reproducibility``)
carry many of them (injury codes with 7th characters, ``M1A``, ``Z3A`` …).

**Our extraction** (the default): an ICD-10-CM code is a capital letter, a digit, a digit or ``A``/``B`` (the only
letters ICD-10-CM uses in 3rd position), then optionally a dot and 1 to 4 letters or digits, not inside a longer
word; the dot is optional (``E785`` is ``E78.5``). Every code is normalised to its dotted form (``E78.5``,
``S72.001A``, ``I10``) before comparison, on both sides. ICD-10-PCS procedure codes that start with a digit are
ignored by both extractions, as by HELM.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pytest_medhelm.compat import reproduces_helm
from pytest_medhelm.metrics.base import Score

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.values import Instance

#: HELM's pattern, verbatim
HELM_PATTERN = re.compile(r"\b[A-Z]\d{1,3}(?:\.\d{1,4})?\.?\b")
#: category (letter, digit, digit or A/B), then an optional dot and up to four characters; not inside a word
CODE_PATTERN = re.compile(r"(?<![A-Za-z0-9])([A-Z]\d[0-9AB])(?:\.?([0-9A-Z]{1,4}))?(?![A-Za-z0-9])")


def helm_extract(text: str) -> list[str]:
    """HELM's ``extract_icd_codes``: the codes in order of appearance, duplicates kept."""
    if not text:
        return []
    cleaned = re.sub(r"\*\*", "", text)
    return [code.rstrip(".").strip() for code in HELM_PATTERN.findall(cleaned)]


def extract(text: str) -> list[str]:
    """The ICD-10-CM codes in ``text``, normalised to the dotted form, in order of appearance, duplicates kept."""
    if not text:
        return []
    return [category + (f".{rest}" if rest else "") for category, rest in CODE_PATTERN.findall(text)]


def precision_recall_f1(gold: set[str], found: set[str]) -> tuple[float, float, float]:
    """Set precision, recall and F1, each 0 when undefined (sklearn's micro average with ``zero_division=0``)."""
    hits = len(gold & found)
    precision = hits / len(found) if found else 0.0
    recall = hits / len(gold) if gold else 0.0
    f1 = 2 * hits / (len(gold) + len(found)) if hits else 0.0
    return precision, recall, f1


def _listed(codes: set[str], limit: int = 8) -> str:
    shown = sorted(codes)
    text = ", ".join(shown[:limit]) + (f", … ({len(shown)} in all)" if len(shown) > limit else "")
    return text or "none"


class MimicBillingCodeF1:
    name = "mimiciv_billing_code_f1"
    binary = False
    #: a continuous metric: an instance whose F1 is below this shows as a miss
    pass_mark = 0.5

    def score(self, answer: str, instance: Instance, compat: str = "default") -> Score:
        extractor = helm_extract if reproduces_helm(compat) else extract
        gold: set[str] = set()
        for reference in instance.references:
            gold.update(extractor(reference))
        found = set(extractor(answer.strip()))
        precision, recall, f1 = precision_recall_f1(gold, found)
        return Score(
            value=f1,
            raw=f1,
            detail=(
                f"F1 {f1:.3f}: {len(gold & found)} of {len(gold)} reference codes found "
                f"({_listed(gold - found)} missing), {len(found - gold)} extra ({_listed(found - gold)})"
            ),
            extra={"mimiciv_billing_code_precision": precision, "mimiciv_billing_code_recall": recall},
        )


MIMIC_BILLING_CODE_F1 = MimicBillingCodeF1()
