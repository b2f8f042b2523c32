#!/usr/bin/env python3
"""The documentation's own checks (python3 standard library only).

  check_docs.py links ROOT   every relative link in ROOT's Markdown files (README.md, docs/, any
                             other .md outside build folders) names a file or folder that exists,
                             and its #anchor a heading of the target as GitHub makes anchors
  check_docs.py keys ROOT    docs/config.md names every config key the sources define (each
                             `.name = "key", .kind = CT_KEY_...` row under engine/ and data/) and
                             every layer type of CT_LAYER_TYPES

Each failure is printed as FILE:LINE: what is wrong; the exit status is 1 on any failure.
"""
import bisect
import functools
import os
import re
import sys
import urllib.parse

FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")


def markdown_files(root):
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not d.startswith("build"))
        for name in sorted(files):
            if name.endswith(".md"):
                yield os.path.join(folder, name)


def prose_lines(path):
    """(line number, text) of the lines outside fenced code blocks."""
    fenced = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                fenced = not fenced
            elif not fenced:
                yield number, line.rstrip("\n")


def github_anchor(heading):
    """GitHub's anchor for a heading's text: inline markup dropped (a code span keeps its text, a
    link its label), lower case, punctuation other than '-' and '_' removed, each space a '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").strip().lower()
    return "".join(c for c in text if c.isalnum() or c in "-_ ").replace(" ", "-")


@functools.lru_cache(maxsize=None)
def anchors_of(path):
    """Every anchor of a Markdown file: its headings' (a repeated one gets -1, -2, ...) and its
    HTML anchors."""
    seen, anchors = {}, set()
    for _, line in prose_lines(path):
        anchors.update(HTML_ANCHOR.findall(line))
        m = re.match(r"^\s{0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$", line)
        if not m:
            continue
        base = github_anchor(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        anchors.add(base if n == 0 else "%s-%d" % (base, n))
    return frozenset(anchors)


def resolve(root, md, path_part):
    if path_part.startswith("/"):
        return os.path.join(root, path_part.lstrip("/"))
    if path_part:
        return os.path.normpath(os.path.join(os.path.dirname(md), path_part))
    return md


def paragraphs(path):
    """Runs of consecutive prose lines, each a list of (line number, text): a link may be broken
    across the lines of its paragraph."""
    block = []
    for number, line in prose_lines(path):
        if line.strip() and block and number == block[-1][0] + 1:
            block.append((number, line))
            continue
        if block:
            yield block
        block = [(number, line)] if line.strip() else []
    if block:
        yield block


def link_targets(block):
    """(line number, target) of every inline link and reference definition in a paragraph."""
    starts, text = [], ""
    for number, line in block:
        starts.append(len(text))
        text += CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line) + " "
    for m in INLINE_LINK.finditer(text):
        yield block[bisect.bisect_right(starts, m.start()) - 1][0], m.group(1)
    for number, line in block:
        m = REFERENCE_DEF.match(line)
        if m:
            yield number, m.group(1)


def check_links(root):
    problems, checked = [], 0
    for md in markdown_files(root):
        rel_md = os.path.relpath(md, root)
        for block in paragraphs(md):
            for number, target in link_targets(block):
                if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):
                    continue  # http:, https:, mailto: are not this test's to check
                checked += 1
                where = "%s:%d: link '%s'" % (rel_md, number, target)
                path_part, _, anchor = target.partition("#")
                dest = resolve(root, md, urllib.parse.unquote(path_part))
                if not os.path.exists(dest):
                    problems.append("%s: no such file or folder %s" % (where, os.path.relpath(dest, root)))
                elif anchor and dest.endswith(".md") and urllib.parse.unquote(anchor) not in anchors_of(dest):
                    problems.append("%s: %s has no heading with anchor #%s" % (where, os.path.relpath(dest, root), anchor))
    if checked == 0:
        problems.append("no relative links found under %s: the scanner is broken" % root)
    return problems, checked


def source_files(root, folders, ext):
    for top in folders:
        for folder, dirs, files in os.walk(os.path.join(root, top)):
            dirs.sort()
            for name in sorted(files):
                if name.endswith(ext):
                    yield os.path.join(folder, name)


def check_keys(root):
    row = re.compile(r'\.name\s*=\s*"([A-Za-z0-9_]+)"\s*,\s*\.kind\s*=\s*CT_KEY_')
    keys = {}
    for path in source_files(root, ["engine", "data"], ".c"):
        with open(path, encoding="utf-8") as f:
            for key in row.findall(f.read()):
                keys.setdefault(key, os.path.relpath(path, root))
    types = []
    for path in source_files(root, ["engine"], ".h"):
        with open(path, encoding="utf-8") as f:
            m = re.search(r"#define\s+CT_LAYER_TYPES\(X\)((?:[^\n]*\\\n)*[^\n]*)", f.read())
        if m:
            types = re.findall(r"X\(\s*[A-Z0-9_]+\s*,\s*([a-z0-9_]+)\s*\)", m.group(1))
    problems = []
    # keys every config has: if the scanner misses them, it has lost the key tables
    for key in ("format", "epochs", "units", "type"):
        if key not in keys:
            problems.append("engine/, data/: no key row for '%s' found: the scanner no longer finds the key tables" % key)
    if not types:
        problems.append("engine/: CT_LAYER_TYPES not found: the scanner no longer finds the layer types")
    with open(os.path.join(root, "docs", "config.md"), encoding="utf-8") as f:
        doc = f.read()
    for key, source in sorted(keys.items()):
        if not re.search(r"`%s\b" % re.escape(key), doc):
            problems.append("%s: key '%s' is not in docs/config.md" % (source, key))
    for t in types:
        if not re.search(r"`%s`" % re.escape(t), doc):
            problems.append("CT_LAYER_TYPES: layer type '%s' is not in docs/config.md" % t)
    return problems, len(keys) + len(types)


def main(argv):
    if len(argv) != 3 or argv[1] not in ("links", "keys"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    root = os.path.abspath(argv[2])
    problems, checked = (check_links if argv[1] == "links" else check_keys)(root)
    for p in problems:
        print(p)
    print("%s: %d checked, %d wrong" % (argv[1], checked, len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
