"""The import graph of the product packages keeps its layers: runtime imports no other scd
package; journal and blobstore import only runtime (and, for journal, nothing of blobstore);
publisher and subscriber never import each other; only scd imports both; and no module takes
part in an import cycle (type-checking-only imports included: they are imports a reader follows
too)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("runtime", "journal", "blobstore", "publisher", "subscriber", "scd")
# What each top-level package may import besides itself.
ALLOWED = {
    "runtime": set(),
    "journal": {"runtime"},
    "blobstore": {"runtime"},
    "publisher": {"runtime", "journal", "blobstore"},
    "subscriber": {"runtime", "journal", "blobstore"},
    "scd": {"runtime", "journal", "blobstore", "publisher", "subscriber"},
}


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            name = ".".join(path.relative_to(REPO).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def imports(path: Path, name: str, known: dict[str, Path]) -> set[str]:
    """The scd modules ``name`` imports (the deepest known module each import names)."""
    targets: set[str] = set()
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".")[: None if is_package else -1]
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            names = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in names:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                targets.add(target)
                break
    return targets


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(path, name, known) for name, path in known.items()}


def test_each_package_imports_only_the_layers_below() -> None:
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in graph().items()
        for target in targets
        if (top := target.split(".")[0]) != module.split(".")[0]
        and top not in ALLOWED[module.split(".")[0]]
    )
    assert not upward, "imports against the layering:\n" + "\n".join(upward)


def in_cycles(edges: dict[str, set[str]]) -> set[str]:
    """The modules left once every module that imports none of the remaining ones is peeled
    off, repeatedly: empty exactly when the graph has no cycle."""
    remaining = {name: set(targets) for name, targets in edges.items()}
    while True:
        leaves = {name for name, targets in remaining.items() if not targets & remaining.keys()}
        if not leaves:
            return set(remaining)
        for name in leaves:
            del remaining[name]


def test_no_import_cycles() -> None:
    stuck = in_cycles(graph())
    assert not stuck, f"modules on or behind an import cycle: {sorted(stuck)}"
