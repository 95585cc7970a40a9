"""The precheck's structural checks: patterns that a list of names cannot say.

Each takes a module (precheck_tree.ModuleTree) and its rule's parameters from
precheck_rules.toml, and yields (line, detail) for each place it finds. They over-report
rather than miss: a finding is read by a person before anything is decided.
"""

from __future__ import annotations

import ast
import fnmatch
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from evaluator.intake.precheck_tree import ModuleTree

Hit = tuple[int, str]
Params = Mapping[str, Any]
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_KEYED_METHODS = ("get", "pop", "setdefault", "__getitem__", "__contains__")
_READ_METHODS = ("pop", "get", "setdefault", "popitem", "popleft", "__getitem__", "copy")
# Constant sizes are folded only this far: a larger number is large enough already.
_MAX_CONSTANT = 1 << 70


def tensor_subclass(module: ModuleTree, params: Params) -> Iterator[Hit]:
    bases, methods = params.get("bases", []), set(params.get("methods", []))
    for node in module.nodes():
        if not isinstance(node, ast.ClassDef):
            continue
        for base in node.bases:
            name = module.resolve(base)
            if name and any(_matches(name, pattern) for pattern in bases):
                yield node.lineno, f"class {node.name}({name})"
        for item in node.body:
            if isinstance(item, _FUNCTIONS) and item.name in methods:
                yield item.lineno, f"{node.name}.{item.name}"


def dynamic_import(module: ModuleTree, params: Params) -> Iterator[Hit]:
    for node in module.nodes():
        if isinstance(node, ast.Call) and module.resolve(node.func) in (
            "importlib.import_module",
            "__import__",
        ):
            first = node.args[0] if node.args else None
            if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                yield node.lineno, "a module imported by a computed name"


def identity_key(module: ModuleTree, params: Params) -> Iterator[Hit]:
    """Keys (subscripts, `in`, .get/.pop) built from data_ptr(), id(), hashes..."""
    calls, modules = set(params.get("calls", [])), params.get("modules", [])

    def is_identity(node: ast.AST) -> bool:
        if not isinstance(node, ast.Call):
            return False
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in calls:
            return True
        name = module.resolve(func)
        return name is not None and (name in calls or any(_matches(name, m) for m in modules))

    tainted = {
        target.id
        for node in module.nodes()
        if isinstance(node, ast.Assign) and any(is_identity(n) for n in ast.walk(node.value))
        for target in node.targets
        if isinstance(target, ast.Name)
    }

    def keyed(node: ast.AST) -> bool:
        return any(
            is_identity(n) or isinstance(n, ast.Name) and n.id in tainted for n in ast.walk(node)
        )

    for node in module.nodes():
        key = _key_of(node)
        if key is not None and keyed(key):
            yield node.lineno, f"a key made from {_text(key)[:60]}"  # type: ignore[attr-defined]


def _key_of(node: ast.AST) -> ast.AST | None:
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        return None if isinstance(node.slice, ast.Slice) else node.slice
    if isinstance(node, ast.Compare) and any(isinstance(o, (ast.In, ast.NotIn)) for o in node.ops):
        return node.left
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _KEYED_METHODS
        and isinstance(node.func.value, ast.Name)
        and node.args
    ):
        return node.args[0]
    return None


def returns_state(module: ModuleTree, params: Params) -> Iterator[Hit]:
    """`return CACHE[key]`, `return STATE["last"]`, `return STASH.pop(0)`."""
    for function in _functions(module):
        local = _locals(function)
        for node in ast.walk(function):
            if isinstance(node, ast.Return) and node.value is not None:
                root = _state_root(node.value)
                if root in module.mutable_globals and root not in local:
                    yield node.lineno, f"returns {_text(node.value)[:60]}"


def _state_root(node: ast.AST) -> str | None:
    while True:
        if isinstance(node, (ast.Subscript, ast.Attribute)):
            node = node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _READ_METHODS
        ):
            node = node.func.value
        else:
            return node.id if isinstance(node, ast.Name) else None


def counts_calls(module: ModuleTree, params: Params) -> Iterator[Hit]:
    """`CALLS[0] += 1`, `STATE["calls"] += 1`, or `global n; n += 1`, in a function."""
    for function in _functions(module):
        declared = {n for g in ast.walk(function) if isinstance(g, ast.Global) for n in g.names}
        local = _locals(function) - declared
        for node in ast.walk(function):
            if isinstance(node, ast.AugAssign):
                root = _state_root(node.target)
                if root in declared or root in module.mutable_globals and root not in local:
                    yield node.lineno, _text(node)[:60]


def input_scribble(module: ModuleTree, params: Params) -> Iterator[Hit]:
    methods = set(params.get("methods", []))
    for function in _functions(module):
        if function.name != "solution":
            continue
        inputs = {a.arg for a in [*function.args.posonlyargs, *function.args.args]}
        for node in ast.walk(function):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in methods
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id in inputs
            ):
                yield node.lineno, f"{node.func.value.id}.{node.func.attr}()"


def endless_loop(module: ModuleTree, params: Params) -> Iterator[Hit]:
    for node in module.nodes():
        if (
            isinstance(node, ast.While)
            and isinstance(node.test, ast.Constant)
            and node.test.value
            and not any(
                isinstance(n, (ast.Break, ast.Return, ast.Raise))
                for stmt in node.body
                for n in ast.walk(stmt)
            )
        ):
            yield node.lineno, "a `while True` with no break, return or raise"


def constant_size(module: ModuleTree, params: Params) -> Iterator[Hit]:
    least = int(params.get("min_elements", 1 << 20))
    factories, methods = set(params.get("factories", [])), set(params.get("methods", []))
    for node in module.nodes():
        if not isinstance(node, ast.Call) or not node.args:
            continue
        name = module.resolve(node.func)
        method = node.func.attr if isinstance(node.func, ast.Attribute) else None
        if name in factories or (name is None and method in methods):
            size = _elements(node.args, single=bool(name and name.endswith("full")))
            if size is not None and size >= least:
                yield node.lineno, f"{_text(node)[:60]} ({size:,} elements)"


def _elements(args: list[ast.expr], *, single: bool) -> int | None:
    """The number of elements constant size arguments ask for, or None."""
    first = args[0]
    dims = first.elts if isinstance(first, (ast.Tuple, ast.List)) else args[:1] if single else args
    size = 1
    for dim in dims:
        value = _constant(dim)
        if value is None:
            return None
        size = min(size * max(value, 1), _MAX_CONSTANT)
    return size


def _constant(node: ast.AST) -> int | None:
    """An integer expression of literals (`64 * 1024**3`, `1 << 34`), folded; else None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _constant(node.operand)
        return None if value is None else -value
    if not isinstance(node, ast.BinOp):
        return None
    left, right = _constant(node.left), _constant(node.right)
    if left is None or right is None or abs(left) > _MAX_CONSTANT or abs(right) > _MAX_CONSTANT:
        return None
    if isinstance(node.op, (ast.Pow, ast.LShift)) and not 0 <= right <= 128:
        return None
    operations: dict[type, Callable[[int, int], int]] = {
        ast.Add: lambda a, b: a + b,
        ast.Sub: lambda a, b: a - b,
        ast.Mult: lambda a, b: a * b,
        ast.FloorDiv: lambda a, b: a // b if b else 0,
        ast.Pow: lambda a, b: a**b,
        ast.LShift: lambda a, b: a << b,
    }
    operation = operations.get(type(node.op))
    return None if operation is None else min(operation(left, right), _MAX_CONSTANT)


def _text(node: ast.AST) -> str:
    """The code of a node, for a finding's detail; a pathologically nested one goes unsaid."""
    try:
        return ast.unparse(node)
    except (RecursionError, ValueError):
        return "..."


def _functions(module: ModuleTree) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    return (node for node in module.nodes() if isinstance(node, _FUNCTIONS))


def _locals(function: ast.AST) -> set[str]:
    """Names a function binds itself (parameters, assignments), which shadow globals."""
    names = set()
    for node in ast.walk(function):
        if isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def _matches(name: str, pattern: str) -> bool:
    """A pattern matches a dotted name or any leading part of it."""
    parts = name.split(".")
    return any(fnmatch.fnmatchcase(".".join(parts[:i]), pattern) for i in range(1, len(parts) + 1))


CHECKS: dict[str, Callable[[ModuleTree, Params], Iterator[Hit]]] = {
    "tensor_subclass": tensor_subclass,
    "dynamic_import": dynamic_import,
    "identity_key": identity_key,
    "returns_state": returns_state,
    "counts_calls": counts_calls,
    "input_scribble": input_scribble,
    "endless_loop": endless_loop,
    "constant_size": constant_size,
}
