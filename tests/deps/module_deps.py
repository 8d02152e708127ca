#!/usr/bin/env python3
"""The module include graph of src/, and the rules it must keep.

A module is a folder of src/. Module A depends on module B when a file of A
includes "B/..." (B's internal header) or B's public header "ejob/....h".
Prints every edge with the file that makes it, then every circle (a strongly
connected component of more than one module) with the edges inside it, and
fails (exit 1) when a rule is broken:

  - src/coord includes no console header and calls no ej_console_* or
    ej__console_* function: the layout the two share lives in src/layout.
  - src/layout depends on no module but common.

Usage: module_deps.py SRC_DIR [--quiet]
"""
import os
import re
import sys

# Public headers whose name is not their module's folder.
PUBLIC = {
    "common": "common", "error": "common", "log": "common", "ejob": "runtime",
    "job": "exec", "event": "exec", "jobs": "runtime", "registry": "reg",
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def module_of_header(path, modules):
    head, _, name = path.partition("/")
    if head == "ejob":
        base = name[:-2] if name.endswith(".h") else name
        return PUBLIC.get(base, base if base in modules else None)
    return head if head in modules else None


def scan(src):
    modules = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    edges = {}  # (a, b) -> first file
    texts = {}
    for mod in modules:
        for root, _, files in os.walk(os.path.join(src, mod)):
            for f in sorted(files):
                if not f.endswith((".c", ".h")):
                    continue
                p = os.path.join(root, f)
                with open(p, encoding="utf-8", errors="replace") as fh:
                    text = fh.read()
                texts[os.path.relpath(p, src)] = (mod, text)
                for inc in INCLUDE.findall(text):
                    dep = module_of_header(inc, modules)
                    if dep is not None and dep != mod:
                        edges.setdefault((mod, dep), os.path.relpath(p, src) + ": " + inc)
    return modules, edges, texts


def circles(modules, edges):
    """Tarjan's strongly connected components, those with 2+ modules."""
    succ = {m: sorted(b for (a, b) in edges if a == m) for m in modules}
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in succ[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for m in modules:
        if m not in index:
            visit(m)
    return sorted(out)


DEFN = re.compile(r"^(?!static\b)[A-Za-z_][\w \t\*]*?\b(ej_{1,2}\w+)\s*\([^;]*$", re.M)
IDENT = re.compile(r"\bej_{1,2}\w+")


def file_circles(texts, module):
    """Circles of calls between the .c files of one module: file A calls a
    function file B defines, and B (through others) calls back into A."""
    files = {p: t for p, (m, t) in texts.items() if m == module and p.endswith(".c")}
    owner = {}
    for p, t in files.items():
        for name in DEFN.findall(t):
            owner.setdefault(name, p)
    edges = {}
    for p, t in files.items():
        for name in set(IDENT.findall(t)):
            q = owner.get(name)
            if q is not None and q != p:
                edges.setdefault((p, q), name)
    return sorted(files), edges


def rule_errors(edges, texts):
    errs = []
    for (a, b), why in sorted(edges.items()):
        if a == "coord" and b == "console":
            errs.append("coord depends on console: " + why)
        if a == "layout" and b != "common":
            errs.append("layout depends on " + b + ": " + why)
    call = re.compile(r"\bej_{1,2}console_\w+")
    for path, (mod, text) in sorted(texts.items()):
        if mod != "coord":
            continue
        for n, line in enumerate(text.splitlines(), 1):
            m = call.search(line)
            if m:
                errs.append("%s:%d: coord calls %s" % (path, n, m.group(0)))
    return errs


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    quiet = "--quiet" in sys.argv[2:]
    modules, edges, texts = scan(sys.argv[1])
    if not quiet:
        print("edges (module -> module: first file and include):")
        for (a, b), why in sorted(edges.items()):
            print("  %s -> %s  (%s)" % (a, b, why))
    comps = circles(modules, edges)
    print("circles: %d" % len(comps))
    for comp in comps:
        print("  " + " <-> ".join(comp))
        for (a, b), why in sorted(edges.items()):
            if a in comp and b in comp:
                print("    %s -> %s  (%s)" % (a, b, why))
    for module in ("coord",):
        files, fedges = file_circles(texts, module)
        fcomps = circles(files, fedges)
        print("%s: circles of calls between its files: %d" % (module, len(fcomps)))
        for comp in fcomps:
            print("  " + " <-> ".join(os.path.basename(f) for f in comp))
            if not quiet:
                for (a, b), why in sorted(fedges.items()):
                    if a in comp and b in comp:
                        print("    %s -> %s  (%s)" % (os.path.basename(a), os.path.basename(b), why))
    errs = rule_errors(edges, texts)
    for e in errs:
        print("FAIL: " + e)
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
