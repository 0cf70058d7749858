#!/usr/bin/env python3
"""The module graph's rules, checked from `swift package dump-package` (run by `make test`):

1. Edges run down the layers, never up:

       C wrappers → base → engines → runtime → plugins → catalog → CLI

   - C wrappers: the system library targets (`CSQLite`, `CUV`, …), one per Debian C library;
   - base: `Locking` and `GatewayCore` (the model, the plugin protocols, configuration);
   - engines: every other module of Sources/ not named below (`NMEA`, `Geodesy`, `SystemIO`,
     `EnvironmentChecks`, `SQLiteStorage`, `SQLiteState`, `DeliveryEngine`, `MQTTClient`,
     `NATSClient`, `NATSState`, `HTTPServing`, `DeviceIntake`, `DeviceCommands`, `StreamSessions`,
     `TrackerProtocols`…); engines may use each other;
   - runtime: `GatewayRuntime`;
   - plugins: the targets in Plugins/ (`CommandRules`, `Motion` and every source, transform and
     sink; a plugin never depends on another plugin), and beside them the test support libraries
     (`GatewayTesting`, `MQTTTesting`, `NATSTesting`), which plugins never use;
   - catalog: `PluginCatalog`, the one module that names every plugin;
   - CLI: the service and the command line (`OperatorEndpoints`, `MapRendering`'s users
     `TrackMap`, `GatewayProcess`, `LocgateCLI`, the `locgate` executable).
   A target depends only on targets of its own layer or below (tests: on anything).
2. Every declared dependency of a Swift target is imported by at least one of its files
   (`import X`, `@testable import X`, `@_exported import X`, `package import X`).
3. Every module of this package that a target's files import is a declared dependency of
   that target: SwiftPM lets a file import a module its target reaches only through another
   one, which then builds by accident and breaks when that other dependency goes.

Usage: module_graph.py [DUMP.json]   (without an argument it runs `swift package dump-package`)
Exits 1 and prints every violation.
"""
import json, os, re, subprocess, sys

# Edges from Sources/ to Plugins/ that exist today and are to be removed, not added to.
KNOWN: set[tuple[str, str]] = set()   # none left: `locgate map` takes its plugins from the registry (issue 32)

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if len(sys.argv) > 1:
    dump = json.load(open(sys.argv[1]))
else:
    dump = json.loads(subprocess.run(["swift", "package", "dump-package"], cwd=root, check=True,
                                     capture_output=True, text=True).stdout)

def path_of(t):
    if t.get("path"):
        return t["path"]
    return {"test": "Tests", "executable": "Sources", "regular": "Sources", "system": "Sources"}.get(t["type"], "Sources") + "/" + t["name"]

targets = {t["name"]: t for t in dump["targets"]}
def deps(t):
    out = []
    for d in t.get("dependencies", []):
        for kind in ("byName", "target", "product"):
            if kind in d:
                out.append(d[kind][0])
    return out

problems = []
plugins = {n for n, t in targets.items() if path_of(t).startswith("Plugins/")}
allowed_users_of_plugins = {"PluginCatalog"}
for name, t in targets.items():
    p = path_of(t)
    if not p.startswith("Sources/") or name in allowed_users_of_plugins:
        continue
    for d in deps(t):
        if d in plugins and (name, d) not in KNOWN:
            problems.append(f"{name} ({p}) depends on the plugin {d}: Sources must not depend on Plugins")

# Rule 1: the layers, lowest first.
LAYERS = ["C wrappers", "base", "engines", "runtime", "plugins", "catalog", "CLI"]
NAMED = {
    "base": {"Locking", "GatewayCore"},
    "runtime": {"GatewayRuntime"},
    "plugins": {"GatewayTesting", "MQTTTesting", "NATSTesting"},
    "catalog": {"PluginCatalog"},
    "CLI": {"OperatorEndpoints", "TrackMap", "GatewayProcess", "LocgateCLI", "locgate"},
}
def layer(name):
    t = targets[name]
    if t["type"] == "test":
        return None
    if t["type"] == "system":
        return "C wrappers"
    for l, names in NAMED.items():
        if name in names:
            return l
    p = path_of(t)
    if p.startswith("Plugins/"):
        return "plugins"
    if p.startswith("Sources/"):
        return "engines"
    return None   # benchmarks and fuzz targets (only in their own builds)

for name, t in targets.items():
    mine = layer(name)
    if mine is None:
        continue
    for d in deps(t):
        theirs = layer(d) if d in targets else None
        if theirs is None:
            continue
        if LAYERS.index(theirs) > LAYERS.index(mine):
            problems.append(f"{name} ({mine}) depends on {d} ({theirs}): edges run down the layers ({' → '.join(LAYERS)})")
        elif mine == "plugins" and name in plugins and d in plugins:
            problems.append(f"the plugin {name} depends on the plugin {d}: plugins share code through an engine module")

import_re = re.compile(r"^\s*(?:@testable\s+|@_exported\s+|package\s+|public\s+|internal\s+)*import\s+(?:struct\s+|class\s+|enum\s+|func\s+)?([A-Za-z_][A-Za-z0-9_]*)", re.M)
for name, t in targets.items():
    if t["type"] in ("system", "binary", "plugin", "macro"):
        continue
    p = os.path.join(root, path_of(t))
    excluded = {os.path.normpath(os.path.join(p, e)) for e in t.get("exclude", [])}
    imported = set()
    for dirpath, dirnames, filenames in os.walk(p):
        if any(dirpath == e or dirpath.startswith(e + os.sep) for e in excluded):
            continue
        for f in filenames:
            if f.endswith(".swift"):
                imported.update(import_re.findall(open(os.path.join(dirpath, f), encoding="utf-8", errors="replace").read()))
    for d in deps(t):
        if d not in imported:
            problems.append(f"{name} declares a dependency on {d} and never imports it")
    # Rule 3: a module of this package imported without being declared.
    for m in sorted(imported):
        if m in targets and m != name and m not in deps(t):
            problems.append(f"{name} imports {m} without declaring it as a dependency (Package.swift)")

for (a, b) in sorted(KNOWN):
    if a in targets and b not in deps(targets[a]):
        problems.append(f"the known edge {a} → {b} is gone: remove it from KNOWN in {os.path.relpath(__file__, root)}")

# The README's Layout names every folder of Sources and Plugins (as `Name`), so a new module is
# never left out of the map a newcomer reads first.
readme = open(os.path.join(root, "README.md"), encoding="utf-8").read()
layout = readme.split("## Layout", 1)[-1].split("\n## ", 1)[0]
for top in ("Sources", "Plugins"):
    for folder in sorted(os.listdir(os.path.join(root, top))):
        if os.path.isdir(os.path.join(root, top, folder)) and f"`{folder}`" not in layout:
            problems.append(f"README.md's Layout does not name {top}/{folder} (write it as `{folder}`)")

# No module declares a type of its own name (Docs/Plugins.md, the style guide): with one, Swift
# reads `Name.X` as a member of the type and the module's own `X` cannot be named.
type_re = re.compile(r"^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:public\s+|package\s+|internal\s+|fileprivate\s+|private\s+|final\s+|open\s+|indirect\s+)*(?:class|struct|enum|protocol|actor|typealias)\s+([A-Za-z_][A-Za-z0-9_]*)", re.M)
for name, t in targets.items():
    p = path_of(t)
    if t["type"] in ("system", "binary", "plugin", "macro") or not p.startswith(("Sources/", "Plugins/", "Tests/")):
        continue
    for dirpath, _, files in os.walk(os.path.join(root, p)):
        for f in files:
            if f.endswith(".swift"):
                path = os.path.join(dirpath, f)
                if name in type_re.findall(open(path, encoding="utf-8", errors="replace").read()):
                    problems.append(f"{os.path.relpath(path, root)}: the module {name} declares a type {name}; rename one of them")

# Shared state is guarded by Locking.Locked: Synchronization.Mutex hands a contended lock over
# with futex calls inside the uninstrumented standard library, so `make tsan` would report every
# access it guards as a race (Sources/Locking/Locked.swift).
mutex_re = re.compile(r"\bMutex\s*[<(]")
for top in ("Sources", "Plugins", "Tests"):
    for dirpath, _, files in os.walk(os.path.join(root, top)):
        for f in files:
            if f.endswith(".swift"):
                path = os.path.join(dirpath, f)
                for n, line in enumerate(open(path, encoding="utf-8"), 1):
                    if mutex_re.search(line) and not line.lstrip().startswith("//") and not line.lstrip().startswith("///"):
                        problems.append(f"{os.path.relpath(path, root)}:{n}: Synchronization.Mutex; use Locking.Locked (TSan cannot see Mutex)")

if problems:
    print("module graph:", len(problems), "problem(s)")
    for line in problems:
        print("  " + line)
    sys.exit(1)
print(f"module graph: {len(targets)} targets, edges down the layers ({' → '.join(LAYERS)}), every dependency imported and every import declared")
