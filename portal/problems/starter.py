"""A problem's starter `<slug>.py` and the catalog helper modules its reference imports.

The starter is the reference's `solution` made self-contained: a bundle cannot count on the
catalog (`problems.*`) being importable where it runs, so the functions the reference uses
from its own module and from helper modules (`problems/expert/_routing_a.py` and the like)
are copied in, each once, in the order the catalog defines them. It passes at 1.0x, and a
team replaces it piece by piece. Built from source text with `ast` at sync time, so the web
process never imports the catalog (or torch).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

# The harness's own modules: shared by every problem, never part of a solution.
FRAMEWORK = ("problems", "problems.spec", "problems.registry")
SourceOf = Callable[[str], str]


def module_source(name: str) -> str:
    return inspect.getsource(importlib.import_module(name))


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


@dataclass
class _Module:
    """One catalog module's top-level definitions and what its names stand for."""

    name: str
    source: str
    tree: ast.Module
    definitions: dict[str, ast.stmt] = field(default_factory=dict)
    imported: dict[str, tuple[str, str]] = field(default_factory=dict)  # alias -> (module, name)
    modules: dict[str, str] = field(default_factory=dict)  # alias -> catalog module
    external: list[ast.stmt] = field(default_factory=list)  # imports of torch, math, ...


def _catalog_name(name: str | None) -> bool:
    return bool(name) and (name == "problems" or str(name).startswith("problems."))


def _read(name: str, source_of: SourceOf) -> _Module:
    source = source_of(name)
    module = _Module(name, source, ast.parse(source))
    for node in module.tree.body:
        if isinstance(node, ast.ImportFrom) and _catalog_name(node.module):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if _is_module(full):
                    module.modules[alias.asname or alias.name] = full
                else:
                    module.imported[alias.asname or alias.name] = (str(node.module), alias.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            module.external.append(node)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            module.definitions[node.name] = node
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                # `A, B, C = ...` defines three names.
                elements = target.elts if isinstance(target, ast.Tuple) else [target]
                for element in elements:
                    if isinstance(element, ast.Name):
                        module.definitions[element.id] = node
    return module


def _references(node: ast.stmt) -> Iterator[tuple[str, str | None]]:
    """(name, attribute) pairs a definition uses: `x` as (x, None), `ring.step` as
    (ring, step)."""
    for child in ast.walk(node):
        if isinstance(child, ast.Attribute) and isinstance(child.value, ast.Name):
            yield child.value.id, child.attr
        elif isinstance(child, ast.Name):
            yield child.id, None


class _Catalog:
    def __init__(self, source_of: SourceOf) -> None:
        self.source_of = source_of
        self.modules: dict[str, _Module] = {}

    def module(self, name: str) -> _Module:
        if name not in self.modules:
            self.modules[name] = _read(name, self.source_of)
        return self.modules[name]

    def resolve(self, module: _Module, name: str, attr: str | None) -> tuple[str, str] | None:
        """The catalog definition (module, name) that `name` (or `name.attr`) stands for."""
        if name in module.definitions:
            return module.name, name
        if name in module.imported:
            owner, original = module.imported[name]
            if owner in FRAMEWORK:
                return None
            return self.resolve(self.module(owner), original, None)
        if name in module.modules and attr is not None:
            return self.resolve(self.module(module.modules[name]), attr, None)
        return None


def _needed(catalog: _Catalog, root: str) -> list[tuple[str, str]]:
    """Every catalog definition `solution` reaches, itself included."""
    seen: list[tuple[str, str]] = []
    todo = [(root, "solution")]
    while todo:
        key = todo.pop()
        if key in seen:
            continue
        seen.append(key)
        module = catalog.module(key[0])
        for name, attr in _references(module.definitions[key[1]]):
            found = catalog.resolve(module, name, attr)
            if found is not None and found not in seen:
                todo.append(found)
    return seen


def _segment(module: _Module, node: ast.stmt) -> str:
    """The definition's source with its decorators and the comment lines right above it."""
    lines = module.source.splitlines()
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
    while start > 0 and lines[start - 1].lstrip().startswith("#"):
        start -= 1
    return "\n".join(lines[start : node.end_lineno])


def _unqualified(text: str, module: _Module) -> str:
    """`ring.step(...)` becomes `step(...)`: the helper module's functions are copied in."""
    for alias in module.modules:
        text = re.sub(rf"\b{re.escape(alias)}\.", "", text)
    return text


def helper_modules(root: str, source_of: SourceOf = module_source) -> list[str]:
    """The catalog modules (not the harness's) that `root` imports, directly or through
    another helper, in the order they are first imported."""
    catalog, found, todo = _Catalog(source_of), [], [root]
    while todo:
        module = catalog.module(todo.pop(0))
        imported = [owner for owner, _ in module.imported.values()] + list(module.modules.values())
        for name in imported:
            if name not in FRAMEWORK and name not in found and name != root:
                found.append(name)
                todo.append(name)
    return found


def module_path(name: str) -> str:
    """`problems.expert._routing_a` -> `problems/expert/_routing_a.py`."""
    return name.replace(".", "/") + ".py"


def starter_source(
    *, root: str, slug: str, title: str, signature: str, source_of: SourceOf = module_source
) -> str:
    """The starter `<slug>.py`: the reference's `solution` and everything it uses."""
    catalog = _Catalog(source_of)
    needed = _needed(catalog, root)
    order = [root, *helper_modules(root, source_of)]
    imports: list[str] = []
    body: list[str] = []
    # Helpers first (deepest last imported, defined first), then the problem's module.
    for name in reversed(order):
        module = catalog.module(name)
        chosen = [n for n in module.definitions if (name, n) in needed]
        if not chosen:
            continue
        for node in module.external:
            line = ast.get_source_segment(module.source, node) or ""
            if line and line not in imports and "__future__" not in line:
                imports.append(line)
        seen_nodes: list[ast.stmt] = []
        for definition in chosen:
            node = module.definitions[definition]
            if node not in seen_nodes:
                seen_nodes.append(node)
                body.append(_unqualified(_segment(module, node), module))
        for alias, (owner, original) in module.imported.items():
            target = catalog.resolve(module, alias, None)
            if alias != original and target in needed and owner not in FRAMEWORK:
                body.append(f"{alias} = {original}")
    header = (
        f'"""Starter for {slug}: {title}.\n\n'
        f"Your bundle's {slug}.py defines {signature}.\n"
        "This is the PyTorch + NCCL reference made self-contained (the catalog's helpers it\n"
        "uses are copied in), so it passes at 1.0x as it is. Check it locally, in a folder of\n"
        "its own (a bundle is a folder, a .zip or a .tar.gz of solutions):\n\n"
        f"    mkdir bundle && cp {slug}.py bundle/\n"
        "    python -m evaluator check bundle --world-size 4\n"
        '"""\n'
    )
    head = "\n".join([header, "from __future__ import annotations\n", *imports])
    return head + "\n\n\n" + "\n\n\n".join(body) + "\n"
