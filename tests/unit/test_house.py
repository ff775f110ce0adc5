"""The shape of the house (README.md, "The floors"), checked from the code's own imports (ast), so it stays:

- the ground floor (ccrig/*.py) imports nothing of ours but itself;
- nothing below the top floor imports ccrig.experiments;
- the packages import each other without a cycle, and so do the modules;
- an import of ours inside a function is there for start-up speed and says so (`# lazy` on its line or the
  line above), never to dodge a cycle;
- every package folder is installed (pyproject.toml lists it), under the one import name `ccrig`.
"""
from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"ccrig": "ccrig", "experiments": "ccrig.experiments", "topologies": "ccrig.topologies",
           "qdiscs": "ccrig.qdiscs", "tcp_modules": "ccrig.tcp_modules", "analysis": "ccrig.analysis"}


def modules() -> dict[str, Path]:
    """Import name -> file, for every module of ours."""
    out = {}
    for folder, name in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if folder == "ccrig" and len(parts) > 1:
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join((name, *parts))] = path
    return out


def imports(name: str, path: Path) -> list[tuple[str, int, bool, str]]:
    """(imported module of ours, line, inside a function, source line) for every import in the file."""
    tree = ast.parse(path.read_text())
    lines = path.read_text().splitlines()
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            targets = []
            if isinstance(child, ast.Import):
                targets = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[:len(base) - child.level + 1]
                    mod = ".".join(base + ([child.module] if child.module else []))
                else:
                    mod = child.module or ""
                targets = [mod] + [f"{mod}.{a.name}" for a in child.names]
            if targets:
                src = lines[child.lineno - 1] + " " + (lines[child.lineno - 2] if child.lineno > 1 else "")
                out.extend((t, child.lineno, in_function, src) for t in targets if t == "ccrig" or t.startswith("ccrig."))
            visit(child, inner)
    visit(tree, False)
    return out


def resolved() -> dict[str, list[tuple[str, int, bool, str]]]:
    """Each module's imports of ours, each resolved to the module it names (`from pkg import name` names the
    submodule pkg.name when there is one, else pkg)."""
    mods = modules()
    out = {}
    for name, path in mods.items():
        seen = {}
        for target, line, fn, src in imports(name, path):
            while target not in mods and "." in target:
                target = target.rsplit(".", 1)[0]
            if target in mods and target != name and target != "ccrig":
                seen[(target, line)] = (target, line, fn, src)
        out[name] = list(seen.values())
    return out


def floor(module: str) -> str:
    """The package a module belongs to: ccrig (the ground floor) or ccrig.<folder>."""
    parts = module.split(".")
    return "ccrig" if len(parts) == 2 and f"ccrig.{parts[1]}" not in FOLDERS.values() else ".".join(parts[:2])


def test_the_ground_floor_imports_nothing_of_ours():
    bad = [f"{m} imports {t} (line {line})" for m, lst in resolved().items() if floor(m) == "ccrig"
           for t, line, _, _ in lst if floor(t) != "ccrig"]
    assert not bad, bad


def test_nothing_below_the_top_floor_imports_experiments():
    bad = [f"{m} imports {t} (line {line})" for m, lst in resolved().items() if floor(m) != "ccrig.experiments"
           for t, line, _, _ in lst if floor(t) == "ccrig.experiments"]
    assert not bad, bad


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = dfs(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = dfs(n)
            if found:
                return found
    return None


def test_no_cycle_between_packages():
    graph: dict[str, set[str]] = {}
    for m, lst in resolved().items():
        for t, _, _, _ in lst:
            if floor(t) != floor(m):
                graph.setdefault(floor(m), set()).add(floor(t))
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_no_cycle_between_modules():
    # a package's __init__ that re-exports its own modules is the package, not a room of its own: its
    # imports of its own submodules are not arrows back
    graph: dict[str, set[str]] = {}
    for m, lst in resolved().items():
        for t, _, _, _ in lst:
            if not t.startswith(m + "."):
                graph.setdefault(m, set()).add(t)
    found = _cycle(graph)
    assert found is None, " -> ".join(found)


def test_imports_inside_functions_say_why():
    bad = [f"{m}:{line}: {src.strip()[:80]}" for m, lst in resolved().items()
           for t, line, fn, src in lst if fn and "lazy" not in src]
    assert not bad, "imports of ours inside functions without a `# lazy` reason:\n" + "\n".join(bad)


def test_every_package_is_installed_under_one_name():
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(conf["packages"])
    folders = {name for name, path in modules().items() if path.name == "__init__.py"}
    assert folders == listed, (sorted(folders - listed), sorted(listed - folders))
    assert all(p == "ccrig" or p.startswith("ccrig.") for p in listed)
    assert conf["package-dir"]["ccrig"] == "ccrig"
    assert {k: v for k, v in conf["package-dir"].items() if k != "ccrig"} == \
        {v: k for k, v in FOLDERS.items() if k != "ccrig"}


# --- readable in an afternoon ---------------------------------------------------------------------------------

MAX_MODULE, MODULES_OVER, MAX_FUNCTION = 400, 2, 80


def test_modules_stay_short():
    over = sorted((len(p.read_text().splitlines()), name) for name, p in modules().items()
                  if len(p.read_text().splitlines()) > MAX_MODULE)
    assert len(over) <= MODULES_OVER, f"more than {MODULES_OVER} modules over {MAX_MODULE} lines: {over}"


def test_functions_stay_short():
    long = []
    for name, p in modules().items():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION:
                    long.append(f"{name}.{node.name} ({n} lines)")
    assert not long, f"functions over {MAX_FUNCTION} lines: {long}"


def _tracked_text() -> dict[Path, str]:
    import subprocess
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    out = {}
    for f in files:
        if f.endswith((".py", ".c", ".h", ".md", ".yaml", ".yml", ".toml")) or f == "Makefile":
            if "/runs/" in f or f == "tests/unit/test_house.py":   # a run's record keeps what it said then;
                continue                                            # this file names what it looks for
            out[ROOT / f] = (ROOT / f).read_text(errors="replace")
    return out


def test_no_reference_to_documents_the_repository_does_not_hold():
    import re
    bad = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p, text in _tracked_text().items()
           for m in re.finditer(r"DESIGN\.md|shared/seeds|\.\./shared/", text)]
    assert not bad, bad


def test_comments_give_reasons_not_issue_numbers():
    import re
    # a comment or docstring that cites the tracker in place of the reason ("issue 14: ...", "")
    rx = re.compile(r"(#[^\n]*|\"\"\"[^\"]*?)\b[Ii]ssues? [1-9][0-9]?\b(?![0-9])")
    bad = [f"{p.relative_to(ROOT)}: {m.group(0)[:60]}" for p, text in _tracked_text().items()
           if p.suffix in (".py", ".c", ".h") for m in rx.finditer(text)]
    assert not bad, bad


def _annotation_names(text: str) -> set[tuple[int, str]]:
    """(line, name) of every name inside an annotation, in a module whose annotations are never evaluated (from
    __future__ import annotations): a type named there for the reader alone, as allocation.py's Judgement."""
    tree = ast.parse(text)
    if not any(isinstance(n, ast.ImportFrom) and n.module == "__future__" and
               any(a.name == "annotations" for a in n.names) for n in tree.body):
        return set()
    notes = [n.annotation for n in ast.walk(tree) if isinstance(n, (ast.arg, ast.AnnAssign)) and n.annotation]
    notes += [n.returns for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.returns]
    return {(x.lineno, x.id) for note in notes for x in ast.walk(note) if isinstance(x, ast.Name)}


def test_no_name_is_used_that_is_not_defined_and_none_imported_for_nothing():
    # a name left behind by a change raises only on the path that reads it (a study's live display read a
    # variable the same change had removed, and no test runs a study with the display on); an import left behind
    # misleads the reader (spec.py imported qdiscs as if for their registry; it never used it), and a loop
    # variable that shadows an import breaks the import's next use in that function. An import kept on purpose
    # for its side effect says so with `# noqa` (mininet's distutils shim)
    from pyflakes import api, messages   # lazy: one test reads it
    from pyflakes.reporter import Reporter
    import io
    found = []

    class Collect(Reporter):
        def flake(self, message):
            line = self.lines[message.lineno - 1] if message.lineno <= len(self.lines) else ""
            if isinstance(message, messages.UndefinedName) and \
                    (message.lineno, message.message_args[0]) not in self.annotations:
                found.append(str(message))
            elif isinstance(message, (messages.UnusedImport, messages.ImportShadowedByLoopVar)) and \
                    "# noqa" not in line:
                found.append(str(message))

    for path in modules().values():
        text, collect = path.read_text(), Collect(io.StringIO(), io.StringIO())
        collect.annotations, collect.lines = _annotation_names(text), text.splitlines()
        api.check(text, str(path.relative_to(ROOT)), collect)
    assert not found, found
