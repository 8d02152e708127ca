#!/usr/bin/env python3
"""Prints, one a line and sorted, the name of every declaration marked
EJ_EXTERN in the headers given as arguments (functions and variables)."""
import re
import sys

names = set()
for path in sys.argv[1:]:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    # Preprocessor lines, with their continuations (the #define of EJ_EXTERN).
    text = re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", " ", text, flags=re.M)
    for decl in re.findall(r"\bEJ_EXTERN\b([^;{]*)", text):
        # A function: the name right before the parameter list (the first
        # parenthesis); a variable: the last name before [ or the end.
        m = re.search(r"([A-Za-z_]\w*)\s*\(", decl)
        if m is None:
            m = re.search(r"([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*$", decl.strip())
        if m is None:
            sys.exit(f"{path}: cannot read the declaration: EJ_EXTERN{decl}")
        names.add(m.group(1))
print("\n".join(sorted(names)))
