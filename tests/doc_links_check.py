#!/usr/bin/env python3
"""The docs a reader follows (ctest docs.links).

  doc_links_check.py SOURCE_DIR

checks README.md, CONTRIBUTING.md, docs/*.md, bench/*.md and data/*/README.md:
- every relative link (`[text](path)`, `![alt](path)`, `[name]: path`) names a file or folder
  that exists, and a `#fragment` names a heading of the page it points to (GitHub's anchors);
- README.md still shows each command scripts/fresh-machine-check runs as "the README's
  commands" (that script stops with "README.md no longer says ..." otherwise, but only in CI).
Links inside code (fenced blocks and `spans`) and links with a scheme (https:, mailto:) are not
checked. Prints one line per broken link (file:line: what) and exits 1 if there is any.
"""
import glob
import os
import re
import sys

INLINE = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
FENCE = re.compile(r"^\s{0,3}(```|~~~)")
CODE_SPAN = re.compile(r"(`+).*?\1")
HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")


def pages(root):
    names = ["README.md", "CONTRIBUTING.md"]
    for pattern in ("docs/*.md", "bench/*.md", "data/*/README.md"):
        names += sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, pattern)))
    return [n for n in names if os.path.isfile(os.path.join(root, n))]


def prose_lines(text):
    """(line number, line) outside fenced code blocks, with code spans blanked."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        opening = FENCE.match(line)
        if fence is not None:
            if opening and opening.group(1) == fence:
                fence = None
            continue
        if opening:
            fence = opening.group(1)
            continue
        yield number, CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|__", "", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading: its text
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    seen = {}
    result = set()
    with open(path, encoding="utf-8") as f:
        for _, line in prose_lines(f.read()):
            m = HEADING.match(line)
            if not m:
                continue
            base = slug(m.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            result.add(base if count == 0 else f"{base}-{count}")
    return result


def links(text):
    for number, line in prose_lines(text):
        for m in INLINE.finditer(line):
            yield number, m.group(1)
        m = REFERENCE.match(line)
        if m:
            yield number, m.group(1)


def check_links(root):
    problems = []
    for page in pages(root):
        with open(os.path.join(root, page), encoding="utf-8") as f:
            text = f.read()
        here = os.path.dirname(os.path.join(root, page))
        for number, target in links(text):
            if not target or re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", target):
                continue  # empty, or https:, mailto:, ...
            path, _, fragment = target.partition("#")
            resolved = os.path.join(root, page)
            if path:
                resolved = os.path.normpath(os.path.join(here, path))
            where = f"{page}:{number}"
            if path and not os.path.exists(resolved):
                problems.append(f"{where}: link to '{target}': {path} does not exist")
                continue
            if fragment and resolved.endswith(".md") and os.path.isfile(resolved):
                if fragment.lower() not in anchors(resolved):
                    problems.append(
                        f"{where}: link to '{target}': "
                        f"{os.path.relpath(resolved, root)} has no heading '#{fragment}'"
                    )
    return problems


def check_readme_commands(root):
    """README.md must show what scripts/fresh-machine-check runs as the README's commands."""
    script = os.path.join(root, "scripts", "fresh-machine-check")
    if not os.path.isfile(script):
        return []
    with open(script, encoding="utf-8") as f:
        source = f.read()
    commands = re.findall(r"commands\+=\(\"([^\"]+)\"\)", source)
    commands += re.findall(r"commands\+=\('([^']+)'\)", source)
    if not commands:
        return ["scripts/fresh-machine-check: no `commands+=(...)` found (has the script changed?)"]
    with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return [
        f"README.md: no longer says '{c}' (scripts/fresh-machine-check runs it as the README's)"
        for c in commands
        if c not in readme
    ]


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = sys.argv[1]
    problems = check_links(root) + check_readme_commands(root)
    for p in problems:
        print(p)
    checked = ", ".join(pages(root))
    print(f"doc_links_check: {len(problems)} problem(s) in {checked}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
