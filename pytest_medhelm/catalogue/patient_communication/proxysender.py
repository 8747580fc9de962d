"""ProxySender: was a patient-portal message sent by the patient or by a proxy user (a parent, a spouse)?
(HELM ``SHCPROXYMedScenario``, ``shc_proxy_med``; Stanford Health Care, private.)

One CSV (``prompt``, ``context``, ``label``) read as in the rest of the SHC family
(:mod:`pytest_medhelm.catalogue.shc`). HELM HEAD (``a363f41cf``) has three choices A/B/C and the instructions
"Answer A, B, or C.", although the prompt text still says "with a 'A' for yes or 'B' for no" (the paper-era run
had A/B only). The options render ``A. A``, ``B. B``, ``C. C``; labels must be A, B or C.

Under ``--medhelm-compat medhelm`` the question is medhelm 0.8.0's: it describes the three classes (A: the patient
writes about themselves, B: a proxy writes for the patient, C: the author is unclear), and the context is followed
by ``". "`` instead of ``" , "``; the instructions and options are unchanged.
"""

from __future__ import annotations

from pytest_medhelm.catalogue import shc

BENCHMARK = shc.shc_benchmark(
    slug="proxysender",
    name="ProxySender",
    subcategory="Patient-Provider Messaging",
    file="medhelm-PROXY-dataset_filtered.csv",
    template=(
        "You are reviewing a clinical messages in order to determine if they have been sent by a proxy user. "
        "Please determine the following: {question} with the following context: {context} , " + shc.YES_NO
    ),
    template_medhelm=(
        "You are reviewing a clinical messages in order to determine if they have been sent by a patient, a proxy, "
        "or if the author is unclear. Please determine the following: {question} with the following context: "
        "{context}. Answer with 'A' if the message is written by the patient about themselves, 'B' if it is written "
        "by a proxy on the patient's behalf, or 'C' if the author is unclear. Respond with only A, B, or C. Do not "
        "provide any additional details."
    ),
    description="Decide whether a patient-portal message was sent by a proxy user rather than the patient.",
    example=(
        "Was this message sent by a proxy user?",
        "Synthetic message: Hello doctor, my son still has a fever since yesterday, should we come in?",
        "A",
    ),
    context="the portal message",
    labels="'A', 'B' or 'C'",
    choices=("A", "B", "C"),
)
