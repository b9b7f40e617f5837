#!/usr/bin/env python3
"""Finds circles among the server's source files: file A calls a function that
file B defines and B (directly or through others) calls one that A defines.
Reads the symbols of the objects CMake built (nm), so it sees calls, not
includes. Usage: scripts/cycles.py BUILD_DIR. Prints each circle and exits 1;
0 when there is none."""
import pathlib
import subprocess
import sys


def symbols(obj):
    out = subprocess.run(["nm", "--defined-only", "-g", str(obj)], capture_output=True, text=True, check=True).stdout
    defined = {line.split()[-1] for line in out.splitlines() if line.strip()}
    out = subprocess.run(["nm", "-u", str(obj)], capture_output=True, text=True, check=True).stdout
    used = {line.split()[-1] for line in out.splitlines() if line.strip()}
    return defined, used


def circles(edges):
    """Tarjan's strongly connected components of more than one file."""
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
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: scripts/cycles.py BUILD_DIR")
    objdir = pathlib.Path(sys.argv[1]) / "server" / "CMakeFiles" / "tpserver_core.dir"
    objs = sorted(objdir.rglob("*.c.o"))
    objs = [o for o in objs if not o.name.endswith("_gen.c.o")]
    if not objs:
        sys.exit(f"cycles: no objects under {objdir}: build first")
    name = {o: str(o.relative_to(objdir))[:-2] for o in objs}
    owner, uses = {}, {}
    for o in objs:
        defined, used = symbols(o)
        for s in defined:
            owner[s] = name[o]
        uses[name[o]] = used
    edges = {f: {owner[s] for s in used if s in owner and owner[s] != f} for f, used in uses.items()}
    found = circles(edges)
    for comp in found:
        print("circle: " + " <-> ".join(comp), file=sys.stderr)
    if found:
        return 1
    print(f"cycles: none among {len(objs)} files of server/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
