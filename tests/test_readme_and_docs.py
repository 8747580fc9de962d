"""The README and docs/ read as a reader needs them (issue 32, item 7).

* a table's cell holds at most a sentence (``MAX_CELL`` characters): detail goes in prose under the table, where it
  wraps;
* every page of docs/ is linked from docs/index.md, the index of the documentation;
* every relative link of README.md and docs/*.md names a file that exists, and an anchor (``page.md#section``) a
  heading of that page, as GitHub makes anchors of headings;
* the README's test command is the one CI runs (.ci/run repeats it: a change to one must be made to the other);
* every option ``pytest --help`` lists is in docs/options.md, the table that moved out of the README.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from urllib.parse import unquote

import pytest
from pytester_runs import run

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: about two lines of a wrapped table: a sentence; more belongs in the prose under the table
MAX_CELL = 200

PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
#: [text](target) and ![alt](target); the target ends at the first space (a title may follow) or closing parenthesis
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\)")


def prose(page: Path) -> str:
    """The page without its fenced code blocks (a link or a table in an example is not the page's own)."""
    return FENCE.sub("", page.read_text(encoding="utf-8"))


def table_cells(line: str) -> list[str]:
    """The cells of a Markdown table row; a pipe escaped as ``\\|`` (inside code too) is part of its cell."""
    inner = line.strip()[1:-1]
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", inner)]


def is_table_row(line: str) -> bool:
    stripped = line.strip()
    return stripped.startswith("|") and stripped.endswith("|") and len(stripped) > 1


def shown(page: Path) -> str:
    return str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else page.name


def long_cells(page: Path) -> list[str]:
    found = []
    for number, line in enumerate(prose(page).splitlines(), 1):
        if is_table_row(line):
            found += [f"{shown(page)}:{number}: {len(cell)} characters: {cell[:60]}..."
                      for cell in table_cells(line) if len(cell) > MAX_CELL]
    return found


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped (hyphens and underscores kept), spaces
    made hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())  # a link in a heading: its text
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    for line in prose(page).splitlines():
        match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        anchor = github_anchor(match.group(1))
        base, repeat = anchor, 0
        while anchor in found:  # GitHub numbers a repeated heading's anchor
            repeat += 1
            anchor = f"{base}-{repeat}"
        found.add(anchor)
    found |= set(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", page.read_text(encoding="utf-8")))
    return found


def relative_links(page: Path) -> list[str]:
    return [target for target in LINK.findall(prose(page))
            if not re.match(r"[a-z][a-z0-9+.-]*:", target, re.IGNORECASE)]  # http:, https:, mailto: ...


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in relative_links(page):
        path_part, _, fragment = target.partition("#")
        destination = (page.parent / unquote(path_part)).resolve() if path_part else page
        where = f"{shown(page)}: {target}"
        if not destination.exists():
            broken.append(f"{where} (no such file)")
        elif fragment and destination.suffix == ".md" and fragment not in anchors(destination):
            broken.append(f"{where} (no heading of {destination.name} has this anchor)")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_no_table_cell_is_longer_than_a_sentence(page):
    assert not long_cells(page), "\n".join(long_cells(page))


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_relative_link_resolves(page):
    assert not broken_links(page), "\n".join(broken_links(page))


def test_every_docs_page_is_in_the_index():
    index = DOCS / "index.md"
    linked = {(DOCS / target.partition("#")[0]).resolve() for target in relative_links(index)}
    missing = [page.name for page in sorted(DOCS.glob("*.md")) if page != index and page.resolve() not in linked]
    assert not missing, f"docs/index.md does not link {missing}"


def test_the_readme_links_the_index_and_the_architecture():
    targets = {target.partition("#")[0] for target in relative_links(ROOT / "README.md")}
    assert {"docs/index.md", "docs/architecture.md"} <= targets


def readme_commands() -> list[list[str]]:
    """The README's first code block: its command lines (comments aside), each split at ``&&`` into commands."""
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.DOTALL)
    assert block, "the README opens with a bash block: the main job and the tests"
    lines = [line for line in block.group(1).splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [[part.strip() for part in line.split("&&")] for line in lines]


def normalized(command: str) -> list[str]:
    """A command as CI's script writes it and as the README does: ``python -m`` and pip's ``-q`` aside."""
    words = shlex.split(command)
    if words[:2] == ["python", "-m"]:
        words = words[2:]
    return [word for word in words if word != "-q"]


def test_ci_runs_the_readmes_test_command():
    main_job, tests = readme_commands()
    assert any("benchmarks" in normalized(part) for part in main_job)
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
                if line.strip() and not line.lstrip().startswith("#")]
    ci_commands = [normalized(part) for line in ci_lines for part in line.split("&&")
                   if part.strip().split()[0] in ("pip", "python", "pytest")]
    for part in tests:
        assert normalized(part) in ci_commands, f"the README's {part!r} is not what .ci/run runs"


def test_every_option_is_in_the_options_page(pytester):
    help_text = run(pytester, "--help").stdout.str()
    options = set(re.findall(r"--medhelm-[a-z0-9-]+", help_text))
    assert len(options) > 30, "pytest --help lists the plugin's options"
    documented = set(re.findall(r"--medhelm-[a-z0-9-]+", (DOCS / "options.md").read_text(encoding="utf-8")))
    assert not options - documented, f"docs/options.md does not say what {sorted(options - documented)} do"


def test_the_checks_bite(tmp_path):
    """Each check finds what it is for: a long cell, a dead link, a wrong anchor; not in a code block."""
    (tmp_path / "index.md").write_text("# The index\n", encoding="utf-8")
    page = tmp_path / "planted.md"
    page.write_text("# A page\n\n| a | b |\n|---|---|\n| short | " + "x" * (MAX_CELL + 1) + " |\n\n"
                    "[gone](gone.md), [index](index.md#no-such-heading), [here](#a-page), [there](index.md#the-index), "
                    "[web](https://example.org/x.md)\n\n```\n| " + "y" * 300 + " |\n[code](nowhere.md)\n```\n",
                    encoding="utf-8")
    assert len(long_cells(page)) == 1
    assert [line.split(" (")[0] for line in broken_links(page)] == [
        "planted.md: gone.md", "planted.md: index.md#no-such-heading"]


def test_anchors_are_githubs():
    assert github_anchor("Benchmarks: 45 of MedHELM's 46") == "benchmarks-45-of-medhelms-46"
    assert github_anchor("`--medhelm-batch`: Batch APIs") == "--medhelm-batch-batch-apis"
    assert github_anchor("HealthBench and HealthBench Professional (medhelm 0.8.0's additions)") == (
        "healthbench-and-healthbench-professional-medhelm-080s-additions")
