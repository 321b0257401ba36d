"""META-INF/vault/filter.xml: the filter sets of a package (a root, an import mode, include and
exclude patterns), read and written as FileVault's ``DefaultWorkspaceFilter`` does.

A pattern is a Java regular expression matched against a whole path. scd evaluates it with
Python's ``re`` after turning Java's ``\\Q...\\E`` quoting into escapes; a pattern ``re`` cannot
compile is refused (DecodeError), as are more than MAX_RULES rules or a pattern longer than
MAX_PATTERN_CHARS.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from journal.content.filevault import xml_io
from runtime.errors import DecodeError

FILTER_PATH = "META-INF/vault/filter.xml"
MODES = ("replace", "merge", "update", "merge_properties", "update_properties")
MAX_RULES = 1_000
MAX_PATTERN_CHARS = 1_000
_QUOTED = re.compile(r"\\Q(.*?)(?:\\E|$)", re.DOTALL)


@dataclass(frozen=True)
class Rule:
    include: bool
    pattern: str
    match_properties: bool = False


@dataclass(frozen=True)
class FilterSet:
    root: str
    mode: str = "replace"
    rules: tuple[Rule, ...] = ()

    def covers(self, path: str) -> bool:
        """FileVault's ``PathFilterSet.contains``: within the root, then the last rule that
        matches decides (with no match: excluded if the first rule includes)."""
        if not (path == self.root or self.root == "/" or path.startswith(self.root + "/")):
            return False
        node_rules = [r for r in self.rules if not r.match_properties]
        if not node_rules:
            return True
        covered = not node_rules[0].include
        for rule in node_rules:
            if _compiled(rule.pattern).fullmatch(path):
                covered = rule.include
        return covered

    @property
    def shallow(self) -> bool:
        """Only the root itself: the one include Sling writes for a path that is not deep."""
        return (
            len(self.rules) == 1
            and self.rules[0].include
            and literal(self.rules[0].pattern) == self.root
        )


def quote(path: str) -> str:
    """The pattern matching ``path`` only, in the form Sling writes (``/\\Q...\\E``)."""
    rest = path[1:] if path.startswith("/") else path
    quoted = "\\Q" + rest.replace("\\E", "\\E\\\\E\\Q") + "\\E"
    return ("/" if path.startswith("/") else "") + quoted


def _python_pattern(pattern: str) -> str:
    return _QUOTED.sub(lambda m: re.escape(m.group(1)), pattern)


_cache: dict[str, re.Pattern[str]] = {}


def _compiled(pattern: str) -> re.Pattern[str]:
    found = _cache.get(pattern)
    if found is None:
        try:
            found = re.compile(_python_pattern(pattern), re.DOTALL)
        except re.error as exc:
            raise DecodeError(
                f"filter pattern {pattern[:100]!r} cannot be evaluated: {exc}"
            ) from None
        if len(_cache) > 10_000:
            _cache.clear()
        _cache[pattern] = found
    return found


def literal(pattern: str) -> str | None:
    """The one path ``pattern`` matches when it is a quoted or escaped literal, else None."""
    python = _python_pattern(pattern)
    out: list[str] = []
    i = 0
    while i < len(python):
        ch = python[i]
        if ch == "\\":
            if i + 1 >= len(python) or python[i + 1].isalnum():
                return None
            out.append(python[i + 1])
            i += 2
        elif ch in ".^$*+?()[]{}|":
            return None
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def parse_filter(data: bytes) -> list[FilterSet]:
    root = xml_io.parse(data, FILTER_PATH, max_elements=200_000, max_attributes=10)
    if root.name[1] != "workspaceFilter":
        raise DecodeError(f"{FILTER_PATH}: root element is not workspaceFilter")
    sets: list[FilterSet] = []
    rules_seen = 0
    for element in root.children:
        if element.name[1] != "filter":
            continue
        attrs = {local: v for (_, local, _), v in element.attributes.items()}
        path = attrs.get("root")
        if not path:
            raise DecodeError(f"{FILTER_PATH}: a filter without a root")
        mode = attrs.get("mode", "replace").lower()
        if mode not in MODES:
            raise DecodeError(f"{FILTER_PATH}: filter {path!r} has an unknown mode {mode!r}")
        rules: list[Rule] = []
        for child in element.children:
            if child.name[1] not in ("include", "exclude"):
                continue
            rule_attrs = {local: v for (_, local, _), v in child.attributes.items()}
            pattern = rule_attrs.get("pattern", "")
            rules_seen += 1
            if rules_seen > MAX_RULES or len(pattern) > MAX_PATTERN_CHARS:
                raise DecodeError(f"{FILTER_PATH}: more than {MAX_RULES} rules or a huge pattern")
            _compiled(pattern)
            match_properties = rule_attrs.get("matchProperties", "false").lower() == "true"
            rules.append(Rule(child.name[1] == "include", pattern, match_properties))
        sets.append(FilterSet(path, mode, tuple(rules)))
    return sets


def write_filter(sets: list[FilterSet]) -> bytes:
    lines = ['<?xml version="1.0" encoding="UTF-8"?>', '<workspaceFilter version="1.0">']
    for fs in sets:
        mode = "" if fs.mode == "replace" else f' mode="{fs.mode}"'
        head = f'    <filter root="{xml_io.attribute(fs.root)}"{mode}'
        if not fs.rules:
            lines.append(head + "/>")
            continue
        lines.append(head + ">")
        for rule in fs.rules:
            tag = "include" if rule.include else "exclude"
            lines.append(f'        <{tag} pattern="{xml_io.attribute(rule.pattern)}"/>')
        lines.append("    </filter>")
    lines.append("</workspaceFilter>")
    return ("\n".join(lines) + "\n").encode()
