"""A stack file as the Pulumi CLI reads it, in the words of its own refusals plus the fix (stackfile.py's part).

The model is config_pipeline.py; this module turns what it finds into one line per problem and gives the
map the program receives. Beyond Pulumi's own refusals it refuses a value yaml.v3 reads as something else
than what was typed (`cudaVersion: 13.0` arrives as "13"): Pulumi passes that on without a word.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components.config.keys import KEYS_BY_NAME, PROJECT_NAME
from deepep_a4.engine import config_pipeline as pipeline
from deepep_a4.engine import yaml_v3

_KEY_LINE = re.compile(r"^\s*(?:-\s+)?([^\s#:'\"][^:#]*:?[^\s:#]*)\s*:(?:\s|$)")


@dataclass
class EngineView:
    config: dict[str, str] = field(default_factory=dict)  # the keys the stack writes, as the program gets them
    problems: list[str] = field(default_factory=list)


def key_near(text: str, line: int) -> str:
    """The key on the 0-based `line` or the nearest one above it."""
    lines = text.splitlines()
    for index in range(min(line, len(lines) - 1), -1, -1):
        m = _KEY_LINE.match(lines[index])
        if m:
            return m.group(1)
    return ""


def _stack_name(where: str) -> str:
    name = Path(where).name
    return name[len("Pulumi.") : -len(".yaml")] if name.startswith("Pulumi.") and name.endswith(".yaml") else name


def _example(name: str) -> str:
    key = KEYS_BY_NAME.get(name)
    default = list(key.default) if key is not None and isinstance(key.default, (list, tuple)) else []
    return str(default[0]) if default else "VALUE"


def _type_fix(full: str, name: str, ctype: pipeline.ConfigType, value: pipeline.Value) -> str:
    kind = ctype.type
    if kind == "array":
        item = _example(name)
        return (
            f"; `pulumi config set` stores a string: give it as a YAML list ({full}: [{item}]) or set items with "
            f"`pulumi config set --path '{full}[0]' {item}`"
        )
    if kind == "boolean":
        return f"; write true or false, in lower case ({value.text!r} is a string to Pulumi's check)"
    if kind == "integer":
        return f"; write a whole number such as {KEYS_BY_NAME[name].default if name in KEYS_BY_NAME else 1}"
    if value.object and name == "versionOverrides":
        return f"; write the JSON as one quoted string: {full}: '{{\"gdrcopy\": {{...}}}}' (docs/installer.md)"
    if value.object:
        return '; write one string on the key\'s line (quote it: "..."), not a list or a block'
    return ""


def _misread(full: str, written: Any, got: Any, value: pipeline.Value, kind: str | None) -> str | None:
    """A plain scalar yaml.v3 typed, whose text reaches the program changed; None when it arrives as typed."""
    if isinstance(got, str) and not isinstance(got, yaml_v3.GoTime):
        return None
    if not isinstance(written, str) or value.text == written:
        return None
    if kind == "boolean" and isinstance(got, bool):
        return None  # True -> "true": what a boolean key means
    if kind == "integer" and isinstance(got, (int, float)) and written.lstrip("+").replace("_", "") == value.text:
        return None
    if kind == "integer" and isinstance(got, float) and re.fullmatch(r"[+-]?\d+\.0*", written):
        return None  # 2.0 -> "2"
    if isinstance(got, yaml_v3.GoTime):
        what = f"a time, {value.text}"
    elif isinstance(got, bool):
        what = f"the boolean {value.text}"
    else:
        what = f"the number {value.text}"
    return f'{full}: write "{written}": YAML reads {written} as {what}'


def engine_problems(text: str, where: str, written: dict[Any, Any], root: Path | None) -> EngineView:
    """The stack file's `config:` read by yaml.v3 and checked as preview and up check it. `written` is the
    same mapping with every scalar as its source text (stackfile's loader)."""
    from deepep_a4.paths import project_root

    project = pipeline.load_project(root or project_root())
    stack = _stack_name(where)
    data = yaml_v3.load(text) or {}
    cfg = data.get("config") or {}
    view = EngineView()
    values = {str(k): pipeline.stack_value(v) for k, v in cfg.items()}
    for full, value in values.items():
        namespace, _, name = full.partition(":")
        ctype = project.config.get(name) if namespace == project.name else project.config.get(full)
        got = cfg[full]
        view.config[full] = value.text
        if value.secure:
            view.problems.append(
                f"{full} is a secret (`pulumi config set --secret`): no {PROJECT_NAME} setting is one, and the plan "
                "holds no passphrase to read it; set it in plain text"
            )
            continue
        if ctype is None or ctype.type is None:
            continue
        if got is None:
            shown = KEYS_BY_NAME[name].default if name in KEYS_BY_NAME else ""
            view.problems.append(
                pipeline.TYPE_ERROR.format(stack=stack, key=name, type=pipeline.type_name(ctype))
                + f": the value is empty (YAML reads `{full}:` with nothing after it as null); write a value, or "
                f"remove the line for the default ({shown!r})"
            )
            continue
        error = pipeline.type_errors(stack, _only(project, name), {pipeline.full_key(project, name): value})
        if error:
            view.problems.append(error[name] + _type_fix(full, name, ctype, value))
            continue
        misread = _misread(full, written.get(full), got, value, ctype.type)
        if misread:
            view.problems.append(misread)
    _, missing = pipeline.merge(project, values)
    view.problems += [pipeline.MISSING_ERROR.format(stack=stack, key=key) for key in missing]
    return view


def _only(project: pipeline.Project, name: str) -> pipeline.Project:
    return pipeline.Project(project.name, {name: project.config[name]})


def merged(stack_cfg: dict[str, str], root: Path) -> dict[str, str]:
    """The stack's keys (program texts) and, for every other key, Pulumi.yaml's value or default."""
    project = pipeline.load_project(root)
    values = {k: pipeline.Value(v) for k, v in stack_cfg.items()}
    everything, _ = pipeline.merge(project, values)
    return {**pipeline.program_config(everything), **stack_cfg}
