"""The configuration reference, generated from the schema dataclasses.

Every group the runner validates (the run itself, backbone, method, bench, logger, paths), every
entry of the registries (architectures' `backbone.model` fields, methods, benchmarks, NoteBank's
routers, training recipes) and every field of each: its type, default, the allowed values its
`__post_init__` states, and the comment that explains it in the schema's source (the field's
trailing `# ...`, the comment lines right above it, or a string right below it).

mkdocs runs this as a hook (mkdocs.yml `hooks:`) and serves the result as
reference/configuration.md; a field without an explanation is a warning, so `mkdocs build --strict`
fails on it, and tests/docs/test_docs_config_reference.py names such fields.

    python docs/hooks/config_reference.py          # print the page (what the site shows)
"""

from __future__ import annotations

import ast
import dataclasses
import html
import inspect
import io
import logging
import sys
import textwrap
import tokenize
from dataclasses import dataclass
from typing import Any, Iterator

PAGE = "reference/configuration.md"
log = logging.getLogger("mkdocs.plugins.config_reference")

# the registries whose membership a schema checks with `self.<field> not in <REGISTRY>`
REGISTRY_NAMES = ("ARCHS", "METHODS", "ROUTERS", "BENCHES", "RECIPES")


@dataclass
class FieldDoc:
    """One row of the reference."""

    path: str  # how the user writes it, e.g. method.replay_budget
    type: str
    default: str
    allowed: str  # "" when the schema states no limit
    explanation: str  # "" when the source has none (a defect the test reports)
    source: str  # module:Class that declares the field


def _comments_by_line(source: str) -> dict[int, str]:
    comments = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string.lstrip("#").strip()
    return comments


def _class_source(cls: type) -> tuple[ast.ClassDef, list[str], dict[int, str]]:
    lines, _ = inspect.getsourcelines(cls)
    source = textwrap.dedent("".join(lines))
    tree = ast.parse(source)
    return tree.body[0], source.splitlines(), _comments_by_line(source)


def _own_explanations(cls: type) -> dict[str, str]:
    """The explanation of each field `cls` itself declares, from its source."""
    node, lines, comments = _class_source(cls)
    found = {}
    for i, stmt in enumerate(node.body):
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        parts = []
        above = stmt.lineno - 1
        block = []
        while above >= 1 and lines[above - 1].strip().startswith("#"):
            block.insert(0, comments.get(above, ""))
            above -= 1
        parts.extend(block)
        for line in range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1):
            if line in comments and not lines[line - 1].strip().startswith("#"):
                parts.append(comments[line])
        after = node.body[i + 1] if i + 1 < len(node.body) else None
        if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str):
            parts.append(" ".join(after.value.value.split()))
        found[stmt.target.id] = " ".join(p for p in parts if p)
    return found


def _post_init_rules(cls: type) -> dict[str, str]:
    """Allowed values stated by the checks in `__post_init__` of `cls` and its bases, by field name."""
    rules: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if "__post_init__" not in vars(klass):
            continue
        module = sys.modules[klass.__module__]
        node, _, _ = _class_source(klass)
        for call in ast.walk(node):
            if isinstance(call, ast.Compare) and len(call.ops) == 1 and isinstance(call.ops[0], ast.NotIn):
                left, right = call.left, call.comparators[0]
                if (isinstance(left, ast.Attribute) and isinstance(left.value, ast.Name) and left.value.id == "self"
                        and isinstance(right, ast.Name) and right.id in REGISTRY_NAMES):
                    registry = getattr(module, right.id)
                    rules[left.attr] = "registered: " + ", ".join(f"`{n}`" for n in registry.names())
                continue
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.args
                    and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)):
                continue
            name = call.args[0].value.split(".")[-1]
            kind = call.func.id
            if kind in ("_choice", "_tasks") and len(call.args) >= 3:
                values = _value_of(call.args[2], module)
                if values is not None:
                    rules[name] = ", ".join(f"`{v}`" for v in values)
            elif kind in ("_at_least", "_optional_at_least") and len(call.args) >= 3:
                low = _value_of(call.args[2], module)
                if low is not None:
                    rules.setdefault(name, f">= {low}")
    return rules


def _value_of(node: ast.expr, module: Any) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError:
        if isinstance(node, ast.Name):
            return getattr(module, node.id, None)
        return None


def _default_text(field: dataclasses.Field) -> tuple[str, Any]:
    if field.default is not dataclasses.MISSING:
        value = field.default
    elif field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
    else:
        return "required", None
    if dataclasses.is_dataclass(value):
        return "", value
    if value is None:
        return "null", value
    if isinstance(value, bool):
        return str(value).lower(), value
    return repr(value) if isinstance(value, str) else str(value), value


def _type_text(field: dataclasses.Field) -> str:
    kind = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", str(field.type))
    return kind.replace("typing.", "")


def schema_fields(schema: type, prefix: str) -> Iterator[FieldDoc]:
    """Every field of `schema` (nested dataclasses flattened, `prefix.sub.field`)."""
    explanations: dict[str, tuple[str, str]] = {}
    for klass in reversed(schema.__mro__):
        if dataclasses.is_dataclass(klass) and "__dataclass_fields__" in vars(klass):
            own = {name for name, value in vars(klass).get("__annotations__", {}).items()}
            # a subclass that only changes a field's default keeps its base's explanation
            for name, text in _own_explanations(klass).items():
                if name in own and (text or name not in explanations):
                    explanations[name] = (text, f"{klass.__module__}:{klass.__qualname__}")
    rules = _post_init_rules(schema)
    for field in dataclasses.fields(schema):
        default, value = _default_text(field)
        text, source = explanations.get(field.name, ("", f"{schema.__module__}:{schema.__qualname__}"))
        path = f"{prefix}.{field.name}" if prefix else field.name
        if dataclasses.is_dataclass(value):
            yield from schema_fields(type(value), path)
            continue
        element = _list_element(schema, field)
        if element is not None:  # a list of dataclasses (a recipe's stages): one entry's fields
            yield FieldDoc(path, _type_text(field), default, rules.get(field.name, ""), text, source)
            yield from schema_fields(element, f"{path}[i]")
            continue
        yield FieldDoc(path, _type_text(field), default, rules.get(field.name, ""), text, source)


def _list_element(schema: type, field: dataclasses.Field) -> type | None:
    """X when the field is written `list[X]` and X is a dataclass of the schema's module."""
    kind = _type_text(field)
    if not (kind.startswith("list[") and kind.endswith("]")):
        return None
    element = getattr(sys.modules[schema.__module__], kind[5:-1], None)
    return element if dataclasses.is_dataclass(element) else None


@dataclass
class Section:
    """One schema's table: a heading, what selects it and its fields."""

    title: str
    selects: str
    schema: type
    prefix: str
    skip: tuple[str, ...] = ()

    def fields(self) -> list[FieldDoc]:
        return [f for f in schema_fields(self.schema, self.prefix) if f.path not in self.skip]


def sections() -> list[tuple[str, str, list[Section]]]:
    """(group heading, its introduction, its schemas) for every group, in the page's order."""
    from memexp.core.registry import ARCHS, BENCHES, METHODS, RECIPES
    from memexp.core.schema import BackboneConfig, LoggerConfig, PathsConfig, RunConfig

    groups = [
        ("Run", "The top of every run (`python -m memexp run key=value`); the groups below fill "
                "`backbone`, `method`, `bench`, `logger` and `paths`.",
         [Section("RunConfig", "always", RunConfig, "", skip=("backbone", "method", "bench", "logger"))]),
        ("backbone", "Which checkpoint, how it runs (`backbone=<file>` picks a file of conf/backbone/).",
         [Section("BackboneConfig", "every backbone", BackboneConfig, "backbone")]),
        ("backbone.model (per architecture)", "The architecture's own fields: read from the checkpoint's "
         "config.json, or given here to build a model with random weights (`backbone.pretrained=null`).",
         [Section(e.name, f"`backbone.arch={e.name}`", e.load_schema(), "backbone.model") for e in ARCHS]),
        ("method", "The memory method (`method=<name>`); each schema adds its fields to `method.name`.",
         [Section(e.name, f"`method={e.name}`", e.load_schema(), "method") for e in METHODS]),
        ("bench", "The benchmark (`bench=<name>`).",
         [Section(e.name, f"`bench={e.name}`", e.load_schema(), "bench") for e in BENCHES]),
        ("logger", "Where results go besides the run folder.", [Section("LoggerConfig", "`logger=...`", LoggerConfig, "logger")]),
        ("paths", "Where memexp writes.", [Section("PathsConfig", "always", PathsConfig, "paths")]),
        ("recipe (training)", "`python -m memexp train recipe=<name> key=value`: the training recipes.",
         [Section(e.name, f"`recipe={e.name}`", e.load_schema(), "recipe") for e in RECIPES]),
    ]
    return groups


def unexplained() -> list[str]:
    """`path (module:Class)` of every field whose schema source gives no explanation."""
    missing = []
    for _, _, group in sections():
        for section in group:
            missing += [f"{f.path} ({f.source})" for f in section.fields() if not f.explanation]
    return sorted(set(missing))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _prose(text: str) -> str:
    """A source comment shown as text: `<run>` and `*` are not HTML or emphasis on the page."""
    return _cell(html.escape(text, quote=False).replace("*", "\\*").replace("_", "\\_"))


def _code(text: str) -> str:
    return f"`{text}`" if text and text != "required" else text


def render() -> str:
    from memexp.core.registry import ROUTERS

    out = ["# Configuration reference", "",
           "Generated from the schema dataclasses by `docs/hooks/config_reference.py` each time the site "
           "builds: every field, its type, its default, the values its schema allows and the comment that "
           "explains it in the source. A YAML file of the config tree (conf/) only fills these fields; "
           "`python -m memexp run --cfg job` prints the composed values of one run.", ""]
    for title, intro, group in sections():
        out += [f"## {title}", "", intro, ""]
        for section in group:
            if len(group) > 1 or section.title not in ("RunConfig",):
                out += [f"### {section.title}", "",
                        f"Selected by {section.selects}; schema `{section.schema.__module__}:{section.schema.__qualname__}`.", ""]
            out += ["| field | type | default | allowed | what it means |", "|---|---|---|---|---|"]
            for f in section.fields():
                out.append(f"| `{f.path}` | `{_cell(f.type)}` | {_cell(_code(f.default))} | {_cell(f.allowed)} | "
                           f"{_prose(f.explanation) or '**no explanation in the source**'} |")
            out.append("")
        if title == "method":
            out += ["### NoteBank's routers", "", "`method.router=<name>` (registered in memexp.core.registry.ROUTERS):", ""]
            out += [f"- `{e.name}`: `{e.target}`" for e in ROUTERS]
            out.append("")
    return "\n".join(out)


def on_files(files: Any, config: Any) -> Any:
    """mkdocs hook: add the generated page; a field without an explanation is a warning (fails --strict)."""
    from mkdocs.structure.files import File

    for missing in unexplained():
        log.warning("config reference: no explanation in the source for %s", missing)
    files.append(File.generated(config, PAGE, content=render()))
    return files


if __name__ == "__main__":
    print(render())
