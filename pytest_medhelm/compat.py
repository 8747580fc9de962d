"""The three ``--medhelm-compat`` modes, and the two questions the code asks of a run's mode.

* ``default``: HELM 0.5.16's prompts for its 37 benchmarks (the published leaderboard's), medhelm's for the others,
  with corrected metrics (docs/fidelity.md lists each correction and its reason);
* ``helm``: HELM 0.5.16 (crfm-helm, the published leaderboard's code), quirks and bugs included;
* ``medhelm``: the living MedHELM, Pacific AI's fork ``medhelm`` 0.8.0. For the 37 it kept 0.5.16's code except
  where it changed it (the jury's reading of a reply, EHRSQL, ProxySender: docs/fidelity.md), so everywhere else
  it reproduces HELM's quirks exactly as ``helm`` does.

Code asks :func:`reproduces_helm` ("are HELM's quirks kept?": true under ``helm`` and ``medhelm``) and
:func:`is_medhelm` ("the fork's own change?"), never compares mode strings itself, so that a place where the two
references part is one visible decision.
"""

from __future__ import annotations

DEFAULT = "default"
HELM = "helm"
MEDHELM = "medhelm"
#: every mode, in the order the option lists them
MODES = (DEFAULT, HELM, MEDHELM)


def reproduces_helm(compat: str) -> bool:
    """Whether the run reproduces a HELM code base's numbers (HELM 0.5.16, or the fork that kept its code) rather
    than our corrected metrics: true under ``helm`` and ``medhelm``."""
    return compat in (HELM, MEDHELM)


def is_medhelm(compat: str) -> bool:
    """Whether the run reproduces medhelm 0.8.0, whose changes to the old benchmarks then apply."""
    return compat == MEDHELM
