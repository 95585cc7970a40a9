"""Checks a bundle's Python source before anything parses it, then parses it.

`ast.parse` is not safe on hostile input as it stands: its memory grows with the tokens
(about 600 bytes each, measured with tracemalloc: 1 MiB of `f(a)` lines, 1M tokens, peaks
at 700 MiB and takes seconds), and it recurses once per nesting level, giving up near
3,000 levels with a MemoryError or RecursionError (measured on CPython 3.11), fewer where
the caller's stack is already deep. So a source is first tokenized (linear time, no
recursion), its tokens counted against a budget and its nesting bounded; only then parsed.
"""

from __future__ import annotations

import ast
import codecs
import io
import keyword
import re
import tokenize
from dataclasses import dataclass

# The tokens of a bundle's Python files, all together; the largest file in torch has 230,000.
MAX_PYTHON_TOKENS = 250_000
# CPython's parser and its AST conversion recurse once per nesting level and give up near
# 3,000 levels (MemoryError or RecursionError, both measured on 3.11), fewer when the
# caller's stack is already deep. A source nested deeper than this is refused before it
# reaches them; real code nests a few dozen levels at most.
MAX_NESTING = 500


class SourceError(ValueError):
    """The source may not be parsed; the message names the file and, where known, the line."""


def parse_python(path: str, data: bytes, *, max_tokens: int) -> tuple[ast.Module, int]:
    """The module's tree and its token count, or SourceError with the line at fault."""
    try:
        source = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError(
            f"{path} is not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None
    _check_declared_encoding(path, data)
    _check_controls(path, source)
    tokens = _measure_source(path, source, max_tokens=max_tokens)
    try:
        return ast.parse(source, filename=path), tokens
    except SyntaxError as exc:
        raise SourceError(_syntax_error(path, exc)) from None
    except (RecursionError, MemoryError):
        # A backstop: _measure_source keeps sources well below where these are raised.
        raise SourceError(f"{path}: too deeply nested or too large to parse") from None


def _syntax_error(path: str, exc: SyntaxError) -> str:
    """ "a.py line 3, column 3: invalid syntax: `x = = 1`": where to look, and the line
    itself (cut, and shown as text: it is the uploader's own code)."""
    where = f"{path} line {exc.lineno}"
    if exc.offset:
        where += f", column {exc.offset}"
    text = (exc.text or "").strip()
    if not text:
        return f"{where}: {exc.msg}"
    if len(text) > MAX_SHOWN_LINE:
        text = text[:MAX_SHOWN_LINE] + "…"
    return f"{where}: {exc.msg}: `{text}`"


MAX_SHOWN_LINE = 120


# C0 controls a source may hold: tab, line feed, carriage return and form feed. CPython
# ends a line at LF (or CR) only, where str.splitlines() also breaks at 0x1c-0x1e, 0x0b,
# 0x0c and others: a check reading lines unlike CPython reads another file than it runs.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f]")


def _check_declared_encoding(path: str, data: bytes) -> None:
    """Python decodes a file by its coding comment; the site shows it as UTF-8. A file that
    declares another encoding (utf-7 hides a line in a comment) would run other code than
    the code people read: refused. The declaration is read as CPython reads it, by
    tokenize.detect_encoding on the bytes."""
    try:
        name, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:  # an unknown encoding, or a BOM that contradicts it
        raise SourceError(
            f"{path}: declares the source encoding wrongly ({exc.msg}); bundle files are "
            "UTF-8 (remove the coding line)"
        ) from None
    if codecs.lookup(name).name != "utf-8":
        raise SourceError(
            f"{path}: declares the source encoding {name!r}; bundle files are UTF-8 "
            "(remove the coding line)"
        )


def _check_controls(path: str, source: str) -> None:
    found = _CONTROL.search(source)
    if found:
        line = source.count("\n", 0, found.start()) + 1
        if found.group() == "\x00":
            raise SourceError(f"{path} line {line}: contains a NUL byte")
        raise SourceError(
            f"{path} line {line}: contains the control character "
            f"0x{ord(found.group()):02x} (only tab, newline, carriage return and form feed "
            "may appear in a source)"
        )


def _measure_source(path: str, source: str, *, max_tokens: int) -> int:
    """Count the tokens and bound the nesting of a source before ast.parse sees it.

    The nesting bound is an over-estimate of the AST's depth, taken per statement from the
    tokens alone (linear time, constant stack): within a bracket level, every operator,
    keyword and bracket since the last comma may add a level (commas separate siblings,
    except between a lambda's parameters); a closed bracket adds its deepest element.
    Statements nest by indentation (CPython allows 100 levels) and by `elif` chains, which
    are counted apart. A source that does not tokenize is left to ast.parse to report.
    """
    count = 0
    levels = [_Level()]
    elifs: dict[int, int] = {}  # column -> length of the elif chain at that indentation
    line_start = True
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            count += 1
            if count > max_tokens:
                raise SourceError(
                    f"{path} line {tok.start[0]}: the bundle's Python files hold more than "
                    f"{MAX_PYTHON_TOKENS} tokens, too many to check"
                )
            if tok.type in (tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT):
                line_start = line_start or tok.type == tokenize.NEWLINE
                if tok.type == tokenize.NEWLINE:
                    levels = [_Level()]
                continue
            if tok.type in (tokenize.INDENT, tokenize.DEDENT):
                continue
            if line_start:
                line_start = False
                _count_elif(path, tok, elifs)
            depth = _nest(tok, levels)
            if depth is None:
                return count  # unbalanced brackets: a syntax error for ast.parse to name
            if depth > MAX_NESTING:
                raise SourceError(
                    f"{path} line {tok.start[0]}: an expression nested more than "
                    f"{MAX_NESTING} levels deep"
                )
    except (tokenize.TokenError, SyntaxError):
        pass
    return count


@dataclass
class _Level:
    run: int = 0  # levels that may stack up since the last comma
    deepest: int = 0  # of the elements closed by a comma
    lambdas: int = 0  # lambdas whose parameters are still open


_OPENING = "([{"
_CLOSING = ")]}"


def _nest(tok: tokenize.TokenInfo, levels: list[_Level]) -> int | None:
    """Account one token; the current element's nesting bound, or None if unbalanced."""
    level = levels[-1]
    text = tok.string
    if tok.type == tokenize.OP and text in _OPENING:
        level.run += 1
        levels.append(_Level())
        return level.run
    if tok.type == tokenize.OP and text in _CLOSING:
        if len(levels) == 1:
            return None
        inner = levels.pop()
        levels[-1].run += max(inner.run, inner.deepest) + 1
        return levels[-1].run
    if tok.type == tokenize.OP and text == "," and not level.lambdas:
        level.deepest = max(level.deepest, level.run)
        level.run = 0
        return level.deepest
    if tok.type == tokenize.OP and text == ";":
        levels[:] = [_Level()]
        return 0
    if tok.type == tokenize.NAME and text == "lambda":
        level.lambdas += 1
    elif tok.type == tokenize.OP and text == ":" and level.lambdas:
        level.lambdas -= 1
    if tok.type == tokenize.OP or (tok.type == tokenize.NAME and keyword.iskeyword(text)):
        level.run += 1
    elif tok.type == tokenize.STRING and "f" in text[: len(text) - len(text.lstrip("rRbBuUfF"))]:
        # Before Python 3.12 an f-string is one token, its expressions parsed apart.
        level.run += _fstring_weight(text)
    return level.run


_FSTRING_PIECE = re.compile(r"\{\{|\}\}|[{}]|\w+|[^\w\s]")


def _fstring_weight(text: str) -> int:
    """An f-string's pieces of code inside its braces: words and operator characters."""
    weight = depth = 0
    for match in _FSTRING_PIECE.finditer(text):
        piece = match.group()
        if piece == "{":
            depth += 1
        elif piece == "}":
            depth = max(depth - 1, 0)
        if depth:
            weight += 1
    return weight


def _count_elif(path: str, tok: tokenize.TokenInfo, elifs: dict[int, int]) -> None:
    """Each `elif` nests an If in the previous one's else branch."""
    column = tok.start[1]
    if tok.type == tokenize.NAME and tok.string == "elif":
        elifs[column] = elifs.get(column, 0) + 1
        if sum(elifs.values()) > MAX_NESTING:
            raise SourceError(
                f"{path} line {tok.start[0]}: more than {MAX_NESTING} elif branches in a chain"
            )
    elif not (tok.type == tokenize.NAME and tok.string == "else"):
        for deeper in [c for c in elifs if c >= column]:
            del elifs[deeper]
