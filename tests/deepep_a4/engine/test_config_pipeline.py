"""The model of the Pulumi CLI's config pipeline (deepep_a4/engine/), against the upstream sources' own examples,
and the done-when of issue 41: every example stack, merged with Pulumi.yaml's defaults as mergeConfig merges it,
plans."""

from __future__ import annotations

from pathlib import Path

import pytest

from components import config
from deepep_a4 import stackfile
from deepep_a4.engine import config_pipeline as pipeline
from deepep_a4.engine import yaml_v3
from deepep_a4.plan import engine as plan_engine

ROOT = plan_engine.ROOT
EXAMPLES = ["gke-b200", "gce-b200", "gke-b200-ubuntu", "gce-b200-ubuntu"]


# go-yaml/yaml v3.0.1 (f6f7691b1fdeb513f56608cd2c32c51f8194bf51) decode_test.go's `unmarshalTests` into
# map[string]interface{}: the same text gives the same value.
@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("v: hi", "hi"),
        ("v: true", True),
        ("v: 10", 10),
        ("v: 0b10", 2),
        ("v: 0xA", 10),
        ("v: 4294967296", 4294967296),
        ("v: 0.1", 0.1),
        ("v: .1", 0.1),
        ("v: .Inf", float("inf")),
        ("v: -10", -10),
        ("v: -.1", -0.1),
        ("v: 0o10", 8),
        ("v: 1_000", 1000),
        ("v: ~", None),
        ("v:", None),
        ("v: off", "off"),  # YAML 1.1's boolean is a word to yaml.v3
        ("v: 'true'", "true"),
        ("v: 13.0", 13.0),
    ],
)
def test_yaml_v3_scalars_as_go_yaml_decodes_them(text: str, value: object) -> None:
    assert yaml_v3.load(text) == {"v": value}


@pytest.mark.parametrize(
    ("raw", "text", "is_object"),
    [
        (13.0, "13", False),  # object.go MarshalString: float64 -> its JSON text
        (True, "true", False),
        (2, "2", False),
        ("13.0", "13.0", False),
        (None, "null", True),  # an emptied value is a JSON null object
        (["a", "b"], '["a","b"]', True),
        ({"b": 1, "a": "<"}, '{"a":"\\u003c","b":1}', True),
    ],
)
def test_stack_values_as_config_value_stores_them(raw: object, text: str, is_object: bool) -> None:
    value = pipeline.stack_value(raw)
    assert (value.text, value.object) == (text, is_object)


def test_a_project_key_with_neither_default_nor_value_is_required() -> None:
    project = pipeline.project_from_text(
        "name: p\nconfig:\n  a:\n    type: string\n  b:\n    type: integer\n    default: 2\n"
        "  other:x:\n    type: string\n"
    )
    merged, missing = pipeline.merge(project, {})
    assert missing == ["a"]  # other:x is not the project's namespace: not required (config.go mergeConfig)
    assert merged == {"p:b": pipeline.Value("2")}
    assert pipeline.MISSING_ERROR.format(stack="s", key="a") == "Stack 's' is missing configuration value 'a'"


def test_the_stack_value_wins_over_the_default() -> None:
    project = pipeline.project_from_text("name: p\nconfig:\n  n:\n    type: integer\n    default: 2\n")
    merged, _ = pipeline.merge(project, {"p:n": pipeline.Value("5")})
    assert merged["p:n"].text == "5"


@pytest.mark.parametrize(
    ("type_", "items", "content", "ok"),
    [
        # sdk/go/common/workspace/project.go ValidateConfigValue
        ("integer", None, "12", True),
        ("integer", None, "12.5", False),
        ("integer", None, "", False),
        ("boolean", None, "true", True),
        ("boolean", None, "False", False),
        ("boolean", None, "yes", False),
        ("string", None, "x", True),
        ("string", None, {"a": "b"}, False),
        ("array", {"type": "string"}, ["a"], True),
        ("array", {"type": "string"}, '["a"]', False),
    ],
)
def test_validate_config_value(type_: str, items: dict | None, content: object, ok: bool) -> None:
    assert pipeline.validate_value(type_, items, content) is ok


def test_pulumi_yaml_defaults_all_reach_the_program() -> None:
    project = pipeline.load_project(ROOT)
    merged = stackfile.merged(stackfile.read("gke-b200", ROOT), ROOT)
    assert set(stackfile.project_keys(merged)) == {k for k in project.config if ":" not in k}
    assert merged["deepep-a4:benchmarks"].startswith('["')  # a list default is a JSON object value
    assert merged["pulumi:disable-default-providers"] == '["kubernetes"]'


@pytest.mark.parametrize("stack", EXAMPLES)
def test_every_example_stack_merged_as_merge_config_does_plans(stack: str) -> None:
    written = stackfile.read(stack, ROOT)
    merged = stackfile.merged(written, ROOT)
    assert len(merged) > len(written)
    # Every default counted as written is what refused them all (issue 41): the rules must not count them.
    with pytest.raises(config.ConfigError):
        config.parse(stackfile.project_keys(merged), stack)
    assert stackfile.parse_stack(stack, ROOT).stack == stack
    # The program itself, handed the merged map as `pulumi up` hands it, reads its stack file for what was written.
    result, _ = plan_engine.run_program(stack, merged)
    assert result.resources


def test_the_program_counts_a_value_not_from_the_file_that_differs_from_the_default_as_written() -> None:
    raw = stackfile.project_keys(stackfile.merged(stackfile.read("gke-b200", ROOT), ROOT))
    assert "gceImage" not in config.written_keys(raw, set())  # the merged default
    raw["gceImage"] = "projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64"  # an ESC value
    assert "gceImage" in config.written_keys(raw, set())
    with pytest.raises(config.ConfigError, match=r"gceImage.*is read only on platform gce"):
        config.parse(raw, "gke-b200", written=config.written_keys(raw, set()))


def test_a_key_written_in_the_file_with_the_default_value_still_counts(tmp_path: Path) -> None:
    raw = stackfile.project_keys(stackfile.merged(stackfile.read("gke-b200", ROOT), ROOT))
    assert "terminationAction" in config.written_keys(raw, {"terminationAction"})
    with pytest.raises(config.ConfigError, match=r"terminationAction.*is read only on platform gce"):
        config.parse(raw, "gke-b200", written=config.written_keys(raw, {"terminationAction"}))
