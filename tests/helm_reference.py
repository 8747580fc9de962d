"""HELM 0.5.16's prompts for the jury's five open-ended benchmarks, computed here independently of the plugin: the
model's from HELM's generation-adapter rule, each judge's from HELM's annotator file read as data (its
``PROMPT_TEMPLATE`` literal, never executed) with ``{X}`` -> ``$X`` and :class:`string.Template`."""

from __future__ import annotations

import ast
import string
from pathlib import Path

#: slug -> (HELM's annotator file, instructions, input noun, output noun) as HELM's run specs set them
HELM = {
    "aci_bench": ("aci_bench_annotator.py",
                  "Summarize the conversation to generate a clinical note with four sections:\n1. HISTORY OF PRESENT "
                  "ILLNESS\n2. PHYSICAL EXAM\n3. RESULTS\n4. ASSESSMENT AND PLAN\n\nThe conversation is:",
                  "Conversation", "Clinical Note"),
    "medicationqa": ("medication_qa_annotator.py", "Please answer the following consumer health question.",
                     "Question", "Answer"),
    "mediqa": ("medi_qa_annotator.py", "Answer the following consumer health question.", "Question", "Answer"),
    "mtsamples": ("mtsamples_replicate_annotator.py",
                  "Given various information about a patient, return a reasonable treatment plan for the patient.",
                  None, "Answer"),
    "mtsamples_procedures": ("mtsamples_procedures_annotator.py",
                             "Here are information about a patient, return a reasonable treatment plan for the "
                             "patient.", "Patient Notes", "Answer"),
}


def helm_model_prompt(slug: str, text: str) -> str:
    _file, instructions, noun, output = HELM[slug]
    return f"{instructions}\n\n{'' if noun is None else noun + ': '}{text}\n{output}:"


def helm_template(data: Path, slug: str) -> str:
    tree = ast.parse((data / "helm_jury" / HELM[slug][0]).read_text(encoding="utf-8"))
    [value] = [node.value for node in tree.body if isinstance(node, ast.Assign)
               and getattr(node.targets[0], "id", "") == "PROMPT_TEMPLATE"]
    return ast.literal_eval(value)


def helm_judge_prompt(template: str, question: str, response: str, gold: str) -> str:
    for name in ("QUESTION", "RESPONSE", "GOLD_RESPONSE"):
        template = template.replace("{" + name + "}", "$" + name)
    return string.Template(template).substitute(QUESTION=question, RESPONSE=response, GOLD_RESPONSE=gold)
