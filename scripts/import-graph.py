#!/usr/bin/env python3
"""The workspace's import graph, from the code's own `use` lines and paths.

    scripts/import-graph.py [--dot FILE]

Prints, for the crates (root `src/` and `crates/*`), which crate each one uses (paths naming
another workspace crate) and whether that is allowed by the layering (each crate may use only
those below it), then, inside each crate, the arrows between its top-level modules and every
loop among them (strongly connected components of more than one module). Also lists source
files over 600 lines (test modules excluded). Exits 1 when an arrow points up, a crate uses a
crate it does not declare, or a loop exists; 0 otherwise. Standard library only.
"""
import os
import re
import sys
from collections import defaultdict

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))

# Bottom first: a crate may use only crates before it in this list.
LAYERS = [
    "gpulint_source",
    "gpulint_syntax",
    "gpulint_diagnostics",
    "gpulint_manifest",
    "gpulint_semantic",
    "gpulint_memory",
    "gpulint_linter",
    "gpulint_workspace",
    "gpulint",
]


def crate_dirs():
    dirs = {"gpulint": os.path.join(ROOT, "src")}
    for name in sorted(os.listdir(os.path.join(ROOT, "crates"))):
        if os.path.isdir(os.path.join(ROOT, "crates", name, "src")):
            dirs[name] = os.path.join(ROOT, "crates", name, "src")
    return dirs


def strip_comments_and_tests(text):
    """Drops comments, string literals' contents and `#[cfg(test)] mod tests { ... }` blocks."""
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    out = []
    i = 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i : m.start()])
        depth = 1
        j = m.end()
        while j < len(text) and depth:
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def code_lines(text):
    """Lines of a file, not counting a trailing test module."""
    m = re.search(r"^#\[cfg\(test\)\]\s*\nmod\s+tests", text, flags=re.M)
    body = text[: m.start()] if m else text
    return body.count("\n")


def rust_files(src):
    for dp, _, fn in os.walk(src):
        for f in sorted(fn):
            if f.endswith(".rs"):
                yield os.path.join(dp, f)


def top_module(src, path):
    rel = os.path.relpath(path, src)
    first = rel.split(os.sep)[0]
    if first in ("lib.rs", "main.rs"):
        return None
    return first[:-3] if first.endswith(".rs") else first


def module_depth(src, path):
    """How many `super`s lead from the module of `path` to the crate root."""
    parts = os.path.relpath(path, src).split(os.sep)
    if parts[-1] == "mod.rs":
        parts = parts[:-1]
    return len(parts)


def declared_deps(name):
    toml = os.path.join(ROOT, "Cargo.toml") if name == "gpulint" else os.path.join(ROOT, "crates", name, "Cargo.toml")
    text = open(toml, encoding="utf-8").read()
    deps = text.split("[dependencies]", 1)[1].split("\n[", 1)[0]
    return set(re.findall(r"^(gpulint_\w+)\s*=", deps, flags=re.M))


def sccs(nodes, edges):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
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
            out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main():
    dot = None
    if "--dot" in sys.argv:
        dot = sys.argv[sys.argv.index("--dot") + 1]
    dirs = crate_dirs()
    problems = 0
    crate_edges = defaultdict(set)
    big = []
    module_report = []
    for name, src in dirs.items():
        modules = set()
        for p in rust_files(src):
            m = top_module(src, p)
            if m:
                modules.add(m)
        edges = defaultdict(set)
        for p in rust_files(src):
            raw = open(p, encoding="utf-8").read()
            n = code_lines(raw)
            if n > 600:
                big.append((n, os.path.relpath(p, ROOT)))
            text = strip_comments_and_tests(raw)
            for other in re.findall(r"\b(gpulint_\w+)::", text) + re.findall(r"\buse\s+(gpulint_\w+)\b", text):
                if other in dirs and other != name:
                    crate_edges[name].add(other)
            me = top_module(src, p)
            if me is None:
                continue
            # `crate::x` and, from a module `depth` levels down, `super::…::x` reaching the root.
            depth = module_depth(src, p)
            root = r"(?<![\w:])(?:crate|" + "::".join(["super"] * depth) + r")"
            refs = set(re.findall(root + r"::(\w+)", text))
            for group in re.findall(root + r"::\{([^}]*)\}", text):
                refs.update(re.findall(r"^\s*(\w+)", x)[0] for x in group.split(",") if x.strip())
            for r in refs:
                if r in modules and r != me:
                    edges[me].add(r)
        loops = [c for c in sccs(modules, edges) if len(c) > 1]
        module_report.append((name, modules, edges, loops))
        problems += len(loops)

    print("== crates (an arrow: uses)")
    for name in LAYERS:
        if name not in dirs:
            continue
        uses = sorted(crate_edges[name], key=LAYERS.index)
        bad = [u for u in uses if LAYERS.index(u) >= LAYERS.index(name)]
        undeclared = [u for u in uses if u not in declared_deps(name)]
        problems += len(bad) + len(undeclared)
        flag = ""
        if bad:
            flag += "  UPWARD: " + ", ".join(bad)
        if undeclared:
            flag += "  UNDECLARED: " + ", ".join(undeclared)
        print(f"{name:22} -> {', '.join(uses) or '-'}{flag}")
    print()
    print("== modules inside each crate")
    for name, modules, edges, loops in module_report:
        arrows = sum(len(v) for v in edges.values())
        print(f"{name}: {len(modules)} top-level modules, {arrows} arrows, {len(loops)} loops")
        for c in loops:
            inner = [f"{a}->{b}" for a in c for b in sorted(edges[a]) if b in c]
            print(f"  LOOP: {' '.join(inner)}")
    print()
    print(f"== files over 600 lines (tests excluded): {len(big)}")
    for n, p in sorted(big, reverse=True):
        print(f"  {n:5} {p}")
    if dot:
        with open(dot, "w") as f:
            f.write("digraph crates {\n  rankdir=BT;\n")
            for a, bs in sorted(crate_edges.items()):
                for b in sorted(bs):
                    f.write(f'  "{a}" -> "{b}";\n')
            f.write("}\n")
    print()
    print(f"import graph: {problems} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
