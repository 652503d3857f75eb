"""What preview and up would refuse in a stack file, the plan refuses first: in Pulumi's words plus the fix
(pulumi/pulumi pkg/workspace/config.go validateStackConfigValue at 1b5949891b3cefcb9974752b24a5ecef0acc86c8); and
a value YAML reads as something else than what was typed (issue 41)."""

from __future__ import annotations

import pytest

from deepep_a4 import stackfile


def refusal(body: str) -> str:
    with pytest.raises(stackfile.StackFileError) as err:
        stackfile.parse_text("config:\n" + body, "stacks/Pulumi.mine.yaml")
    [line] = err.value.problems
    return line


def test_a_list_key_given_as_a_string_as_config_set_stores_it() -> None:
    line = refusal("  deepep-a4:benchmarks: '[\"intranode\"]'\n")
    assert "Stack 'mine' with configuration key 'benchmarks' must be of type 'array<string>'" in line
    assert "give it as a YAML list (deepep-a4:benchmarks: [intranode])" in line
    assert "pulumi config set --path 'deepep-a4:benchmarks[0]' intranode" in line


def test_a_mapping_where_a_string_is_declared() -> None:
    line = refusal("  deepep-a4:ttl:\n    hours: 8\n")
    assert "Stack 'mine' with configuration key 'ttl' must be of type 'string'" in line
    assert "write one string" in line


@pytest.mark.parametrize("text", ['"False"', '"TRUE"', "'yes'"])
def test_a_capitalised_boolean_stored_as_a_string(text: str) -> None:
    line = refusal(f"  deepep-a4:sshViaIap: {text}\n")
    assert "Stack 'mine' with configuration key 'sshViaIap' must be of type 'boolean'" in line
    assert "write true or false, in lower case" in line


def test_unquoted_booleans_in_any_case_are_booleans_to_yaml_v3() -> None:
    assert stackfile.parse_text("config:\n  deepep-a4:sshViaIap: False\n", "x") == {"deepep-a4:sshViaIap": "false"}


@pytest.mark.parametrize("key", ["ttl", "nodeCount", "benchmarks", "sshViaIap"])
def test_an_emptied_value_is_null_which_no_type_takes(key: str) -> None:
    line = refusal(f"  deepep-a4:{key}:\n")
    assert f"Stack 'mine' with configuration key '{key}' must be of type" in line
    assert "the value is empty" in line and "remove the line for the default" in line


def test_unquoted_13_0_is_the_number_13() -> None:
    line = refusal("  deepep-a4:cudaVersion: 13.0\n")
    assert line == 'stacks/Pulumi.mine.yaml: deepep-a4:cudaVersion: write "13.0": YAML reads 13.0 as the number 13'
    assert stackfile.parse_text('config:\n  deepep-a4:cudaVersion: "13.0"\n', "x") == {"deepep-a4:cudaVersion": "13.0"}


@pytest.mark.parametrize(
    ("text", "what"),
    [("0777", "the number 511"), ("2026-01-02", "a time, 2026-01-02 00:00:00 +0000 UTC"), ("True", "the boolean true")],
)
def test_other_misreads_of_a_string_key(text: str, what: str) -> None:
    assert refusal(f"  deepep-a4:namePrefix: {text}\n").endswith(f'write "{text}": YAML reads {text} as {what}')


def test_an_integer_written_as_a_whole_number_passes() -> None:
    cfg = stackfile.parse_text("config:\n  deepep-a4:nodeCount: 2.0\n  deepep-a4:bootDiskGb: +300\n", "x")
    assert cfg == {"deepep-a4:nodeCount": "2", "deepep-a4:bootDiskGb": "300"}


def test_a_fraction_for_an_integer_key() -> None:
    assert "must be of type 'integer'" in refusal("  deepep-a4:nodeCount: 2.5\n")


def test_a_secret_value_is_refused_with_why() -> None:
    assert "is a secret" in refusal("  deepep-a4:project:\n    secure: v1:abc\n")


def test_a_yaml_syntax_error_names_the_key_near_it() -> None:
    line = refusal("  deepep-a4:nodeCount: 2\n  deepep-a4:ttl: [8h\n  deepep-a4:zone: x\n")
    assert "not valid YAML at line 4 (near key deepep-a4:ttl)" in line  # the unclosed [ is found a line later
    line = refusal("  deepep-a4:nodeCount: 2\n deepep-a4:ttl: 8h\n")
    assert "not valid YAML at line 3 (near key deepep-a4:ttl)" in line


def test_a_deepep_a4_block_gets_advice_that_fits() -> None:
    line = refusal("  deepep-a4:\n    ttl: 8h\n")
    assert "holds a block" in line and "deepep-a4:ttl: 8h" in line and "deepep-a4:deepep-a4" not in line


def test_a_store_project_key_in_a_benchmark_stack_gets_advice_that_fits() -> None:
    line = refusal("  deepep-a4-store:project: my-project-1\n")
    assert "store/Pulumi.<stack>.yaml" in line and "deepep-a4:artifactStore" in line
    assert "did you mean" not in line
