"""Files generated from the key table: Pulumi.yaml's `config:` schema and docs/settings.md.

    .venv/bin/python -m deepep_a4.schema --write     # after editing keys.py

Tests compare both files with what this module generates, so the table, the schema Pulumi checks and
the settings reference cannot drift apart.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from components.config.keys import KEYS, PROJECT_NAME, Key
from deepep_a4.paths import project_root

PULUMI_TYPES = {str: "string", int: "integer", bool: "boolean", list: "array"}
# Project-level config that is not ours to declare key by key.
FIXED_CONFIG: dict[str, Any] = {"pulumi:disable-default-providers": ["kubernetes"]}
HEADER = (
    "# Project file. The config schema below is generated from components/config/keys.py\n"
    "# (`.venv/bin/python -m deepep_a4.schema --write`); tests/components/config/test_config.py keeps them equal.\n"
)
PROJECT: dict[str, Any] = {
    "name": PROJECT_NAME,
    "description": (
        "NVIDIA B200 (A4) machines on Google Cloud with DeepEP installed and benchmarked, as GKE node pools or GCE VMs."
    ),
    "runtime": {"name": "python", "options": {"toolchain": "pip", "virtualenv": ".venv"}},
    "stackConfigDir": "stacks",
    # up, preview and destroy read the cloud first: a VM the TTL or a preemption deleted is then gone from the
    # state, and destroy does not fail on it (https://www.pulumi.com/docs/iac/concepts/projects/project-file/).
    "options": {"refresh": "always"},
}


def _description(key: Key) -> str:
    if key.choices:
        return f"{key.description} One of: {', '.join(key.choices)}."
    return key.description


def pulumi_entry(key: Key) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": PULUMI_TYPES[key.kind], "description": _description(key)}
    if key.kind is list:
        entry["items"] = {"type": "string"}
    entry["default"] = key.default
    return entry


def pulumi_project() -> dict[str, Any]:
    return {**PROJECT, "config": {**FIXED_CONFIG, **{k.name: pulumi_entry(k) for k in KEYS}}}


def pulumi_yaml() -> str:
    return HEADER + yaml.safe_dump(pulumi_project(), sort_keys=False, width=120, allow_unicode=True)


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, list):
        text = ", ".join(str(v) for v in value) or "(none)"
    else:
        text = str(value) if value != "" else "(empty)"
    return text.replace("|", "\\|")


def settings_markdown() -> str:
    lines = [
        "# Stack settings",
        "",
        "Every key of the `deepep-a4` namespace, set in `stacks/Pulumi.<stack>.yaml` as "
        "`deepep-a4:<key>: <value>`. Generated from `components/config/keys.py`; rules that involve",
        "several keys (capacity, versions that work together, network sizes) are in "
        "`components/config/rules/__init__.py`, and a stack that breaks any of them is refused before anything exists,",
        "with one line per problem.",
        "",
        "Values are read as Pulumi reads them: as the text written (`ttl: off` is the word off). Keys need",
        "the `deepep-a4:` namespace; provider keys such as `gcp:project` are refused because the program's",
        "providers are explicit (use `deepep-a4:project`).",
        "",
        "## What the program receives",
        "",
        "The Pulumi CLI merges every default below into the stack's config before the program runs (pulumi/pulumi",
        "pkg/workspace/config.go `mergeConfig`), so the program cannot tell a default from a value the stack wrote.",
        "It reads the stack file itself (`stackConfigDir: stacks`) to learn which keys the user wrote, and also",
        "counts any value that is not the default (one set from an ESC environment): the rules on a key that has",
        "no effect (a GCE key on a GKE stack) apply only to those. We chose this over comparing every value with",
        "its default, which would miss `placement: compact` written on reservation capacity, and over declaring no",
        "defaults in Pulumi.yaml, which would make every key required (a project key with neither default nor",
        "value is, to `mergeConfig`). Preview and up also type-check each value against the `type` below",
        "(`validateStackConfigValue`); the plan refuses first what they would refuse, in their words, and a value",
        'YAML reads as something else (write `"13.0"`: YAML reads 13.0 as the number 13). `pulumi config set`',
        "stores a string: give a list as a YAML list in the file or with `--path 'deepep-a4:benchmarks[0]'`, and",
        "booleans in lower case (`--type bool` reads `True` as false before CLI 3.215).",
        "",
        "| key | type | default | allowed | what it does |",
        "|---|---|---|---|---|",
    ]
    for key in KEYS:
        allowed = ", ".join(key.choices) if key.choices else ""
        lines.append(
            f"| `{key.name}` | {PULUMI_TYPES[key.kind]} | {_cell(key.default)} | {allowed} | "
            f"{key.description.replace('|', '/')} |"
        )
    return "\n".join(lines) + "\n"


def targets(root: Path) -> dict[Path, str]:
    return {root / "Pulumi.yaml": pulumi_yaml(), root / "docs" / "settings.md": settings_markdown()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write or check the files generated from the key table.")
    parser.add_argument("--write", action="store_true", help="rewrite the files (default: check them)")
    args = parser.parse_args(argv)
    stale = []
    for path, text in targets(project_root()).items():
        if args.write:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        elif not path.is_file() or path.read_text() != text:
            stale.append(str(path))
    if stale:
        print(f"out of date: {', '.join(stale)}; run .venv/bin/python -m deepep_a4.schema --write")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
