"""The paper's prefix syntax (§3.4) for alsched utility expressions.

Grammar (keywords are case-insensitive, whitespace is free)::

    expr    := '(' OP operand+ ')' | '(' expr ')' | prim
    OP      := 'max' | 'min' | 'sum' | '+' | 'scale' NUMBER | '*' NUMBER
             | 'barrier' NUM | 'bar' NUM
    prim    := ('nck' | 'lnck') '(' CLASS ',' NUM ',' NUM ')'
    NUM     := NUMBER | 'cap' '(' CLASS ')' | 'tasks'
    CLASS   := [A-Za-z_][A-Za-z0-9_.:@/-]*  |  '"' chars '"'   (\\" and \\\\ escape)

A parenthesised group that starts with a primitive or another ``(`` is plain grouping, which
is how the paper writes ``(max (nck(i,64,64)))``.  ``scale`` takes a plain number (the AST
keeps its factor a float), ``barrier`` any ``NUM``; both take exactly one operand.

The paper's own §3.4 expression is unbalanced: its ``(max A)`` closes after ``A`` and the
second branch follows at top level, although Fig. 5 draws ``max`` over both branches.  The
default, lenient mode reads such juxtaposed top-level expressions as further operands of a
preceding n-ary operator expression, so the paper's text parses to Fig. 5; ``strict=True``
rejects them.  Any other trailing text is an error in both modes.

Every error is a ``ParseError`` carrying the 1-based column (a character offset into the
whole text, so multi-line YAML strings still point at the right character) and the text;
``caret()`` renders the familiar two-line picture.  Validation errors of the AST (a negative
number, an infinite one) become ``ParseError`` too, pointing at the offending number or node.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from utilon.errors import ModelError, UtilonError
from utilon.policies.alsched.lang.ast import (
    NARY,
    Barrier,
    Cap,
    Lit,
    LnCk,
    Max,
    Min,
    NCk,
    Node,
    NumTerm,
    Scale,
    Sum,
    Tasks,
)

__all__ = ["MAX_DEPTH", "MAX_NODES", "MAX_NUMBER", "ParseError", "parse", "parse_number"]

MAX_DEPTH = 100
"""Deepest nesting accepted (parentheses in text; text and mappings together in the
structured face): keeps the recursive parser, binder and solvers far from Python's recursion
limit, so that hostile input yields a one-line error rather than a RecursionError."""
MAX_NODES = 10_000
"""Most operators and primitives in one expression as written (before loops are bound)."""
MAX_NUMBER = 1e15
"""Largest literal number (k, u, a barrier level, a scale factor): far past any unit count or
utility, small enough that sums and weighted totals stay finite and exact to the unit."""


class ParseError(UtilonError):
    """A syntax error in prefix text, with its 1-based ``column`` and the full ``text``."""

    def __init__(self, reason: str, *, column: int, text: str, where: str = "expression",
                 fix: str = "") -> None:
        super().__init__(f"col {column}: {reason}", where=where, fix=fix)
        self.reason = reason
        self.column = column
        self.text = text

    def caret(self) -> str:
        """The text on one line (whitespace flattened) with a ``^`` under the column."""
        line = "".join(" " if c.isspace() else c for c in self.text)
        return f"{line}\n{' ' * (self.column - 1)}^"


# -- tokens --------------------------------------------------------------------------------------
_NUMBER = r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
_TOKEN_RE = re.compile(
    rf"(?P<ws>\s+)|(?P<num>{_NUMBER})|(?P<ident>[A-Za-z_][A-Za-z0-9_.:@/-]*)|(?P<punct>[(),*+])",
    re.ASCII,
)
# A number running straight into these is a typo ("64abc", "1.2.3"), not two tokens.
_NUMBER_TAIL = re.compile(r"[A-Za-z0-9_.]", re.ASCII)

_NARY_OPS: dict[str, Callable[[tuple[Node, ...]], Node]] = {"max": Max, "min": Min, "sum": Sum}
_PRIMS: dict[str, type[NCk] | type[LnCk]] = {"nck": NCk, "lnck": LnCk}
_OPERATORS = "max, min, sum (+), scale (*), barrier (bar)"


@dataclass(frozen=True, slots=True)
class _Tok:
    kind: str  # "num", "ident", "str", one of "(),*+", or "end"
    text: str  # the source slice, for messages
    pos: int  # 0-based offset into the text
    value: str = ""  # identifier or (unescaped) string contents

    def show(self) -> str:
        return "end of input" if self.kind == "end" else f"'{self.text}'"

    def keyword(self) -> str:
        return self.value.lower() if self.kind == "ident" else ""


def _tokenize(text: str, fail: Callable[..., ParseError]) -> list[_Tok]:
    toks: list[_Tok] = []
    pos = 0
    while pos < len(text):
        if text[pos] == '"':
            tok = _read_string(text, pos, fail)
            toks.append(tok)
            pos += len(tok.text)
            continue
        m = _TOKEN_RE.match(text, pos)
        if m is None:
            raise fail(pos, f"unexpected character {text[pos]!r}",
                       "class names with odd characters go in double quotes")
        kind = m.lastgroup or ""
        word = m.group()
        if kind == "num" and _NUMBER_TAIL.match(text, m.end()):
            tail = _TOKEN_RE.match(text, m.end())
            bad = word + (tail.group() if tail else text[m.end()])
            raise fail(pos, f"malformed number '{bad}'", "write a number like 64, 0.5 or 1e3")
        if kind == "punct":
            toks.append(_Tok(word, word, pos))
        elif kind != "ws":
            toks.append(_Tok(kind, word, pos, word))
        pos = m.end()
    toks.append(_Tok("end", "", len(text)))
    return toks


def _read_string(text: str, start: int, fail: Callable[..., ParseError]) -> _Tok:
    out: list[str] = []
    pos = start + 1
    while pos < len(text):
        c = text[pos]
        if c == '"':
            return _Tok("str", text[start:pos + 1], start, "".join(out))
        if c == "\\" and pos + 1 < len(text):
            pos += 1
            c = text[pos]
        out.append(c)
        pos += 1
    raise fail(start, "unterminated string", 'close the class name with a double quote (")')


# -- the parser ----------------------------------------------------------------------------------
class _Parser:
    def __init__(self, text: str, where: str, max_depth: int = MAX_DEPTH) -> None:
        self.text = text
        self.where = where
        self.toks = _tokenize(text, self.fail)
        self.i = 0
        self.depth = 0
        self.max_depth = max_depth
        self.nodes = 0

    # helpers ------------------------------------------------------------------------------
    def fail(self, pos: int, reason: str, fix: str = "") -> ParseError:
        return ParseError(reason, column=pos + 1, text=self.text, where=self.where, fix=fix)

    def peek(self) -> _Tok:
        return self.toks[self.i]

    def take(self) -> _Tok:
        tok = self.toks[self.i]
        if tok.kind != "end":
            self.i += 1
        return tok

    def expect(self, kind: str, what: str, fix: str = "") -> _Tok:
        tok = self.peek()
        if tok.kind != kind:
            raise self.fail(tok.pos, f"expected {what}, found {tok.show()}", fix)
        return self.take()

    def starts_expr(self) -> bool:
        tok = self.peek()
        return tok.kind == "(" or tok.keyword() in _PRIMS

    def check_size(self, value: float, pos: int) -> None:
        if abs(value) > MAX_NUMBER:
            raise self.fail(pos, f"number {value:g} is larger than {MAX_NUMBER:g}",
                            f"unit counts and utilities stay below {MAX_NUMBER:g}")

    def build(self, pos: int, make: Callable[[], Node],
              nums: tuple[tuple[NumTerm | float, int], ...] = ()) -> Node:
        """Run an AST constructor; its validation errors point at the bad number, if one is
        negative or infinite, else at the node's start."""
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise self.fail(pos, f"more than {MAX_NODES:,} operators and primitives",
                            "use a class (or a loop variable) instead of one primitive per "
                            "machine")
        try:
            return make()
        except ModelError as err:
            for term, at in nums:
                value = term.value if isinstance(term, Lit) else term
                if isinstance(value, float) and not (0 <= value < math.inf):
                    pos = at
                    break
            raise self.fail(pos, err.message, "every number must be >= 0 and finite") from None

    # grammar ------------------------------------------------------------------------------
    def document(self, strict: bool) -> Node:
        root = self.expr()
        extra: list[Node] = []
        while (tok := self.peek()).kind != "end":
            if not self.starts_expr():
                raise self.fail(tok.pos, f"unexpected {tok.show()} after the end of the "
                                "expression", "remove it, or check the parentheses")
            if strict or not isinstance(root, NARY):
                raise self.fail(tok.pos, "a second expression follows the end of the "
                                "expression", "combine them with an operator, e.g. (max A B)")
            extra.append(self.expr())  # lenient: the paper's juxtaposed branch (§3.4)
        return root.with_children(root.children + tuple(extra)) if extra else root

    def expr(self) -> Node:
        tok = self.peek()
        if tok.kind == "(":
            return self.group()
        if tok.keyword() in _PRIMS:
            return self.prim()
        raise self.fail(tok.pos, f"expected an expression ('(' or nck(...)/lnck(...)), found "
                                 f"{tok.show()}")

    def group(self) -> Node:
        opening = self.take()
        self.depth += 1
        if self.depth > self.max_depth:
            raise self.fail(opening.pos, f"nested deeper than {MAX_DEPTH} levels",
                            "flatten the expression")
        tok = self.peek()
        if tok.kind == "(" or tok.keyword() in _PRIMS:
            node = self.expr()
            self.close(opening)
        else:
            node = self.operator(opening)
        self.depth -= 1
        return node

    def close(self, opening: _Tok) -> None:
        if self.peek().kind != ")":
            raise self.unclosed(opening)
        self.take()

    def unclosed(self, opening: _Tok) -> ParseError:
        tok = self.peek()
        return self.fail(tok.pos, f"expected ')' to close the '(' at col {opening.pos + 1}, "
                                  f"found {tok.show()}", "check the parentheses")

    def operator(self, opening: _Tok) -> Node:
        tok = self.take()
        word = tok.keyword()
        if tok.kind == "+" or word in _NARY_OPS:
            make = _NARY_OPS[word or "sum"]
            args = self.operands(opening, word or "+", unary=False)
            return self.build(tok.pos, lambda: make(args))
        if tok.kind == "*" or word == "scale":
            ftok = self.expect("num", f"a number after '{tok.text}' (scale's factor)",
                               "scale takes a plain number, e.g. (scale 0.5 A)")
            factor = float(ftok.text)
            if math.isfinite(factor):
                self.check_size(factor, ftok.pos)
            args = self.operands(opening, tok.text, unary=True)
            return self.build(tok.pos, lambda: Scale(factor, args[0]), ((factor, ftok.pos),))
        if word in ("barrier", "bar"):
            lpos = self.peek().pos
            level = self.number(f"the level after '{tok.text}'")
            args = self.operands(opening, tok.text, unary=True)
            return self.build(tok.pos, lambda: Barrier(level, args[0]), ((level, lpos),))
        if tok.kind == ")":
            raise self.fail(tok.pos, "empty parentheses", f"start a group with an operator "
                                                          f"({_OPERATORS}) or an expression")
        raise self.fail(tok.pos, f"expected an operator ({_OPERATORS}) or an expression after "
                                 f"'(', found {tok.show()}")

    def operands(self, opening: _Tok, op: str, *, unary: bool) -> tuple[Node, ...]:
        args: list[Node] = []
        while self.peek().kind != ")":
            tok = self.peek()
            if tok.kind == "end":
                raise self.unclosed(opening)
            if tok.kind == ",":
                raise self.fail(tok.pos, "unexpected ','", "operands are separated by spaces")
            if unary and args:
                raise self.fail(tok.pos, f"'{op}' takes exactly one operand",
                                "combine the operands with (sum ...) or (max ...)")
            args.append(self.expr())
        if not args:
            raise self.fail(self.peek().pos, f"'{op}' needs an operand", "add an expression")
        self.take()
        return tuple(args)

    def prim(self) -> Node:
        tok = self.take()
        kind = _PRIMS[tok.keyword()]
        self.expect("(", f"'(' after '{tok.text}'", f"write {tok.text}(CLASS, k, u)")
        cls = self.class_name(f"a class name after '{tok.text}('")
        self.expect(",", "',' after the class name")
        kpos = self.peek().pos
        k = self.number("k (a number, cap(CLASS) or tasks)")
        self.expect(",", "',' after k")
        upos = self.peek().pos
        u = self.number("u (a number, cap(CLASS) or tasks)")
        self.expect(")", f"')' to close {tok.text}(...)", f"write {tok.text}(CLASS, k, u)")
        return self.build(tok.pos, lambda: kind(cls, k, u), ((k, kpos), (u, upos)))

    def class_name(self, what: str) -> str:
        tok = self.peek()
        if tok.kind not in ("ident", "str"):
            raise self.fail(tok.pos, f"expected {what}, found {tok.show()}",
                            'a class is a name like rack1 or a quoted string like "m 1"')
        if not tok.value:
            raise self.fail(tok.pos, "the class name must not be empty")
        return self.take().value

    def number(self, what: str) -> NumTerm:
        tok = self.peek()
        if tok.kind == "num":
            self.take()
            try:
                term = Lit(float(tok.text))
            except ModelError as err:
                raise self.fail(tok.pos, err.message, "use a finite number") from None
            self.check_size(term.value, tok.pos)
            return term
        if tok.keyword() == "tasks":
            self.take()
            return Tasks()
        if tok.keyword() == "cap":
            self.take()
            self.expect("(", "'(' after 'cap'", "write cap(CLASS)")
            cls = self.class_name("a class name after 'cap('")
            self.expect(")", "')' to close cap(...)", "write cap(CLASS)")
            return Cap(cls)
        raise self.fail(tok.pos, f"expected {what}, found {tok.show()}",
                        "write a number, cap(CLASS) or tasks")


# -- entry points --------------------------------------------------------------------------------
MAX_TEXT = 100_000
"""Longest expression text: far past any placement preference a person writes."""


def _check_text(text: object, where: str) -> str:
    if not isinstance(text, str):
        raise ParseError(f"expected text, got {type(text).__name__}", column=1, text="",
                         where=where)
    return text


def parse(text: str, *, strict: bool = False, where: str = "expression",
          max_depth: int = MAX_DEPTH) -> Node:
    """Parse prefix text into an AST; raises ``ParseError`` (and nothing else) on bad input.
    ``max_depth``: the parentheses allowed (less than ``MAX_DEPTH`` inside a structured
    expression that already nests)."""
    text = _check_text(text, where)
    if len(text) > MAX_TEXT:
        raise ParseError(f"an expression may be at most {MAX_TEXT:,} characters, got "
                         f"{len(text):,}", column=1, text="", where=where)
    try:
        return _Parser(text, where, max_depth).document(strict)
    except RecursionError:
        raise ParseError("nested too deeply", column=1, text="", where=where) from None


def parse_number(text: str, *, where: str = "number") -> NumTerm:
    """Parse a lone ``NUM`` (``64``, ``cap(j)``, ``tasks``), as the structured face writes
    symbolic numbers."""
    parser = _Parser(_check_text(text, where), where)
    term = parser.number("a number, cap(CLASS) or tasks")
    tok = parser.peek()
    if tok.kind != "end":
        raise parser.fail(tok.pos, f"unexpected {tok.show()} after the number")
    return term
