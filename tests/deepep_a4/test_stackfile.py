"""Stack files read as Pulumi reads them: strings as written, namespaced keys only, by name or by path."""

from __future__ import annotations

from pathlib import Path

import pytest

from components import config
from deepep_a4 import stackfile
from deepep_a4.plan import command as plan


def project(tmp_path: Path, body: str, stack: str = "t") -> Path:
    (tmp_path / "stacks").mkdir(exist_ok=True)
    path = tmp_path / "stacks" / f"Pulumi.{stack}.yaml"
    path.write_text("config:\n" + body)
    return path


def test_unquoted_off_arrives_as_the_word_pulumi_passes() -> None:
    # PyYAML alone reads `off` as False (YAML 1.1); Pulumi's reader passes the text "off".
    cfg = stackfile.parse_text("config:\n  deepep-a4:ttl: off\n  deepep-a4:nodeCount: 4\n", "x")
    assert cfg == {"deepep-a4:ttl": "off", "deepep-a4:nodeCount": "4"}
    parsed = config.parse({"project": "my-project-1", "provisioning": "on-demand", "ttl": cfg["deepep-a4:ttl"]}, "t")
    assert parsed.ttl_seconds is None


def test_lists_arrive_as_json_like_pulumi_object_config() -> None:
    cfg = stackfile.parse_text("config:\n  deepep-a4:benchmarks: [intranode, internode]\n", "x")
    # Go's encoding/json: compact (pulumi/pulumi sdk/go/common/resource/config/object.go MarshalString).
    assert cfg["deepep-a4:benchmarks"] == '["intranode","internode"]'


def test_key_without_namespace_is_refused_not_ignored() -> None:
    with pytest.raises(stackfile.StackFileError) as err:
        stackfile.parse_text("config:\n  nodeCount: 5\n", "stacks/Pulumi.t.yaml")
    assert err.value.problems == [
        "stacks/Pulumi.t.yaml: config key 'nodeCount' has no namespace: Pulumi refuses it; write deepep-a4:nodeCount"
    ]


def test_misspelled_namespace_gets_a_did_you_mean() -> None:
    with pytest.raises(
        stackfile.StackFileError, match=r"unknown namespace 'deepep-a5'.*did you mean deepep-a4:nodeCount"
    ):
        stackfile.parse_text("config:\n  deepep-a5:nodeCount: 5\n", "x")


@pytest.mark.parametrize("key", ["gcp:project", "gcp:region", "kubernetes:context"])
def test_provider_keys_the_explicit_providers_would_ignore_are_refused(key: str) -> None:
    with pytest.raises(stackfile.StackFileError, match=r"provider is explicit and ignores"):
        stackfile.parse_text(f"config:\n  {key}: x\n", "x")


def test_every_problem_of_a_file_is_reported_at_once() -> None:
    with pytest.raises(stackfile.StackFileError) as err:
        stackfile.parse_text("config:\n  nodeCount: 5\n  gcp:project: p\n", "x")
    assert len(err.value.problems) == 2


def test_stack_by_name_or_by_file(tmp_path: Path) -> None:
    path = project(tmp_path, "  deepep-a4:project: my-project-1\n")
    assert stackfile.resolve("t", tmp_path) == ("t", tmp_path / "stacks" / "Pulumi.t.yaml")
    assert stackfile.resolve(str(path), tmp_path)[0] == "t"


@pytest.mark.parametrize("arg", ["stacks/t.yaml", "other/Pulumi.t.yaml", "nope"])
def test_a_stack_that_is_not_there_says_how_to_name_one(tmp_path: Path, arg: str) -> None:
    project(tmp_path, "  deepep-a4:project: my-project-1\n")
    with pytest.raises(stackfile.StackFileError) as err:
        stackfile.resolve(arg, tmp_path)
    assert len(err.value.problems) == 1


def test_plan_of_a_stack_file_path_and_a_namespace_typo(tmp_path: Path, monkeypatch, capsys) -> None:
    project(tmp_path, "  deepep-a4:project: my-project-1\n  deepep-a4:nodeCount: 2\n  nodecount: 5\n")
    monkeypatch.setattr(plan.plan_engine, "ROOT", tmp_path)
    out = tmp_path / "out"
    assert plan.main(["--stack", str(tmp_path / "stacks" / "Pulumi.t.yaml"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "config key 'nodecount' has no namespace" in err
    assert "Traceback" not in err
    assert not out.exists()


def test_plan_refuses_an_unwritable_out_before_planning(tmp_path: Path, monkeypatch, capsys) -> None:
    # Root ignores permission bits, so the test takes the answer of os.access, which the check asks.
    monkeypatch.setattr(plan.os, "access", lambda path, mode: False)
    ran = []
    monkeypatch.setattr(plan.plan_engine, "run_program", lambda *a, **k: ran.append(a))
    assert plan.main(["--stack", "gke-b200", "--out", str(tmp_path / "plan")]) == 2
    assert "is not writable" in capsys.readouterr().err
    assert ran == []


def test_a_key_written_twice_is_refused_with_both_values_and_lines() -> None:
    text = (
        'config:\n  deepep-a4:cudaVersion: "12.8"\n  deepep-a4:zone: us-central1-b\n  deepep-a4:cudaVersion: "12.9"\n'
    )
    with pytest.raises(stackfile.StackFileError) as err:
        stackfile.parse_text(text, "stacks/Pulumi.x.yaml")
    [line] = err.value.problems
    assert line == (
        "stacks/Pulumi.x.yaml: config key 'deepep-a4:cudaVersion' = '12.8' (line 2) and '12.9' (line 4): "
        "a key may be written once; keep the one you mean"
    )


def test_a_yaml_object_where_pulumi_yaml_declares_a_string_is_refused_as_preview_refuses_it() -> None:
    # Pulumi.yaml declares versionOverrides `type: string`; pulumi/pulumi pkg/workspace/config.go
    # validateStackConfigValue refuses an object value for it before the program runs.
    text = 'config:\n  deepep-a4:versionOverrides:\n    gdrcopy: {version: "2.6", url: "https://x", sha256: "a"}\n'
    with pytest.raises(stackfile.StackFileError) as err:
        stackfile.parse_text(text, "stacks/Pulumi.s.yaml")
    [line] = err.value.problems
    assert "Stack 's' with configuration key 'versionOverrides' must be of type 'string'" in line
    assert "write the JSON as one quoted string" in line
    quoted = 'config:\n  deepep-a4:versionOverrides: \'{"gdrcopy": {"version": "2.6"}}\'\n'
    assert stackfile.parse_text(quoted, "s") == {"deepep-a4:versionOverrides": '{"gdrcopy": {"version": "2.6"}}'}
