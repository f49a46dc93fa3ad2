"""The configuration reference is generated from the schema dataclasses: every field of every
registered schema is listed, with the values its schema states, and none lacks an explanation."""

import dataclasses
from dataclasses import dataclass, field
from typing import Optional

from docs_hooks import load_hook

from memexp.core.registry import ARCHS, BENCHES, METHODS, RECIPES, ROUTERS
from memexp.core.schema import BackboneConfig, LoggerConfig, PathsConfig, RunConfig

reference = load_hook("config_reference")


def rows():
    return {f.path: f for _, _, group in reference.sections() for s in group for f in s.fields()}


def rows_of(schema, prefix):
    return {f.path: f for f in reference.schema_fields(schema, prefix)}


def test_every_schema_field_has_an_explanation():
    missing = reference.unexplained()
    assert not missing, ("schema fields without an explanation (add a `# ...` comment beside or above "
                         "the field in its schema): " + ", ".join(missing))


def test_every_registered_schema_and_every_field_is_listed():
    page = reference.render()
    schemas = [(RunConfig, ""), (BackboneConfig, "backbone"), (LoggerConfig, "logger"), (PathsConfig, "paths")]
    schemas += [(e.load_schema(), "backbone.model") for e in ARCHS]
    schemas += [(e.load_schema(), "method") for e in METHODS]
    schemas += [(e.load_schema(), "bench") for e in BENCHES]
    schemas += [(e.load_schema(), "recipe") for e in RECIPES]
    for schema, prefix in schemas:
        assert f"`{schema.__module__}:{schema.__qualname__}`" in page or schema is RunConfig
        for f in dataclasses.fields(schema):
            if f.name in ("backbone", "method", "bench", "logger") and schema is RunConfig:
                continue
            path = f"{prefix}.{f.name}" if prefix else f.name
            assert f"`{path}" in page, f"{schema.__qualname__}.{f.name} is missing from the reference"
    for router in ROUTERS.names():
        assert f"- `{router}`:" in page


def test_rows_carry_type_default_allowed_values_and_explanation():
    # the values below are read off the schemas' source by hand, not computed by the generator
    notebank = rows_of(METHODS.get("notebank").load_schema(), "method")
    replay = notebank["method.replay_budget"]
    assert (replay.type, replay.default, replay.allowed) == ("int", "2", ">= 1")
    assert replay.explanation == "R: notes replayed per question"
    assert notebank["method.write_budget"].allowed == "`1`, `2`"
    assert notebank["method.address_dim"].default == "16"
    assert notebank["method.layers"].default == "null"
    assert notebank["method.layers"].explanation.startswith("L (Eq. 2-5): the recurrent layers")
    assert "`bm25`" in notebank["method.router"].allowed and "`bge`" in notebank["method.router"].allowed
    # a field only its base class declares keeps the base's explanation
    assert notebank["method.name"].explanation.startswith("a name in memexp.core.registry.METHODS")
    assert notebank["method.name"].default == "'notebank'"

    backbone = rows_of(BackboneConfig, "backbone")
    assert backbone["backbone.dtype"].allowed == "`auto`, `float32`, `bfloat16`, `float16`"
    assert backbone["backbone.chat"].default == "false"
    assert "`gdn`" in backbone["backbone.arch"].allowed and "`llama`" in backbone["backbone.arch"].allowed

    run = rows()
    assert run["paths.runs"].default == "'outputs/runs'"
    assert run["kernels"].allowed == "`auto`, `triton`, `torch`"
    # a recipe's stages: the list itself and one stage's fields
    assert "recipe.stages" in run and "recipe.stages[i].lr" in run


def test_a_field_without_a_comment_is_reported():
    @dataclass
    class Documented:
        explained: int = 1  # a trailing comment explains this one
        # a comment above explains this one
        above: Optional[str] = None
        silent: list = field(default_factory=list)

    found = rows_of(Documented, "x")
    assert found["x.explained"].explanation == "a trailing comment explains this one"
    assert found["x.above"].explanation == "a comment above explains this one"
    assert found["x.silent"].explanation == ""
    assert found["x.silent"].default == "[]"
