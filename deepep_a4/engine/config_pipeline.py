"""The Pulumi CLI's config pipeline, from the stack file to the map a program receives, as one model.

Every workstation command that reads a stack (plan, cost, store build, run's preflight) builds the program's
config from it here, so what they check is what `pulumi up` hands the program. Cited lines are pulumi/pulumi at
1b5949891b3cefcb9974752b24a5ecef0acc86c8 (v3.259.0 and later, 2026-08-21); `git diff pkg/v3.208.0` of every file
named below changes nothing this model imitates, except sdk/go/common/resource/config/value.go's TypeBool parse
(#21314, v3.215.0: `pulumi config set --type bool KEY True` stores false before, true after), which is why
docs/settings.md says to write booleans in lower case.

1. The stack file is read with yaml.v3 (engine/yaml_v3.py) into config.Map: each value through
   sdk/go/common/resource/config/object.go `unmarshalObject` and `MarshalString`: a string stays itself;
   bool, int and float become their JSON text (`13.0` -> "13") and are not objects; a list, a mapping or an
   empty value (nil -> "null") become an *object* value holding JSON; `{secure: ...}` is a secret.
   A key is `<namespace>:<name>` (config/key.go ParseKey) or the file is not read at all.
2. pkg/workspace/config.go `mergeConfig` (run by `ValidateStackConfigAndApplyProjectConfig` for preview and
   up, by `ApplyProjectConfig` for `pulumi config --json`): every project key absent from the stack gets the
   project's `value`, else its `default`, through `createConfigValue` (string, int, bool: fmt "%v"; anything
   else: a JSON object value). A project-namespace key with neither, absent from the stack, is required:
   "Stack 'S' is missing configuration value 'K'".
3. With validation (preview, up): `validateStackConfigValue` for every explicitly typed project key: a secret
   key must be secure; an object value is JSON-decoded first; then sdk/go/common/workspace/project.go
   `ValidateConfigValue`: string: any non-object; integer: strconv.Atoi of the text (or a whole float inside
   an object); boolean: the text "true" or "false" exactly (or a JSON bool); array: a JSON list whose items
   pass. A failure: "Stack 'S' with configuration key 'K' must be of type 'T'" and nothing runs.
4. The program gets the decrypted text of each value (Map.Decrypt), objects as JSON.

`pulumi config set KEY VALUE` stores VALUE as a string (pkg/cmd/pulumi/config/config.go: without --type or
--path the value is `config.NewValue(value)`), so `pulumi config set deepep-a4:benchmarks '["intranode"]'`
writes a string that step 3 refuses for an array key; `--path 'KEY[0]'` builds a list.
"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from deepep_a4.engine import yaml_v3

# pkg/workspace/config.go validateStackConfigValue's message.
TYPE_ERROR = "Stack '{stack}' with configuration key '{key}' must be of type '{type}'"
MISSING_ERROR = "Stack '{stack}' is missing configuration value '{key}'"
SECRET_ERROR = "Stack '{stack}' with configuration key '{key}' must be encrypted as it's secret"  # noqa: S105


@dataclass(frozen=True)
class Value:
    """config.Value: the text, and whether it is a secret or a JSON object (value.go)."""

    text: str
    secure: bool = False
    object: bool = False


@dataclass(frozen=True)
class ConfigType:
    """workspace.ProjectConfigType: type, items, default, value, secret (project.go)."""

    type: str | None = None
    items: dict[str, Any] | None = None
    default: Any = None
    value: Any = None
    secret: bool = False
    has_default: bool = False
    has_value: bool = False


@dataclass(frozen=True)
class Project:
    name: str
    config: dict[str, ConfigType]


def _go_float(f: float) -> str:
    """encoding/json's float64 text (encode.go floatEncoder.encode): the shortest 'f' format for
    1e-6 <= |f| < 1e21, else 'e' with "e-09" cleaned up to "e-9"."""
    if math.isnan(f) or math.isinf(f):
        raise ValueError(f"json: unsupported value: {f}")
    if f == 0 or 1e-6 <= abs(f) < 1e21:
        return format(Decimal(repr(f)), "f").removesuffix(".0") if "e" in repr(f) else repr(f).removesuffix(".0")
    mantissa, _, exp = repr(f).partition("e")
    return f"{mantissa}e{exp[0]}{exp[1:].lstrip('0') or '0'}" if exp[0] == "-" else f"{mantissa}e{exp}"


def go_json(value: Any) -> str:
    """encoding/json.Marshal: compact, map keys sorted, <, > and & escaped."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_float(value)
    if isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
        return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    if isinstance(value, list):
        return "[" + ",".join(go_json(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{go_json(str(k))}:{go_json(v)}" for k, v in sorted(value.items())) + "}"
    raise TypeError(type(value).__name__)


def _is_secure(value: Any) -> bool:
    # object.go isSecureValue: a mapping of one key "secure" whose value is a string.
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get("secure"), str)


def stack_value(raw: Any) -> Value:
    """A stack file's value as config.Value (object.go unmarshalObject + MarshalString)."""
    if _is_secure(raw):
        return Value(raw["secure"], secure=True)
    if isinstance(raw, str):  # includes GoTime: time.Time.String()
        return Value(str(raw))
    if isinstance(raw, (bool, int, float)):
        return Value(go_json(raw))
    return Value(go_json(raw), object=True)  # list, mapping, nil ("null")


def create_config_value(raw: Any) -> Value:
    """config.go createConfigValue: a project default or value as the stack gets it."""
    if isinstance(raw, bool):
        return Value("true" if raw else "false")
    if isinstance(raw, (str, int)):
        return Value(str(raw))
    return Value(go_json(raw), object=True)


def parse_key(text: str) -> tuple[str, str] | None:
    """config/key.go ParseKey: `<namespace>:<name>` (or the old `<ns>:config:<name>`); None if not a key."""
    if text.count(":") == 1:
        namespace, name = text.split(":")
        return namespace, name
    if text.count(":") == 2:
        namespace, module, name = text.split(":")
        if module == "config" and namespace and name:
            return namespace, name
    return None


def _config_type(project_name: str, key: str, entry: Any) -> ConfigType:
    # project.go RewriteShorthandConfigValues: a primitive or array is a project key's default, or another
    # namespace's value.
    if not isinstance(entry, dict):
        if ":" in key and not key.startswith(f"{project_name}:"):
            return ConfigType(value=entry, has_value=True)
        return ConfigType(default=entry, has_default=True)
    return ConfigType(
        type=entry.get("type"),
        items=entry.get("items"),
        default=entry.get("default"),
        value=entry.get("value"),
        secret=bool(entry.get("secret")),
        has_default=entry.get("default") is not None,  # config.go: `projectConfigType.Default != nil`
        has_value=entry.get("value") is not None,
    )


def project_from_text(text: str) -> Project:
    data = yaml_v3.load(text) or {}
    name = str(data.get("name", ""))
    config = data.get("config") or {}
    return Project(name, {str(k): _config_type(name, str(k), v) for k, v in config.items()})


@functools.lru_cache(maxsize=8)
def _project_cached(path: str, mtime: float) -> Project:
    return project_from_text(Path(path).read_text())


def load_project(root: Path) -> Project:
    """`root`'s Pulumi.yaml; a folder without one (a stack file checked on its own) gets the package's."""
    path = root / "Pulumi.yaml"
    if not path.is_file():
        path = Path(__file__).resolve().parents[2] / "Pulumi.yaml"
    return _project_cached(str(path), path.stat().st_mtime)


def full_key(project: Project, key: str) -> str:
    """config.go parseConfigKey: a key without a namespace is the project's."""
    return key if ":" in key else f"{project.name}:{key}"


def merge(project: Project, stack: dict[str, Value]) -> tuple[dict[str, Value], list[str]]:
    """config.go mergeConfig (without an ESC environment): the merged map and the required keys missing."""
    merged = dict(stack)
    missing = []
    for key in sorted(project.config):
        ctype = project.config[key]
        name = full_key(project, key)
        if name in merged:
            continue
        if not ctype.has_value and not ctype.has_default:
            if name.split(":", 1)[0] == project.name:
                missing.append(key)
            continue
        merged[name] = create_config_value(ctype.default if ctype.has_default else ctype.value)
    return merged, missing


def type_name(ctype: ConfigType) -> str:
    """project.go InferFullTypeName."""
    if ctype.items is not None:
        return f"array<{type_name(ConfigType(type=ctype.items.get('type'), items=ctype.items.get('items')))}>"
    return str(ctype.type)


_ATOI = re.compile(r"[+-]?[0-9]+")


def validate_value(type_: str | None, items: dict[str, Any] | None, content: Any) -> bool:
    """project.go ValidateConfigValue (content: the text, or the decoded JSON of an object value)."""
    if type_ == "string":
        return isinstance(content, str)
    if type_ == "integer":
        if isinstance(content, bool):
            return False
        if isinstance(content, int):
            return True
        if isinstance(content, float):
            return content == math.trunc(content)
        return isinstance(content, str) and bool(_ATOI.fullmatch(content)) and -(2**63) <= int(content) < 2**63
    if type_ == "boolean":
        return content in ("true", "false") or isinstance(content, bool)
    if type_ == "object":
        return isinstance(content, dict)
    if not isinstance(content, list) or items is None:
        return False
    return all(validate_value(items.get("type"), items.get("items"), item) for item in content)


def type_errors(stack_name: str, project: Project, merged: dict[str, Value]) -> dict[str, str]:
    """config.go validateStackConfigValues: project key -> Pulumi's error, for values it refuses. Secret
    values are checked for being secure only: the offline model holds no passphrase to decrypt them."""
    errors = {}
    for key in sorted(project.config):
        ctype = project.config[key]
        value = merged.get(full_key(project, key))
        if ctype.type is None or value is None:
            continue
        if ctype.secret and not value.secure:
            errors[key] = SECRET_ERROR.format(stack=stack_name, key=key)
            continue
        if value.secure:
            continue
        content: Any = json.loads(value.text) if value.object else value.text
        if not validate_value(ctype.type, ctype.items, content):
            errors[key] = TYPE_ERROR.format(stack=stack_name, key=key, type=type_name(ctype))
    return errors


def program_config(merged: dict[str, Value]) -> dict[str, str]:
    """What the program receives (Map.Decrypt): each key's text; secrets here stay ciphertext (no passphrase)."""
    return {k: v.text for k, v in merged.items()}
