"""Java properties files (server.properties, client.properties) as ``java.util.Properties.load`` reads them."""

from __future__ import annotations

import re

from kbroker.config.errors import ConfigError

_WHITESPACE = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str, where: str = "<properties>") -> list[tuple[str, str, int]]:
    """(key, value, line number) of each entry, as java.util.Properties.load reads them; last one wins."""
    lines = re.split(r"\r\n|\r|\n", text)
    entries = []
    index = 0
    while index < len(lines):
        line_number = index + 1
        logical = lines[index].lstrip(_WHITESPACE)
        index += 1
        if not logical or logical[0] in "#!":
            continue
        while _ends_in_escape(logical):
            logical = logical[:-1]
            if index < len(lines):
                logical += lines[index].lstrip(_WHITESPACE)
                index += 1
        key_end = _key_end(logical)
        value_start = key_end
        while value_start < len(logical) and logical[value_start] in _WHITESPACE:
            value_start += 1
        if value_start < len(logical) and logical[value_start] in "=:":
            value_start += 1
        while value_start < len(logical) and logical[value_start] in _WHITESPACE:
            value_start += 1
        location = f"{where}:{line_number}"
        key, value = _unescape(logical[:key_end], location), _unescape(logical[value_start:], location)
        entries.append((key, value, line_number))
    return entries


def _ends_in_escape(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _key_end(line: str) -> int:
    index = 0
    while index < len(line) and line[index] not in "=:" + _WHITESPACE:
        index += 2 if line[index] == "\\" else 1
    return min(index, len(line))


def _unescape(raw: str, location: str) -> str:
    out = []
    index = 0
    while index < len(raw):
        char = raw[index]
        if char != "\\" or index + 1 == len(raw):
            out.append(char if char != "\\" else "")
            index += 1
        elif raw[index + 1] == "u":
            digits = raw[index + 2 : index + 6]
            if not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise ConfigError(f"malformed \\uxxxx escape {raw[index:index + 6]!r} at {location}")
            out.append(chr(int(digits, 16)))
            index += 6
        else:
            out.append(_ESCAPES.get(raw[index + 1], raw[index + 1]))
            index += 2
    text = "".join(out)
    try:  # \uD83D\uDE00: two escaped UTF-16 halves make one character, as in Java
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    except UnicodeDecodeError:
        return text
