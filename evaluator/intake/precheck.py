"""The precheck: patterns hostile bundles use, found in their Python before any GPU time.

Rules are data (precheck_rules.toml: what each catches and why). Each problem's findings
are those of its file and of every bundle module it imports, directly or not. A finding
does not refuse anything: the problem is judged as any other, its result carries the
findings (`ProblemResult.review`), and the portal keeps it under review, off the boards,
until an admin clears it. It is a screen, not a wall:
the sandbox and the judge stop these attacks whether or not a rule sees them, and a rule
that misses costs nothing but the review (docs/security.md, "The precheck").

Work is bounded: the intake has bounded the files' sizes, tokens and nesting; every walk
here is linear in the tree and iterative, and a problem keeps at most MAX_FINDINGS.
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from evaluator.intake.precheck_checks import CHECKS, _matches
from evaluator.intake.precheck_tree import ModuleTree, module_name
from evaluator.results import ProblemResult

RULES_FILE = Path(__file__).with_name("precheck_rules.toml")
MAX_FINDINGS = 50
_DETAIL_CHARS = 80


@dataclass(frozen=True)
class Finding:
    rule: str
    path: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.rule} at {self.path}:{self.line}: {self.text}"

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "path": self.path, "line": self.line, "text": self.text}


@dataclass(frozen=True)
class Rule:
    id: str
    what: str
    why: str
    names: tuple[str, ...] = ()
    allow: tuple[str, ...] = ()
    attributes: frozenset[str] = frozenset()
    strings: tuple[re.Pattern[str], ...] = ()
    keywords: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    patch: bool = False
    check: str = ""
    params: Mapping[str, Any] = field(default_factory=dict)

    def allowed(self, name: str) -> bool:
        return any(_matches(name, pattern) for pattern in self.allow)

    def names_match(self, name: str) -> bool:
        return not self.allowed(name) and any(_matches(name, p) for p in self.names)


_MATCHERS = {"id", "what", "why", "names", "allow", "attributes", "strings", "keywords", "patch"}


@cache
def load_rules(path: Path = RULES_FILE) -> tuple[Rule, ...]:
    """The rules of `path`; a rule naming a check that does not exist fails loudly."""
    with open(path, "rb") as f:
        data = tomllib.load(f)
    rules = []
    for entry in data["rule"]:
        check = entry.get("check", "")
        if check and check not in CHECKS:
            raise ValueError(f"precheck rule {entry['id']}: no check named {check!r}")
        rules.append(
            Rule(
                id=entry["id"],
                what=entry["what"],
                why=entry["why"],
                names=tuple(entry.get("names", ())),
                allow=tuple(entry.get("allow", ())),
                attributes=frozenset(entry.get("attributes", ())),
                strings=tuple(re.compile(s) for s in entry.get("strings", ())),
                keywords={k: tuple(v) for k, v in entry.get("keywords", {}).items()},
                patch=bool(entry.get("patch", False)),
                check=check,
                params={k: v for k, v in entry.items() if k not in _MATCHERS | {"check"}},
            )
        )
    return tuple(rules)


def precheck_files(
    files: Mapping[str, bytes], solutions: Mapping[str, str], rules: tuple[Rule, ...] = ()
) -> dict[str, list[Finding]]:
    """Each problem's findings (slug -> findings; none: an empty list), over a bundle's
    files (path -> bytes, as `Bundle.files`) and its solutions (slug -> path)."""
    rules = rules or load_rules()
    modules = _read_modules(files)
    found = {name: _module_findings(module, rules) for name, module in modules.items()}
    return {
        slug: _capped(f for name in _reached(module_name(path), modules) for f in found[name])
        for slug, path in solutions.items()
    }


def with_review(result: ProblemResult, findings: list[Finding]) -> ProblemResult:
    """`result` carrying its problem's findings, whatever its status: a finding is about
    the code, not about whether it passed."""
    result.review = [f.to_json() for f in findings]
    return result


def precheck_source(source: str, path: str = "solution.py") -> list[Finding]:
    """The findings of one file on its own (tests, and a one-file upload)."""
    found = precheck_files({path: source.encode()}, {"it": path})
    return found["it"]


def _read_modules(files: Mapping[str, bytes]) -> dict[str, ModuleTree]:
    paths = [p for p in files if p.endswith(".py")]
    names = {module_name(p) for p in paths}
    modules = {}
    for path in paths:
        try:
            tree = ast.parse(files[path].decode("utf-8"), filename=path)
        except (SyntaxError, UnicodeDecodeError, RecursionError, MemoryError):
            continue  # the intake refuses these before the precheck sees a bundle
        modules[module_name(path)] = ModuleTree.read(path, tree, names)
    return modules


def _reached(start: str, modules: Mapping[str, ModuleTree]) -> list[str]:
    """`start` and the bundle modules it imports, directly or not, in a stable order."""
    seen, queue = [start], [start]
    while queue:
        module = modules.get(queue.pop())
        for name in sorted(module.bundle_imports()) if module else ():
            if name not in seen and name in modules:
                seen.append(name)
                queue.append(name)
    return [name for name in seen if name in modules]


def _capped(findings: Iterator[Finding]) -> list[Finding]:
    unique = sorted(set(findings), key=lambda f: (f.path, f.line, f.rule, f.text))
    return unique[:MAX_FINDINGS]


def _module_findings(module: ModuleTree, rules: tuple[Rule, ...]) -> list[Finding]:
    found = []
    for rule in rules:
        hits = list(_hits(module, rule))
        # One finding per rule and line: `sys._getframe(1).f_back` is one place, not two.
        lines: dict[int, str] = {}
        for line, detail in hits:
            lines.setdefault(line, detail)
        found += [
            Finding(rule.id, module.path, line, f"{rule.what}: {detail[:_DETAIL_CHARS]}")
            for line, detail in sorted(lines.items())
        ][:MAX_FINDINGS]
    return found


def _hits(module: ModuleTree, rule: Rule) -> Iterator[tuple[int, str]]:
    if rule.names:
        yield from _name_hits(module, rule)
    if rule.attributes or rule.strings or rule.keywords or rule.patch:
        yield from _node_hits(module, rule)
    if rule.check:
        yield from CHECKS[rule.check](module, rule.params)


def _name_hits(module: ModuleTree, rule: Rule) -> Iterator[tuple[int, str]]:
    for name, line in module.imported:
        if module.is_external(name) and rule.names_match(name):
            yield line, f"import {name}"
    for node in module.nodes():
        if isinstance(node, (ast.Name, ast.Attribute, ast.Call)) and module.is_maximal(node):
            used = module.resolve(node)
            if used and module.is_external(used) and rule.names_match(used):
                yield node.lineno, used


def _node_hits(module: ModuleTree, rule: Rule) -> Iterator[tuple[int, str]]:
    for node in module.nodes():
        if isinstance(node, ast.Attribute) and node.attr in rule.attributes:
            yield node.lineno, f".{node.attr}"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and rule.strings:
            if not isinstance(module.parents.get(node), ast.Expr):  # docstrings say, not do
                if any(pattern.search(node.value) for pattern in rule.strings):
                    yield node.lineno, repr(node.value)
        elif isinstance(node, ast.keyword) and (node.arg or "") in rule.keywords:
            value = node.value
            if isinstance(value, ast.Constant) and value.value in rule.keywords[node.arg or ""]:
                yield value.lineno, f"{node.arg}={value.value!r}"
        if rule.patch:
            yield from _patches(module, rule, node)


def _patches(module: ModuleTree, rule: Rule, node: ast.AST) -> Iterator[tuple[int, str]]:
    """Assignments, `del`, setattr and delattr on what a module from outside defines."""
    targets: list[tuple[ast.AST, str]] = []
    if isinstance(node, (ast.Assign, ast.Delete)):
        targets = [(t, "") for t in node.targets]
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        targets = [(node.target, "")]
    elif isinstance(node, ast.Call) and module.resolve(node.func) in ("setattr", "delattr"):
        if node.args:
            attribute = node.args[1] if len(node.args) > 1 else None
            named = isinstance(attribute, ast.Constant) and isinstance(attribute.value, str)
            suffix = f".{attribute.value}" if named else ".<computed>"  # type: ignore[union-attr]
            targets = [(node.args[0], suffix)]
    for target, suffix in targets:
        if isinstance(target, ast.Attribute) or suffix:
            name = module.resolve(target)
            if name and module.is_external(name) and not rule.allowed(name + suffix):
                yield node.lineno, f"{name}{suffix}"  # type: ignore[attr-defined]
