#!/usr/bin/env python3
"""Two measures of issue 33 (Architecture v2) over the C sources, from their text alone (no compiler):

  1. fan-out: for each struct type, the function definitions that take it whole -- a parameter of that type, by
     value or through one pointer (`T x`, `T *x`, `const T *x`; `T **x`, an array of them, is not counted);
     with, per type, the number of files those definitions are in and how many lie outside the file holding
     most of them (a module's own struct passed among its own functions, against one passed across modules);
  2. long functions: the function definitions of more than --max-lines lines (from the line with the name to the
     closing brace) in the files given with --long.

Struct types are the names of `typedef struct ... } NAME;`, `typedef struct TAG NAME;` and `struct NAME {` found
in the headers and sources scanned, and their aliases (`typedef T NAME;`), each counted under its own name; a definition is a function name with its parameter list at the start of a
line, followed by `{`.  Usage:

  scripts/struct_fanout.py                       # fan-out over src/**/*.c, top 15; long functions in the round path
  scripts/struct_fanout.py --top 0 --show fl_round_view
  scripts/struct_fanout.py --long src/fl/round.c src/fl/client.c --max-lines 80
  scripts/struct_fanout.py --check 10            # the rule below and no long function, checked (tests/fanout.sh)

The rule --check N holds (issue 33, "no struct passed whole to more than ~10 functions"): no struct type is taken whole
by more than N function definitions outside its own module, the folder of src/ that defines its body (for a body in
include/dpfl/NAME.h, that header's module), nor by more than 2N in all; an alias (typedef) counts with the type it
names.  A module's own functions taking
its struct are its methods; a struct that many other modules take whole, or that one module passes to every function
it has, is a god object (issue 33 found dpfl_sim taken by 75 functions in fl/, run/, net/ and cli/, and run_ctx by 22
in run/ alone).  VALUE_TYPES are the exceptions, each with its reason:
values and capabilities that other modules are meant to take whole.
"""
import argparse
import glob
import os
import re
import sys

# the round on every transport: the simulation's round and its modes, the run driver's round, the evaluation after it,
# and the deployed (net/) and MPI (cli/mpi_train.c) transports' sides of it
ROUND_PATH = ["src/fl/round.c", "src/fl/client.c", "src/fl/clients.c", "src/fl/aggregate_mean.c",
              "src/fl/aggregate_cdp.c", "src/fl/aggregate_ddp.c", "src/fl/transport_local.c", "src/fl/eval.c",
              "src/fl/sim_ledger.c", "src/run/run_round.c", "src/run/run.c", "src/net/server.c",
              "src/net/server_round.c", "src/net/server_secagg.c", "src/net/client.c", "src/net/client_secagg.c",
              "src/cli/mpi_train.c"]


# struct types other modules are meant to take whole (--check does not count them), and why
VALUE_TYPES = {
    "dpfl_error": "the error every fallible function fills (one line and a status)",
    "dpfl_config": "the parsed configuration, typed; taken const outside config/ but where it is built and freed",
    "dpfl_rng": "the ChaCha20 generator, passed to whatever draws noise or samples",
    "dpfl_dataset": "the data, read by whatever trains or evaluates on it",
    "dpfl_partition": "which records each client holds, read (const) by whoever trains, samples or accounts",
    "dpfl_model": "the network, built by nn/ and trained, saved and exported elsewhere",
    "dpfl_event": "a privacy event: the mechanisms return it, the accountants read it",
    "dpfl_bytes_reader": "the one byte codec's cursor, used by every file and message format",
    "dpfl_mech_clients": "a round's client sampling design (six numbers), the input of the round's event",
    "dpfl_par": "the fork-join thread pool, passed to every kernel that splits its work",
    "dpfl_wire_msg": "one decoded network message, passed from the wire codec to whoever handles it",
    "dpfl_transport": "the public transport interface (include/dpfl/transport.h), taken by each transport's functions",
    "dpfl_round_job": "the transport interface's round job, taken by each transport's functions (local, net, MPI)",
}


def strip_comments(text):
    """Comments and string/char literals blanked (newlines kept, so line numbers stay)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j]) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def struct_names(paths, homes=None, declared=None, aliases=None):
    """the struct type names in paths; homes (if given) gets NAME -> the files holding a body of it (a type local to
    a .c file may share its name with another file's); declared (if given) gets the names a header declares as
    `typedef struct TAG NAME;` (an opaque handle whose body is in a .c file); aliases (if given) gets ALIAS -> the
    type it names (`typedef struct TAG OTHER;`, `typedef T U;`)"""
    names, texts = set(), []
    homes = {} if homes is None else homes
    declared = set() if declared is None else declared
    aliases = {} if aliases is None else aliases
    for p in paths:
        t = strip_comments(open(p, encoding="utf-8", errors="replace").read())
        # typedef struct [TAG] { ... } NAME;  -- match the closing brace at the typedef's depth
        for m in re.finditer(r"\btypedef\s+struct\b\s*(\w+)?\s*\{", t):
            depth, i = 1, m.end()
            while i < len(t) and depth:
                depth += {"{": 1, "}": -1}.get(t[i], 0)
                i += 1
            nm = re.match(r"\s*(\w+)\s*;", t[i:])
            if nm:
                names.add(nm.group(1))
                homes.setdefault(nm.group(1), []).append(p)
            if m.group(1):
                names.add(m.group(1))
                homes.setdefault(m.group(1), []).append(p)
        for m in re.finditer(r"\btypedef\s+struct\s+(\w+)\s+(\w+)\s*;", t):
            names.update(m.groups())
            if m.group(1) != m.group(2):
                aliases[m.group(2)] = m.group(1)
            if p.endswith(".h"):
                declared.update(m.groups())
        for m in re.finditer(r"^struct\s+(\w+)\s*\{", t, re.M):
            names.add(m.group(1))
            homes.setdefault(m.group(1), []).append(p)
        texts.append(t)
    # aliases: typedef [struct] T U; with T a struct type (e.g. client_result for dpfl_client_report)
    grown = True
    while grown:
        grown = False
        for t in texts:
            for m in re.finditer(r"\btypedef\s+(?:struct\s+)?(\w+)\s+(\w+)\s*;", t):
                if m.group(1) in names and m.group(2) not in names:
                    names.add(m.group(2))
                    aliases[m.group(2)] = m.group(1)
                    grown = True
    return names


DEF = re.compile(r"^(?!static_assert|typedef|return|if|for|while|switch)[A-Za-z_][\w \t\*]*?\b(\w+)\s*\(([^;{}]*?)\)\s*\{",
                 re.M | re.S)


def definitions(path):
    """(name, params, first line, last line) of each function defined in path."""
    t = strip_comments(open(path, encoding="utf-8", errors="replace").read())
    for m in DEF.finditer(t):
        name, params = m.group(1), m.group(2)
        if name in ("if", "for", "while", "switch", "sizeof"):
            continue
        depth, i = 1, m.end()
        while i < len(t) and depth:
            depth += {"{": 1, "}": -1}.get(t[i], 0)
            i += 1
        first = t.count("\n", 0, m.start(1)) + 1
        last = t.count("\n", 0, i) + 1
        yield name, params, first, last


def whole_params(params, structs):
    """the struct types params takes by value or through one pointer"""
    found = set()
    for p in params.split(","):
        p = " ".join(p.replace("*", " * ").split())
        m = re.match(r"^(?:const\s+|volatile\s+)*(?:struct\s+)?(\w+)\s*((?:\*\s*(?:const\s*)?)*)", p)
        if m and m.group(1) in structs and m.group(2).count("*") <= 1:
            found.add(m.group(1))
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--top", type=int, default=15, help="struct types listed, most taken first (0: all)")
    ap.add_argument("--show", action="append", default=[], help="list the functions taking this type")
    ap.add_argument("--long", nargs="*", default=None, help="files for the long-function list (default: round path)")
    ap.add_argument("--max-lines", type=int, default=80)
    ap.add_argument("--check", type=int, metavar="N",
                    help="fail (status 1) if a struct type not in VALUE_TYPES is taken whole by more than N function "
                         "definitions outside its module; print only that")
    a = ap.parse_args()
    os.chdir(a.root)
    sources = sorted(glob.glob("src/**/*.c", recursive=True))
    headers = sorted(glob.glob("src/**/*.h", recursive=True) + glob.glob("include/**/*.h", recursive=True))
    homes, declared, aliases = {}, set(), {}
    structs = struct_names(headers + sources, homes, declared, aliases)
    takers = {}
    for path in sources:
        for name, params, first, _ in definitions(path):
            for s in whole_params(params, structs):
                takers.setdefault(s, []).append(f"{path}:{first} {name}")
    if a.check is not None:
        files = [f for f in (ROUND_PATH if a.long is None else a.long) if os.path.exists(f)]
        return check(takers, homes, declared, aliases, a.check) | long_functions(files, a.max_lines, quiet=True)
    ranked = sorted(takers.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    print(f"struct types taken whole (by value or one pointer) by function definitions in src/**/*.c:")
    print("  (then: the files those functions are in, and how many are outside the file holding most of them)")
    for s, fns in ranked[: a.top or len(ranked)]:
        per_file = {}
        for f in fns:
            per_file[f.split(":")[0]] = per_file.get(f.split(":")[0], 0) + 1
        home = max(per_file, key=lambda k: (per_file[k], k))
        print(f"  {len(fns):4d}  {s:<22} {len(per_file):3d} file(s), {len(fns) - per_file[home]:3d} outside {home}")
    for s in a.show:
        print(f"functions taking {s}:")
        for f in takers.get(s, []):
            print(f"  {f}")
    long_functions(ROUND_PATH if a.long is None else a.long, a.max_lines)


def long_functions(files, max_lines, quiet=False):
    """lists the functions of files over max_lines lines; returns 1 if there is one.  quiet: one line if none"""
    where = " ".join(files) if len(files) <= 12 else f"{len(files)} files"
    found = []
    for path in files:
        for name, _, first, last in definitions(path):
            if last - first + 1 > max_lines:
                found.append(f"  {last - first + 1:4d}  {path}:{first} {name}")
    if quiet:
        print(f"long functions: {len(found)} over {max_lines} lines in the {len(files)} files of the round path"
              + "".join("\n" + f for f in found))
    else:
        print(f"functions over {max_lines} lines in {where}:")
        print("\n".join(found) if found else "  none")
    return 1 if found else 0


# the modules of the public headers whose names are not a folder of src/ (tests/layering.sh's HEADER)
PUBLIC_HEADER_MODULE = {"transport": "fl", "abi": "privacy", "ddp": "mech", "ddp_encode": "mech"}


def module_of(path):
    """src/MODULE/x.c -> MODULE; include/dpfl/NAME.h -> its module (one public header per module); else None"""
    parts = path.split("/")
    if len(parts) > 2 and parts[0] == "src":
        return parts[1]
    if len(parts) == 3 and parts[:2] == ["include", "dpfl"] and parts[2].endswith(".h"):
        name = parts[2][:-2]
        return PUBLIC_HEADER_MODULE.get(name, name if os.path.isdir(os.path.join("src", name)) else None)
    return None


def check(takers, homes, declared, aliases, limit):
    """the rule of --check: returns the exit status.  An alias is counted with the type it names."""
    def base(name):
        seen = set()
        while name in aliases and name not in seen:
            seen.add(name)
            name = aliases[name]
        return name
    merged = {}
    for s, fns in takers.items():
        merged.setdefault(base(s), []).extend(f for f in fns if f not in merged.get(base(s), []))
    takers = merged
    worst, bad = [], 0
    for s, fns in sorted(takers.items()):
        bodies = homes.get(s, [])
        # a body in a .c file is a type of that file alone, unless a header declares the name (an opaque handle)
        local = {b for b in bodies if b.endswith(".c") and s not in declared}
        fns = [f for f in fns if f.split(":")[0] not in local]
        if not fns:
            continue
        mods = [module_of(f.split(":")[0]) for f in fns]
        shared = [module_of(b) for b in bodies if b not in local]
        home = shared[0] if shared and shared[0] else max(set(mods), key=lambda m: (mods.count(m), m))
        outside = [f for f, m in zip(fns, mods) if m != home]
        if s in VALUE_TYPES:
            continue
        worst.append((len(outside), s, home))
        if len(outside) > limit:
            bad += 1
            print(f"fan-out: {s} (module {home}) is taken whole by {len(outside)} functions outside {home}/ "
                  f"(at most {limit}): " + ", ".join(outside))
        if len(fns) > 2 * limit:
            bad += 1
            print(f"fan-out: {s} (module {home}) is taken whole by {len(fns)} functions (at most {2 * limit}): "
                  + ", ".join(fns))
    worst.sort(reverse=True)
    top = ", ".join(f"{s} {n} outside {h}/" for n, s, h in worst[:3])
    if bad:
        return 1
    most = max((len(f), s) for s, f in takers.items() if s not in VALUE_TYPES)
    print(f"fan-out: no struct is taken whole by more than {limit} functions outside its module, nor by more than "
          f"{2 * limit} in all ({len(VALUE_TYPES)} value types apart; the most outside: {top}; in all: {most[1]} "
          f"{most[0]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
