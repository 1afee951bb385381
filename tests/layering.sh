#!/bin/sh
# The layering of docs/architecture.md, checked: every #include "..." in src/MODULE/ names a public header of a
# module at or below MODULE (include/dpfl/NAME.h) or an internal header of a module it may see internals of.  An
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
BELOW["fl"] = BELOW["config"] | {"config"}
BELOW["accounting"] = BELOW["fl"] | {"fl"}
BELOW["run"] = BELOW["accounting"] | {"accounting"}
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
          "transport": "fl", "config": "config", "audit": "audit", "report": "report", "net": "net"}
bad = 0
for f in sorted(glob.glob("src/*/*.[ch]")):
    mod = f.split("/")[1]
    if mod not in BELOW:
        print(f"layering: {f}: module '{mod}' is not in tests/layering.sh's table"); bad += 1; continue
    for n, line in enumerate(open(f), 1):
        m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
        if not m: continue
        inc = m.group(1)
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
sys.exit(1 if bad else print("layering: every include points down") or 0)
PY
