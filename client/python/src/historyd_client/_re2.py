"""RE2 patterns, as Go's regexp reads them, run with Python's ``re``.

``inspect_state``'s ``pattern`` is an RE2 expression in every historyd client
(Go's ``regexp`` is the reference), and a pattern that RE2 does not accept is
matched as plain text. :func:`translate` turns an RE2 pattern into a Python
one with the same meaning, or says RE2 would refuse it:

- refused, as RE2 refuses them: lookaround, backreferences, atomic groups,
  possessive quantifiers, conditionals, comments, ``\\Z``, flags other than
  ``imsU``, and repeat counts over 1000;
- rewritten, where Python reads the same text differently: ``\\d``, ``\\w``,
  ``\\s`` and ``\\b`` are ASCII-only in RE2 (Python's are Unicode), ``\\z`` is
  Python's ``\\Z``, ``\\Q...\\E`` is quoted text, ``\\x{...}`` a code point,
  ``(?<name>`` a named group, POSIX classes such as ``[[:alpha:]]`` ASCII
  ranges, and ``{,n}`` the literal text it is in RE2;
- not available: Unicode classes (``\\pL``, ``\\p{Greek}``) and the ungreedy
  flag ``U``, which have no ``re`` equivalent. Such a pattern is matched as
  plain text, where Go would match it as an expression.

Case-insensitive matching uses simple Unicode case folding in both.
"""

from __future__ import annotations

import re

_WORD = "0-9A-Za-z_"
_CLASSES = {"d": "0-9", "w": _WORD, "s": "\\t\\n\\f\\r "}
_BOUNDARY = f"(?:(?<=[{_WORD}])(?![{_WORD}])|(?<![{_WORD}])(?=[{_WORD}]))"
_NON_BOUNDARY = f"(?:(?<=[{_WORD}])(?=[{_WORD}])|(?<![{_WORD}])(?![{_WORD}]))"
_POSIX = {
    "alnum": "0-9A-Za-z",
    "alpha": "A-Za-z",
    "ascii": "\\x00-\\x7f",
    "blank": "\\t ",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": "\\t\\n\\v\\f\\r ",
    "upper": "A-Z",
    "word": _WORD,
    "xdigit": "0-9A-Fa-f",
}
_SIMPLE_ESCAPES = set("afnrtv")
_MAX_REPEAT = 1000
_REPEAT = re.compile(r"\{(\d+)(,(\d*))?\}")


class Refused(Exception):
    """The pattern is not one RE2 accepts (or not one this module can carry over)."""


def compile_re2(pattern: str) -> tuple[re.Pattern[str], bool]:
    """``pattern`` as a case-insensitive expression, and whether it was taken as text.

    As Go's ``regexp.Compile("(?i)" + pattern)``, falling back, like the Go
    inspector, to the pattern's literal text when it does not compile.
    """
    try:
        return re.compile(translate(pattern), re.IGNORECASE), False
    except (Refused, re.error, OverflowError, RecursionError):
        return re.compile(re.escape(pattern), re.IGNORECASE), True


def translate(pattern: str) -> str:
    """The Python pattern meaning what RE2 reads in ``pattern``; :class:`Refused` if RE2 would not."""
    out: list[str] = []
    # Per open group (the pattern itself first): the flags set with (?flags)
    # inside it so far. RE2 applies them to the rest of the group, across
    # alternatives; Python only takes scoped groups, (?flags:...), which are
    # closed at each | and reopened after it, and closed with the group.
    scopes: list[list[str]] = [[]]
    i, n = 0, len(pattern)
    last_repeatable = False  # whether a quantifier may follow what was just written
    while i < n:
        c = pattern[i]
        if c == "\\":
            text, i = _escape(pattern, i, in_class=False)
            out.append(text)
            last_repeatable = text not in (_BOUNDARY, _NON_BOUNDARY, "\\A", "\\Z")
            continue
        if c == "[":
            text, i = _class(pattern, i)
            out.append(text)
            last_repeatable = True
            continue
        if c == "(":
            text, i, flags = _group_open(pattern, i)
            if flags is not None:
                out.append("(?" + flags + ":")
                scopes[-1].append(flags)
            else:
                out.append(text)
                scopes.append([])
            last_repeatable = False
            continue
        if c == ")":
            if len(scopes) == 1:
                raise Refused("unexpected )")
            out.append(")" * len(scopes.pop()) + ")")
            i += 1
            last_repeatable = True
            continue
        if c == "|":
            pending = scopes[-1]
            out.append(")" * len(pending) + "|" + "".join("(?" + f + ":" for f in pending))
            i += 1
            last_repeatable = False
            continue
        if c in "*+?":
            if not last_repeatable:
                raise Refused(f"missing argument to repetition operator {c}")
            i += 1
            if i < n and pattern[i] == "?":  # lazy: RE2 has it
                out.append(c + "?")
                i += 1
            else:
                out.append(c)
            if i < n and pattern[i] in "*+?":
                raise Refused("invalid nested repetition operator")
            last_repeatable = False
            continue
        if c == "{":
            m = _REPEAT.match(pattern, i)
            if m is None:
                out.append("\\{")  # not a repeat: literal text in RE2 ({,3} included)
                i += 1
                last_repeatable = True
                continue
            low, high = int(m.group(1)), m.group(3)
            if low > _MAX_REPEAT or (high and (int(high) > _MAX_REPEAT or int(high) < low)):
                raise Refused("invalid repeat count")
            if not last_repeatable:
                raise Refused("missing argument to repetition operator")
            out.append(m.group(0))
            i = m.end()
            if i < n and pattern[i] == "?":
                out.append("?")
                i += 1
            if i < n and (pattern[i] in "*+?" or _REPEAT.match(pattern, i)):
                raise Refused("invalid nested repetition operator")
            last_repeatable = False
            continue
        out.append(c)
        i += 1
        last_repeatable = c not in "^$"
    if len(scopes) > 1:
        raise Refused("missing closing )")
    out.append(")" * len(scopes[0]))
    return "".join(out)


def _escape(pattern: str, i: int, *, in_class: bool) -> tuple[str, int]:
    """The escape at ``pattern[i]`` (a backslash), translated, and where it ends."""
    if i + 1 >= len(pattern):
        raise Refused("trailing backslash at end of expression")
    c = pattern[i + 1]
    nxt = i + 2
    if c in _CLASSES or c.lower() in _CLASSES:
        ranges = _CLASSES[c.lower()]
        if in_class:
            if c.isupper():
                # A negated class inside brackets has no ASCII spelling; take
                # Python's (Unicode-aware) one.
                return "\\" + c, nxt
            return ranges, nxt
        return ("[^" if c.isupper() else "[") + ranges + "]", nxt
    if c == "b" and not in_class:
        return _BOUNDARY, nxt
    if c == "B" and not in_class:
        return _NON_BOUNDARY, nxt
    if c == "A" and not in_class:
        return "\\A", nxt
    if c == "z" and not in_class:
        return "\\Z", nxt
    if c == "Q" and not in_class:
        end = pattern.find("\\E", nxt)
        literal = pattern[nxt:] if end < 0 else pattern[nxt:end]
        return "(?:" + re.escape(literal) + ")" if literal else "(?:)", len(pattern) if end < 0 else end + 2
    if c == "x":
        if nxt < len(pattern) and pattern[nxt] == "{":
            end = pattern.find("}", nxt)
            digits = pattern[nxt + 1 : end] if end > 0 else ""
            if not digits or any(d not in "0123456789abcdefABCDEF" for d in digits) or int(digits, 16) > 0x10FFFF:
                raise Refused("invalid escape sequence \\x{")
            return _codepoint(int(digits, 16)), end + 1
        digits = pattern[nxt : nxt + 2]
        if len(digits) != 2 or any(d not in "0123456789abcdefABCDEF" for d in digits):
            raise Refused("invalid escape sequence \\x")
        return _codepoint(int(digits, 16)), nxt + 2
    if c in "01234567":
        # Octal, up to three digits; a lone non-zero digit would be a
        # backreference, which RE2 does not have.
        j = nxt
        while j < len(pattern) and j < i + 4 and pattern[j] in "01234567":
            j += 1
        digits = pattern[i + 1 : j]
        if c != "0" and len(digits) == 1:
            raise Refused("backreferences are not supported")
        return _codepoint(int(digits, 8)), j
    if c in "89":
        raise Refused("backreferences are not supported")
    if c in _SIMPLE_ESCAPES:
        return "\\" + c, nxt
    if c.isascii() and (c.isalnum() or c == "_"):
        # \pL, \C, \Z, \e, ...: what RE2 refuses, and the Unicode classes
        # re cannot express.
        raise Refused(f"escape sequence \\{c} not carried over")
    if c.isascii():
        return "\\" + c, nxt  # escaped punctuation: the character itself
    raise Refused(f"invalid escape sequence \\{c}")


def _codepoint(cp: int) -> str:
    return re.escape(chr(cp))


def _class(pattern: str, i: int) -> tuple[str, int]:
    """The bracketed class at ``pattern[i]``, translated, and where it ends."""
    out = ["["]
    j = i + 1
    if j < len(pattern) and pattern[j] == "^":
        out.append("^")
        j += 1
    first = True
    while True:
        if j >= len(pattern):
            raise Refused("missing closing ]")
        c = pattern[j]
        if c == "]" and not first:
            out.append("]")
            return "".join(out), j + 1
        first = False
        if c == "[" and pattern.startswith("[:", j):
            end = pattern.find(":]", j + 2)
            if end > 0:
                name = pattern[j + 2 : end]
                negated = name.startswith("^")
                ranges = _POSIX.get(name.lstrip("^"))
                if ranges is None:
                    raise Refused(f"invalid character class range [:{name}:]")
                if negated:
                    raise Refused("negated POSIX classes are not carried over")
                out.append(ranges)
                j = end + 2
                continue
        if c == "\\":
            text, j = _escape(pattern, j, in_class=True)
            out.append(text)
            continue
        if c == "[":
            out.append("\\[")  # literal in RE2; Python would warn of a nested set
        elif c in "&~|-" and j + 1 < len(pattern) and pattern[j + 1] == c:
            out.append("\\" + c)  # a doubled set operator, which Python reserves
        else:
            out.append(c)
        j += 1


def _group_open(pattern: str, i: int) -> tuple[str, int, str | None]:
    """The group opening at ``pattern[i]``: its translation, where it ends, and
    for a bare ``(?flags)`` the flags (the text is then unused)."""
    if not pattern.startswith("(?", i):
        return "(", i + 1, None
    rest = pattern[i + 2 :]
    if rest.startswith("P<") or rest.startswith("<"):
        start = i + 2 + (2 if rest.startswith("P<") else 1)
        end = pattern.find(">", start)
        name = pattern[start:end] if end > 0 else ""
        if rest.startswith("<") and rest[1:2] in ("=", "!"):
            raise Refused("lookbehind is not supported")
        if not name or not all(ch.isalnum() or ch == "_" for ch in name):
            raise Refused("invalid named capture")
        return f"(?P<{name}>", end + 1, None
    j = i + 2
    while j < len(pattern) and pattern[j] in "imsU-":
        j += 1
    flags = pattern[i + 2 : j]
    if j >= len(pattern) or pattern[j] not in ":)":
        raise Refused("invalid or unsupported Perl syntax")  # lookahead, (?>, (?#, (?(, (?x ...
    if flags.count("-") > 1 or flags.endswith("-") or (pattern[j] == ")" and not flags):
        raise Refused("invalid or unsupported Perl syntax")
    if "U" in flags:
        raise Refused("the ungreedy flag U is not carried over")
    if pattern[j] == ":":
        return "(?" + flags + ":", j + 1, None
    return "", j + 1, flags
