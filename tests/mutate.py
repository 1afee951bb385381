#!/usr/bin/env python3
"""Mutation check (`make mutate`; not run by CI).  For every line of tests/mutations.txt ("name | path | old | new"):
apply the one-line change to a scratch copy of the working tree, rebuild, and run the tests of `make test` until one
fails.  A mutation is killed when a test fails; it survives when every C test binary and every shell test of
`make test` passes with it.

  tests/mutate.py [--slots N] [--hints LOG] [NAME...]
      NAME...      only the named mutations
      --slots N    N scratch trees at once (default 1)
      --hints LOG  a previous run's output: the test that killed a mutation there is tried first

Order, so that a killed mutation costs one or two tests and not the whole suite: the C test binaries that call a
function defined in the mutated file run first, fastest first, then the other binaries, then the shell tests of
`make test`.  The first failure stops the mutation.  Before any mutation, every C test binary must pass on the
unmutated tree (else the check stops: a test that already fails would "kill" everything); a shell test that kills
a mutation is run again on the restored tree, and the kill counts only if it passes there.  Each test runs in its
own mount namespace with an empty /tmp when the machine allows it (root), so that scratch trees -- and other test
runs on the machine -- do not share the tests' /tmp paths.  Prints one line per mutation and the score; exits 1
unless every mutation was killed."""
import glob, os, re, shutil, subprocess, sys, tempfile, threading, time

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.chdir(root)
args = sys.argv[1:]
nslots, hints = 1, {}
while args[:1] in (["--slots"], ["--hints"]):
    if args[0] == "--slots":
        nslots = int(args[1])
    else:  # "KILLED   NAME (TEST: ...; N s)" -> TEST
        for l in open(args[1]):
            m = re.match(r"KILLED +(\S+) \((test_\w+|tests/\w+\.sh)", l)
            if m:
                hints[m.group(1)] = m.group(2)
    args = args[2:]
only = set(args)
MAKE = ["make", "-s", "--no-print-directory"]
data = os.environ.get("DPFL_DATA", os.path.join(root, "data"))

def isolation_works():
    return subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", "mount -t tmpfs none /tmp"],
                          capture_output=True).returncode == 0
ISO = isolation_works()
if not ISO and nslots > 1:
    sys.exit("mutate: several scratch trees need a private /tmp per test (unshare -m, as root); run with one")

def sh_in(tree, cmd, timeout):
    """run cmd in tree (its own /tmp when possible); its exit status (124: timed out)"""
    cmd = f"cd {tree} && DPFL_DATA={data} BUILD=build MAKE=make exec timeout {int(timeout)} {cmd} >{tree}.log 2>&1"
    if ISO:
        return subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                               "mount -t tmpfs none /tmp && " + cmd]).returncode
    return subprocess.run(["sh", "-c", cmd]).returncode

def make(tree, targets):
    r = subprocess.run(MAKE + ["-j2"] + targets, cwd=tree, capture_output=True, text=True)
    return r.returncode, (r.stderr.strip().splitlines() or [""])[-1][-200:]

def failed_names(tree):
    try:
        log = open(tree + ".log", errors="replace").read()
    except OSError:
        return ""
    names = sorted(set(re.findall(r"^\[  FAILED  \] ([A-Za-z_0-9]+)$", log, re.M)))[:3]
    return " ".join(names)

# the mutations
lines = []
for line in open("tests/mutations.txt"):
    line = line.rstrip("\n")
    if not line.strip() or line.lstrip().startswith("#"):
        continue
    if not only or line.split(" | ")[0].strip() in only:
        lines.append(line)
if only and len(lines) != len(only):
    sys.exit("mutate: not in tests/mutations.txt: " + " ".join(sorted(only - {l.split(" | ")[0].strip() for l in lines})))

# the scratch trees: the working tree (tracked and untracked, not ignored), built from nothing (a copied build
# folder can hold an object a stale dependency never rebuilt)
files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], capture_output=True).stdout.split(b"\0")
files = [f.decode() for f in files if f and os.path.isfile(f)]
scratch = tempfile.mkdtemp(prefix="dpfl-mutate.", dir="/var/tmp")
tests = sorted(os.path.basename(p)[:-2] for p in glob.glob("tests/test_*.c"))
# tests/mutations.sh checks that each mutation's old text is in the tree: every mutant fails it, so it kills nothing
shtests = [t for t in subprocess.run(MAKE + ["print-shtests"], capture_output=True, text=True).stdout.split()
           if t != "tests/mutations.sh"]
tsrc = {t: open(f"tests/{t}.c").read() for t in tests}

def make_tree(k):
    d = os.path.join(scratch, f"t{k}")
    for f in files:
        os.makedirs(os.path.join(d, os.path.dirname(f)), exist_ok=True)
        shutil.copy2(f, os.path.join(d, f))
    rc, msg = make(d, ["build/dpfl"] + [f"build/tests/{t}" for t in tests])
    if rc:
        sys.exit(f"mutate: the unmutated tree does not build: {msg}")
    return d

try:
    t0 = time.time()
    trees = [make_tree(k) for k in range(nslots)]
    # baseline: every C test binary passes unmutated; its time orders the runs
    base_t, bad = {}, []
    for t in tests:
        s = time.time()
        if sh_in(trees[0], f"build/tests/{t}", 900):
            bad.append(t)
        base_t[t] = time.time() - s
    if bad:
        sys.exit("mutate: these tests fail on the unmutated tree (fix them first): " + " ".join(bad))
    print(f"{len(lines)} mutations; {nslots} tree(s) built and {len(tests)} test binaries passed unmutated in "
          f"{time.time() - t0:.0f} s; {'a private /tmp per test' if ISO else 'tests share /tmp'}", flush=True)
    order = sorted(tests, key=lambda t: base_t[t])
    verified = set()  # shell tests that passed on a restored tree
    lock = threading.Lock()

    def test_order(path):
        """the binaries that call a function defined in the mutated file first, then the rest"""
        try:
            src = open(path).read()
        except OSError:
            return order
        defined = set(re.findall(r"^[A-Za-z_][\w \*]*?\b([a-z]+_\w+)\s*\([^;]*$", src, re.M))
        stem = os.path.splitext(os.path.basename(path))[0]
        hit = [t for t in order if stem in t or any(re.search(r"\b%s\b" % n, tsrc[t]) for n in defined)]
        return hit + [t for t in order if t not in hit]

    def one(tree, line):
        name, path, old, new = [x.strip() for x in line.split(" | ", 3)]
        old, new = old.replace("\\n", "\n"), new.replace("\\n", "\n")
        p = os.path.join(tree, path)
        s = open(p).read()
        if s.count(old) != 1:
            return "ERROR", f"the text occurs {s.count(old)} times in {path} (must be once): fix tests/mutations.txt"
        try:
            open(p, "w").write(s.replace(old, new))
            rc, msg = make(tree, ["build/dpfl"])
            if rc:
                return "ERROR", "the mutant does not build: " + msg
            # a shell test named in the mutated file's path (tests/mpi.sh for src/cli/mpi_train.c) goes first
            first = [t for t in shtests if os.path.basename(t)[:-3] in path]
            if first:
                rc, msg = make(tree, ["test-targets"])
                if rc:
                    return "ERROR", "the mutant does not build: " + msg
                for t in first:
                    if sh_in(tree, t, 1800):
                        return shell_killed(tree, p, s, t)
            order_here = test_order(path)
            hint = hints.get(name)
            if hint in order_here:
                order_here = [hint] + [t for t in order_here if t != hint]
            elif hint in shtests and hint not in first:
                first.append(hint)
                rc, msg = make(tree, ["test-targets"])
                if rc:
                    return "ERROR", "the mutant does not build: " + msg
                if sh_in(tree, hint, 1800):
                    return shell_killed(tree, p, s, hint)
            for t in order_here:
                rc, msg = make(tree, [f"build/tests/{t}"])
                if rc:
                    return "ERROR", "the mutant does not build: " + msg
                if sh_in(tree, f"build/tests/{t}", max(120, 10 * base_t[t])):
                    return "KILLED", f"{t}: {failed_names(tree)}".rstrip(": ")
            # every C test passed: the shell tests of `make test` (the CLI, the Python binding and its brute-force
            # reference suite, MPI)
            rc, msg = make(tree, ["test-targets"])
            if rc:
                return "ERROR", "the mutant does not build: " + msg
            for t in shtests:
                if t not in first and sh_in(tree, t, 1800):
                    return shell_killed(tree, p, s, t)
            return "SURVIVED", ""
        finally:
            open(p, "w").write(s)
            os.utime(p, None)

    def shell_killed(tree, p, s, t):
        """shell test t failed on the mutant: it counts if t passes on the restored tree (checked once per test)"""
        open(p, "w").write(s)
        os.utime(p, None)
        with lock:
            known = t in verified
        if not known:
            rc, _ = make(tree, ["test-targets"])
            if rc or sh_in(tree, t, 1800):
                return "ERROR", f"{t} fails on the unmutated tree too"
            with lock:
                verified.add(t)
        return "KILLED", t

    queue = list(range(len(lines)))
    results = {}

    def worker(k):
        while True:
            with lock:
                if not queue:
                    return
                i = queue.pop(0)
            s = time.time()
            v = one(trees[k], lines[i])
            with lock:
                results[i] = v
                print(f"{v[0]:<9}{lines[i].split(' | ')[0]} ({v[1]}{'; ' if v[1] else ''}{time.time() - s:.0f} s)",
                      flush=True)
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(nslots)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    killed = sum(1 for v in results.values() if v[0] == "KILLED")
    rest = [lines[i].split(" | ")[0] for i in sorted(results) if results[i][0] != "KILLED"]
    print(f"mutation score: {killed} / {len(lines)} killed in {time.time() - t0:.0f} s" +
          (f" (not killed: {' '.join(rest)})" if rest else ""))
    sys.exit(0 if killed == len(lines) else 1)
finally:
    shutil.rmtree(scratch, ignore_errors=True)
