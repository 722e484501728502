"""mkdocs hook: pages from outside docs/, and links written as the repository holds the files.

The site's home page is README.md itself, and bench/README.md with bench/results/*.md are pages of the site, so
none of them is written twice. Every page links to other files by their place in the repository (a link that
works on GitHub too); this hook points each such link at the file's place on the site before mkdocs checks it.
A link to a repository file that is not on the site (a source file) becomes its text; a link to a file that
exists nowhere is left as written, so `mkdocs build --strict` fails on it.
"""
from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File, InclusionLevel

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def _outside() -> dict:
    """Repository path -> (site path, in the navigation or not) of each page that lives outside docs/."""
    pages = {"README.md": ("index.md", True), "bench/README.md": ("bench/README.md", True)}
    for result in sorted((REPO / "bench" / "results").glob("*.md")):
        path = result.relative_to(REPO).as_posix()
        pages[path] = (path, False)
    return pages


def on_files(files, config):
    for repo_path, (site_path, in_nav) in _outside().items():
        inclusion = InclusionLevel.UNDEFINED if in_nav else InclusionLevel.NOT_IN_NAV
        files.append(File.generated(config, site_path, abs_src_path=str(REPO / repo_path), inclusion=inclusion))
    return files


def _site_target(target: str, page_file: Path, outside: dict) -> str | None:
    """The site path of a repository-relative link target, "" for a repository file not on the site, None when
    the target is not a file of the repository (left to mkdocs)."""
    resolved = (page_file.parent / target).resolve()
    if DOCS in resolved.parents and (resolved.exists() or resolved.suffix == ".md"):
        return resolved.relative_to(DOCS).as_posix()
    if REPO not in resolved.parents:
        return None
    in_repo = resolved.relative_to(REPO).as_posix()
    if in_repo in outside:
        return outside[in_repo][0]
    return "" if resolved.exists() else None


def on_page_markdown(markdown, page, config, files):
    outside = _outside()
    page_file = Path(page.file.abs_src_path)
    here = posixpath.dirname(page.file.src_uri)

    def relink(match):
        bang, text, target = match.groups()
        if re.match(r"^[a-z][a-z0-9+.-]*:|^#", target):
            return match.group(0)  # a URL or an anchor on this page
        path, _, anchor = target.partition("#")
        site = _site_target(path, page_file, outside)
        if site is None:
            return match.group(0)
        if site == "":
            return text  # a source file: named, not linked (the site does not carry the code)
        new = posixpath.relpath(site, here or ".") + (f"#{anchor}" if anchor else "")
        return f"{bang}[{text}]({new})"

    # Links only outside fenced code; a link's text may run over lines, so each stretch between fences at once.
    chunks, current, fenced = [], [], False
    for line in markdown.split("\n"):
        if FENCE.match(line.lstrip()):
            chunks.append("\n".join(current) if fenced else LINK.sub(relink, "\n".join(current)))
            current, fenced = [], not fenced
        current.append(line)
    chunks.append("\n".join(current) if fenced else LINK.sub(relink, "\n".join(current)))
    return "\n".join(chunks)
