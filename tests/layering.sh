#!/bin/sh
# The layering of docs/architecture.md, checked: every #include "..." or <dpfl/...> in src/MODULE/ names a public
# header of a module at or below MODULE (include/dpfl/NAME.h) or an internal header of a module it may see internals
# of; a public header includes only public headers of its own module's level or below; and over the built objects
# ($BUILD/src/MODULE/*.o, nm), every symbol a module uses from another module is defined in one below it.  An
# include that points up fails with the file, the line and the rule.  Run by `make test`.
cd "$(dirname "$0")/.." || exit 2
exec python3 - <<'PY'
import glob, re, sys
# module -> the modules it may include (public headers); its own internal headers are always allowed
BELOW = {
    "core": set(),
    "data": {"core"}, "nn": {"core"}, "optim": {"core"}, "privacy": {"core"}, "secagg": {"core"},
    "mech": {"core", "nn", "privacy", "secagg"},
}
BELOW["config"] = BELOW["mech"] | {"mech", "data", "optim"}
BELOW["accounting"] = BELOW["config"] | {"config"}
BELOW["fl"] = BELOW["accounting"] | {"accounting"}
BELOW["run"] = BELOW["fl"] | {"fl"}
BELOW["audit"] = BELOW["run"] | {"run"}
BELOW["report"] = BELOW["config"] | {"config"}  # it reads a run's config.ini
BELOW["net"] = BELOW["run"] | {"run"}
BELOW["cli"] = BELOW["audit"] | {"audit", "report", "net"}
# internal headers of another module a module may include (src/OTHER/x.h): only downwards, and only these
INTERNAL = {
    "fl": {"core"}, "accounting": {"core"}, "run": {"core", "fl", "accounting"}, "audit": {"core"},
    "net": {"core", "run"}, "cli": {"core", "run"}, "mech": {"core"}, "privacy": {"core"}, "nn": {"core"},
    "data": {"core"}, "optim": {"core"}, "report": {"core"}, "config": {"core"}, "secagg": {"core"},
}
# of those, the only headers a module may include (its narrow interface): net and cli set up a node, not a run
INTERNAL_ONLY = {("net", "run"): {"run/node.h"}, ("cli", "run"): {"run/node.h"}}
# known exceptions (file -> included path): each one is a debt written down in docs/architecture.md
EXCEPTIONS = {
}
PUBLIC_EXCEPTIONS = set()  # (module, public header) a module may include against the table: none
# public header -> module
HEADER = {"core": "core", "data": "data", "nn": "nn", "optim": "optim", "privacy": "privacy", "abi": "privacy",
          "mech": "mech", "ddp": "mech", "ddp_encode": "mech", "secagg": "secagg", "fl": "fl",
          "transport": "fl", "config": "config", "accounting": "accounting", "run": "run", "audit": "audit",
          "report": "report", "net": "net"}
bad = 0
files = sorted(glob.glob("src/*/*.[ch]")) + sorted(glob.glob("include/dpfl/*.h"))
for f in files:
    if f.startswith("include/"):  # a public header belongs to its module
        name = f.split("/")[-1][:-2]
        if name not in HEADER:
            print(f"layering: {f}: not a known public header (tests/layering.sh's HEADER)"); bad += 1; continue
        mod = HEADER[name]
    else:
        mod = f.split("/")[1]
    if mod not in BELOW:
        print(f"layering: {f}: module '{mod}' is not in tests/layering.sh's table"); bad += 1; continue
    for n, line in enumerate(open(f), 1):
        m = re.match(r'\s*#\s*include\s+(?:"([^"]+)"|<(dpfl/[^>]+)>)', line)  # <dpfl/x.h> too; system headers not
        if not m: continue
        inc = m.group(1) or m.group(2)
        if f.startswith("include/") and not inc.startswith("dpfl/"):
            print(f"layering: {f}:{n}: a public header includes {inc}, which is not public"); bad += 1; continue
        if inc.startswith("dpfl/"):
            name = inc[5:-2]
            if name not in HEADER:
                print(f"layering: {f}:{n}: {inc} is not a known public header"); bad += 1; continue
            dep = HEADER[name]
            if dep != mod and dep not in BELOW[mod] and (mod, inc) not in PUBLIC_EXCEPTIONS:
                print(f"layering: {f}:{n}: {mod} includes {inc} of '{dep}', which is above it or beside it"); bad += 1
        elif "/" in inc:
            dep = inc.split("/")[0]
            if dep != mod and dep not in INTERNAL.get(mod, set()) and (f, inc) not in EXCEPTIONS:
                print(f"layering: {f}:{n}: {mod} includes {inc}, an internal header of '{dep}'"); bad += 1
            elif (mod, dep) in INTERNAL_ONLY and inc not in INTERNAL_ONLY[(mod, dep)]:
                print(f"layering: {f}:{n}: {mod} includes {inc}; of '{dep}' it may include only "
                      f"{', '.join(sorted(INTERNAL_ONLY[(mod, dep)]))}"); bad += 1
        # "x.h" without a folder: a header of the file's own module
# The same table over the built objects: a function or variable one module's code uses that another module defines
# is of a module below it (an include can point down while the definition lives above, as the ledger's did in fl.h).
import os, subprocess
build = os.environ.get("BUILD", "build")
objs = sorted(glob.glob(f"{build}/src/*/*.o"))
if not objs:
    print(f"layering: no objects under {build}/src: build first (make)"); bad += 1
defined, used = {}, []
for o in objs:
    mod = o.split("/")[-2]
    for line in subprocess.run(["nm", o], capture_output=True, text=True, check=True).stdout.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "TDBRWVi":  # defined: text, data, bss, read-only, weak, indirect
            defined[f[2]] = (mod, o)
        elif len(f) == 2 and f[0] in "Uwv":  # used: undefined, or a weak reference
            used.append((mod, o, f[1]))
for mod, o, sym in used:
    if sym in defined and mod in BELOW:
        dep, where = defined[sym]
        if dep != mod and dep not in BELOW[mod]:
            print(f"layering: {o} uses {sym}, defined in {where} of '{dep}', which is above it or beside it"); bad += 1
sys.exit(1 if bad else print(f"layering: every include points down, and so does every use of another module's "
                             f"symbol ({len(objs)} objects)") or 0)
PY
