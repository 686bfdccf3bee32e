"""The README and docs/ as a reader meets them: every link leads somewhere inside the repository,
every anchor to a heading, and the two commands the README starts with are the ones CI runs."""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", ROOT / "compat_tests" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors_of(page: pathlib.Path) -> set[str]:
    """GitHub's anchors for a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(), re.M)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_link_stays_in_the_repository_and_finds_its_target(page):
    text = page.read_text()
    assert "../shared" not in text
    for target in LINK.findall(text):
        if target.startswith(("http://", "https://", "mailto:")):
            raise AssertionError(f"{page.name} links outside the repository: {target}")
        path, _, anchor = target.partition("#")
        destination = (page.parent / path).resolve() if path else page
        assert destination.is_relative_to(ROOT), f"{page.name}: {target} leaves the repository"
        assert destination.exists(), f"{page.name}: {target} does not exist"
        if anchor:
            assert anchor in anchors_of(destination), f"{page.name}: no heading for #{anchor} in {destination.name}"


def test_the_readme_starts_with_the_two_commands_and_ci_runs_the_second():
    blocks = re.findall(r"```sh\n(.+?)\n```", (ROOT / "README.md").read_text(), re.S)
    run_broker, run_tests = blocks[0], blocks[1]
    assert run_broker.endswith("pip install . && kbroker")
    assert run_tests in (ROOT / ".ci" / "run").read_text()


def test_no_sentence_in_the_readme_runs_longer_than_a_few_lines():
    prose = re.sub(r"```.*?```", "", (ROOT / "README.md").read_text(), flags=re.S)
    prose = re.sub(r"^(\|.*|#.*)$", "", prose, flags=re.M)  # tables and headings
    for paragraph in re.split(r"\n\s*\n|\n- |\n\d+\. ", prose):  # paragraphs and list items
        for sentence in re.split(r"(?<=[.!?])\s+", paragraph):
            assert len(sentence) < 400, sentence
