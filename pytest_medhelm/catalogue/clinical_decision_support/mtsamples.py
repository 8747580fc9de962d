"""MTSamples: write a treatment plan from a transcribed medical report (HELM ``MTSamplesReplicateScenario``,
``mtsamples_replicate``).

**Source.** The folder ``mtsamples_processed/`` of ``raulista1997/benchmarkdata`` at commit ``ebc104a4…`` (pinned by
HELM): 1,269 plain-text MTSamples reports. HELM lists the folder with the GitHub contents API, downloads each
``.txt`` file at the same commit and reads it back as UTF-8 text (universal newlines) with ``.strip()``. Put the
folder at ``<--medhelm-data-dir>/mtsamples/mtsamples_processed/``; it is never downloaded by the plugin.

**Instances** (HELM's rules, reproduced with their quirks):

* reference = the rest of the line after ``PLAN:``, else after ``SUMMARY:``, else after ``FINDINGS:`` (stripped; an
  empty rest counts as absent); a file with none is skipped;
* each marker is looked for case-insensitively, then cut case-sensitively (``text.split("PLAN:")[1]``): a file
  whose only marker is spelled ``Plan:`` or ``Findings:`` raises ``IndexError`` in HELM and is skipped, even when
  another marker would have given a reference;
* input = the note up to the first ``PLAN:`` (stripped). Only PLAN is removed, so when the reference comes from
  SUMMARY or FINDINGS the input still contains it (170 of the 427 instances): HELM's quirk, kept.

**Order and count.** HELM's order is the order of the GitHub contents-API listing. *Assumption:* that listing is the
git tree order, i.e. file names sorted by their UTF-8 bytes (``"AC Separation…"`` before ``"Abdominal…"``). The
contents API returns at most 1,000 entries of a directory (GitHub's documented limit; HELM's own integration
test notes "1000 file downloads"), so HELM only ever sees the first 1,000 of the 1,269 files. On the pinned data:

===============================================  =====
files in the folder                               1,269
beyond the 1,000-entry listing (never seen)         269
no PLAN:/SUMMARY:/FINDINGS: anywhere                567
a marker, but nothing after it on its line            5
marker only in another case (HELM's IndexError)       1
**instances**                                     **427**
===============================================  =====

(Without the listing limit the same rules give 539 instances from all 1,269 files; pass ``listing_limit=None`` to
:func:`select_notes` to see them.) Of the 427, the reference comes from PLAN for 258, FINDINGS for 154 and
SUMMARY for 15. The loader returns the instances with these counts in ``Loaded.removed`` (keyed as in
:data:`DROP_REASONS` by :func:`build_instances_with_report`), so that nothing is dropped silently. Instance ids
are the file names without ``.txt``, every run of characters other than letters, digits, ``.`` and ``-`` replaced
by ``_`` (``Chronic_Kidney_Disease_-_Followup``).

A note that is empty or not UTF-8 is a :class:`~pytest_medhelm.data.errors.DataError` (upstream has neither: the
copy is damaged); HELM would have skipped the first and decoded the second with replacement characters.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.compat import reproduces_helm
from pytest_medhelm.data.errors import DataError
from pytest_medhelm.data.readers import data_file, read_text, universal_newlines
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.jury import jury_metric
from pytest_medhelm.prompting import GenerationPrompt
from pytest_medhelm.values import Instance, Loaded

SLUG = "mtsamples"
FOLDER = "mtsamples_processed"
GIT_HASH = "ebc104a4f96c5b7602242f301e081e9934a23344"
#: the GitHub contents API lists at most this many entries of a directory
GITHUB_LISTING_LIMIT = 1000
#: reference markers, in HELM's order of preference
SECTIONS = ("PLAN:", "SUMMARY:", "FINDINGS:")

#: the reasons a listed file gives no instance, in the order they are checked: report key → reason in
#: ``Loaded.removed``
DROP_REASONS = {
    "beyond_github_listing_limit": "beyond the GitHub contents API's 1,000-entry listing (HELM never sees the file)",
    "not_txt": "not a .txt file (HELM keeps only names ending in .txt)",
    "url_fragment": "a '#' in the file name: HELM's download URL takes the rest of the name as a fragment, the "
                    "download fails and HELM skips the file (--medhelm-compat helm only)",
    "section_case_mismatch": "PLAN:/SUMMARY:/FINDINGS: only in another case (HELM's split raises IndexError)",
    "no_reference_section": "no PLAN:/SUMMARY:/FINDINGS: section (no reference)",
    "empty_reference": "a PLAN:/SUMMARY:/FINDINGS: marker with nothing after it on its line (no reference)",
}


class _CaseMismatch(Exception):
    """HELM's ``IndexError``: ``text.split("PLAN:")[1]`` on a note where only ``Plan:`` occurs."""


def listing(folder: Path, limit: int | None = GITHUB_LISTING_LIMIT) -> tuple[list[str], int]:
    """HELM's file list: the folder's entries in git tree order (names sorted by UTF-8 bytes), cut at ``limit``.

    Returns (names within the limit, number of entries beyond it). Hidden entries (``.DS_Store`` …) are not part of
    the upstream folder and are ignored.
    """
    try:
        names = sorted((entry.name for entry in folder.iterdir() if not entry.name.startswith(".")),
                       key=lambda name: name.encode("utf-8", "surrogateescape"))
    except OSError as exc:
        raise DataError(folder, "", f"cannot list the folder: {exc.strerror or exc}") from None
    if not names:
        raise DataError(folder, "", "the folder is empty; expected the upstream .txt notes")
    if limit is None or len(names) <= limit:
        return names, 0
    return names[:limit], len(names) - limit


def read_note(path: Path) -> str:
    """A note as HELM reads it: UTF-8, universal newlines, stripped."""
    return universal_newlines(read_text(path)).strip()


def extract_sections(text: str) -> tuple[str | None, str | None, str | None]:
    """(plan, summary, findings): the rest of the line after each marker, ``None`` when the marker is absent.

    Raises :class:`_CaseMismatch` where HELM raises ``IndexError``.
    """
    upper = text.upper()
    found: list[str | None] = []
    for marker in SECTIONS:
        if marker not in upper:
            found.append(None)
            continue
        parts = text.split(marker)
        if len(parts) < 2:
            raise _CaseMismatch(marker)
        found.append(parts[1].split("\n", 1)[0].strip())
    return found[0], found[1], found[2]


def cut_at(text: str, markers: tuple[str, ...]) -> str:
    """The text before each marker in turn (case-sensitive), stripped: HELM's ``remove_*_section``."""
    for marker in markers:
        if marker in text:
            text = text.split(marker)[0].strip()
    return text


def note_id(file_name: str) -> str:
    stem = file_name.removesuffix(".txt")
    return re.sub(r"[^A-Za-z0-9.-]+", "_", stem).strip("_") or "note"


def select_notes(
    folder: Path,
    slug: str,
    input_cut: tuple[str, ...],
    listing_limit: int | None = GITHUB_LISTING_LIMIT,
    compat: str = "default",
) -> Loaded:
    """Instances of an MTSamples folder, in HELM's order, with the files each rule dropped in ``removed``.

    ``input_cut`` are the markers the input is cut at (MTSamples: PLAN only; Procedures: all three).
    ``compat="helm"`` also drops the files HELM fails to download: it puts the file name into the URL unquoted,
    so a ``#`` starts a fragment and the request asks for another path (7 MTSamples Procedures reports; no
    MTSamples note has a ``#``, ``?`` or ``%`` in its name). By default they are read like any other file.
    """
    names, beyond = listing(folder, listing_limit)
    loaded = Loaded(slug=slug)
    loaded.note_removed(DROP_REASONS["beyond_github_listing_limit"], beyond)
    seen: dict[str, str] = {}
    for name in names:
        path = folder / name
        if not name.endswith(".txt") or not path.is_file():
            loaded.note_removed(DROP_REASONS["not_txt"])
            continue
        if reproduces_helm(compat) and "#" in name:
            loaded.note_removed(DROP_REASONS["url_fragment"])
            continue
        text = read_note(path)
        try:
            plan, summary, findings = extract_sections(text)
        except _CaseMismatch:
            loaded.note_removed(DROP_REASONS["section_case_mismatch"])
            continue
        reference = plan or summary or findings
        if not reference:
            found = (plan, summary, findings) != (None, None, None)
            loaded.note_removed(DROP_REASONS["empty_reference" if found else "no_reference_section"])
            continue
        section = "PLAN" if plan else "SUMMARY" if summary else "FINDINGS"
        instance_id = note_id(name)
        if instance_id in seen:
            raise DataError(path, "", f"its instance id {instance_id!r} is also that of {seen[instance_id]!r}")
        seen[instance_id] = name
        loaded.append(
            Instance(
                id=instance_id,
                input=cut_at(text, input_cut),
                references=(reference,),
                extra={"file": name, "reference_section": section},
                benchmark=slug,
            )
        )
    return loaded.done()


def loaders(slug: str, folder: str, input_cut: tuple[str, ...]) -> tuple[Callable, Callable, Callable]:
    """``build_instances(files)`` of an MTSamples folder benchmark, ``build_instances_with_report(files,
    compat="default")``: (instances, dropped by the keys of :data:`DROP_REASONS`, zeros included), and
    ``build_instances_helm(files)``: the instances HELM gets (``Benchmark.build_instances_helm``)."""

    def build_instances(files: Mapping[str, Path]) -> Loaded:
        return select_notes(data_file(files, folder), slug, input_cut)

    def build_instances_helm(files: Mapping[str, Path]) -> Loaded:
        return select_notes(data_file(files, folder), slug, input_cut, compat="helm")

    def build_instances_with_report(files: Mapping[str, Path],
                                    compat: str = "default") -> tuple[Loaded, dict[str, int]]:
        loaded = build_instances_helm(files) if reproduces_helm(compat) else build_instances(files)
        return loaded, loaded.counts(DROP_REASONS)

    return build_instances, build_instances_with_report, build_instances_helm


build_instances, build_instances_with_report, build_instances_helm = loaders(SLUG, FOLDER, ("PLAN:",))


BENCHMARK = Benchmark(
    slug=SLUG,
    name="MTSamples",
    subcategory="Planning Treatments",
    access="public",
    kind="open",
    files=(
        DataFile(
            name=FOLDER,
            url=f"https://github.com/raulista1997/benchmarkdata/tree/{GIT_HASH}/{FOLDER}",
            description=(
                "the folder of 1,269 MTSamples .txt reports at that commit (no licence stated: copy the folder "
                "yourself, e.g. with a sparse git checkout of the commit)"
            ),
            is_dir=True,
        ),
    ),
    build_instances=build_instances,
    build_instances_helm=build_instances_helm,  # the same instances: no name here trips HELM's download
    prompt=GenerationPrompt(
        instructions="Given various information about a patient, return a reasonable treatment plan for the patient.",
        input_noun=None,
        output_noun="Answer",
    ),
    metric=jury_metric(SLUG),  # the LLM jury; ROUGE and BERTScore are recorded beside it
    max_tokens=512,
    description="Write a treatment plan for a patient from a transcribed medical report (scored by the LLM jury).",
    example=(
        "mtsamples_processed/Synthetic Knee Pain.txt: \"HISTORY: A synthetic 50-year-old with knee pain.\\nFINDINGS: "
        "Small effusion.\\nPLAN: Physical therapy and ibuprofen.\""
    ),
    instance_count=427,
    filters=(
        "of the 1,269 files: 269 beyond the GitHub contents API's 1,000-entry listing (HELM never sees them), 567 "
        "without a PLAN:/SUMMARY:/FINDINGS: section, 5 with a marker but nothing after it, 1 whose marker is only in "
        "another case (HELM's IndexError)"
    ),
)
