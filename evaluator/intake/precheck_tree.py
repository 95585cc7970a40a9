"""One bundle module as the precheck reads it: its tree, and what its names stand for.

Names are followed through simple aliasing only: `import torch.distributed as d`,
`from x import y as z`, `n = <a name that resolves>`, `getattr(m, "const")` and
`importlib.import_module("const")` / `__import__("const")`. The reading is
scope-insensitive (a name bound anywhere in the module counts everywhere): it errs towards
a finding, which a person then reads. Every walk is iterative (`ast.walk`): the intake
bounds a statement's nesting at 500 levels, deeper than Python's own recursion allows.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field

_BUILTINS = frozenset(dir(builtins))
_IMPORTERS = ("importlib.import_module", "__import__")
# Calls nested deeper than this inside one name (getattr(getattr(...))) are not followed.
_MAX_RESOLVE_DEPTH = 32
_MUTABLE_CALLS = frozenset(
    {"dict", "list", "set", "collections.defaultdict", "collections.OrderedDict",
     "collections.deque", "collections.Counter"}
)  # fmt: skip


def module_name(path: str) -> str:
    """`_fast.py` -> `_fast`, `pkg/_x.py` -> `pkg._x`, `pkg/__init__.py` -> `pkg`."""
    parts = path.removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@dataclass
class ModuleTree:
    path: str
    tree: ast.Module
    name: str
    bundle_modules: Collection[str]
    aliases: dict[str, str] = field(default_factory=dict)
    imported: list[tuple[str, int]] = field(default_factory=list)  # (module.name, line)
    parents: dict[ast.AST, ast.AST] = field(default_factory=dict)
    bound: set[str] = field(default_factory=set)
    mutable_globals: set[str] = field(default_factory=set)

    @classmethod
    def read(cls, path: str, tree: ast.Module, bundle_modules: Collection[str]) -> ModuleTree:
        module = cls(path, tree, module_name(path), bundle_modules)
        module._index()
        return module

    def nodes(self) -> Iterator[ast.AST]:
        return ast.walk(self.tree)

    def resolve(self, node: ast.AST, depth: int = 0) -> str | None:
        """The dotted name an expression stands for (`d.all_reduce` ->
        `torch.distributed.all_reduce`), or None when it is no module's name."""
        attrs: list[str] = []
        while isinstance(node, ast.Attribute):
            attrs.append(node.attr)
            node = node.value
        base = None
        if isinstance(node, ast.Name):
            base = self.aliases.get(node.id)
            if base is None and node.id in _BUILTINS and node.id not in self.bound:
                base = node.id
        elif isinstance(node, ast.Call) and depth < _MAX_RESOLVE_DEPTH:
            base = self._call_result(node, depth + 1)
        if base is None:
            return None
        name = ".".join([base, *reversed(attrs)])
        return name.removeprefix("builtins.") if name != "builtins" else name

    def is_external(self, name: str) -> bool:
        """Whether a resolved name belongs to a module from outside the bundle."""
        parts = name.split(".")
        return not any(".".join(parts[:i]) in self.bundle_modules for i in range(1, len(parts)))

    def bundle_imports(self) -> set[str]:
        """The bundle's modules this one imports, by their longest matching name."""
        found = set()
        for name, _ in self.imported:
            parts = name.split(".")
            for i in range(len(parts), 0, -1):
                if ".".join(parts[:i]) in self.bundle_modules:
                    found.add(".".join(parts[:i]))
                    break
        return found

    def is_maximal(self, node: ast.AST) -> bool:
        """Not the object of a longer attribute chain (`torch` in `torch.cuda`)."""
        parent = self.parents.get(node)
        return not (isinstance(parent, ast.Attribute) and parent.value is node)

    # --- reading the module once -----------------------------------------------------

    def _index(self) -> None:
        assigns: list[ast.Assign] = []
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
            if isinstance(node, ast.Import):
                self._import(node)
            elif isinstance(node, ast.ImportFrom):
                self._import_from(node)
            elif isinstance(node, ast.Assign):
                assigns.append(node)
            self._note_bound(node)
        # Twice: `a = torch; b = a.cuda` resolves whatever order the walk met them in.
        for _ in range(2):
            for node in assigns:
                self._alias(node)
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call) and self._importer(node, 0):
                argument = node.args[0] if node.args else None
                if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
                    self.imported.append((argument.value, node.lineno))
        self.mutable_globals = {
            target.id
            for node in self.tree.body
            if isinstance(node, ast.Assign) and self._is_mutable(node.value)
            for target in node.targets
            if isinstance(target, ast.Name)
        }

    def _import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.aliases[alias.asname] = alias.name
            else:
                top = alias.name.split(".")[0]
                self.aliases[top] = top
            self.imported.append((alias.name, node.lineno))

    def _import_from(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:
            package = self.name.split(".")[: -node.level] if self.name else []
            module = ".".join([*package, *([module] if module else [])])
        for alias in node.names:
            name = f"{module}.{alias.name}" if module else alias.name
            if alias.name == "*":
                self.imported.append((module, node.lineno))
                continue
            self.aliases[alias.asname or alias.name] = name
            self.imported.append((name, node.lineno))

    def _note_bound(self, node: ast.AST) -> None:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            self.bound.add(node.id)
        elif isinstance(node, ast.arg):
            self.bound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.bound.add(node.name)

    def _alias(self, node: ast.Assign) -> None:
        name = self.resolve(node.value)
        if name is None:
            return
        for target in node.targets:
            if isinstance(target, ast.Name):
                self.aliases.setdefault(target.id, name)

    def _importer(self, node: ast.Call, depth: int) -> bool:
        return self.resolve(node.func, depth) in _IMPORTERS

    def _call_result(self, node: ast.Call, depth: int) -> str | None:
        """What `getattr(m, "c")` or `import_module("m")` returns, as a name."""
        func = self.resolve(node.func, depth)
        args = node.args
        if func == "getattr" and len(args) >= 2 and _is_text(args[1]):
            owner = self.resolve(args[0], depth)
            return f"{owner}.{args[1].value}" if owner else None  # type: ignore[attr-defined]
        if func in _IMPORTERS and args and _is_text(args[0]):
            return args[0].value  # type: ignore[attr-defined,no-any-return]
        return None

    def _is_mutable(self, value: ast.AST) -> bool:
        if isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp)):
            return True
        return isinstance(value, ast.Call) and self.resolve(value.func) in _MUTABLE_CALLS


def _is_text(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)
