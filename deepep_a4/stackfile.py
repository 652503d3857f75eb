"""Stack files read the way Pulumi reads them: the one reader of `stacks/Pulumi.<stack>.yaml`.

Pulumi hands a program every config value as a string, exactly as written (its YAML reader follows YAML
1.2, where `off`, `yes` and `no` are plain words, not booleans), lists and objects as JSON; and it knows
only namespaced keys (`<namespace>:<key>`). The offline plan, the report, the run command and the CI
gates all read stack files here, so a stack that plans offline is the stack `pulumi up` sees.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import yaml

from components import config
from components.config.keys import PROJECT_NAME
from deepep_a4.engine import alias_ratio as aliases
from deepep_a4.engine import stack_view as pulumi_view
from deepep_a4.paths import project_root

STACK_FILE_PREFIX = "Pulumi."
STACK_FILE_SUFFIX = ".yaml"
# Namespaces a stack file of this project may use. Provider namespaces are refused: the program builds
# its providers explicitly from deepep-a4 keys, so `gcp:project` would be silently ignored.
PROVIDER_NAMESPACES = {"gcp": "project, region and zone", "kubernetes": "the cluster"}
# The top-level keys of a stack file: Pulumi's ProjectStack (pulumi/pulumi sdk/go/common/workspace/project.go:
# secretsprovider, encryptedkey, encryptionsalt, config, environment).
# The artifact store's own project (store/Pulumi.yaml): its keys belong in store/Pulumi.<stack>.yaml.
STORE_PROJECT = f"{PROJECT_NAME}-store"
STACK_FILE_KEYS = ("config", "secretsprovider", "encryptedkey", "encryptionsalt", "environment")


class StackFileError(ValueError):
    """A stack file that cannot be read, or keys Pulumi would read differently: one line per problem."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


class _DuplicateKeyError(Exception):
    def __init__(self, line: str):
        self.line = line
        super().__init__(line)


def _shown(node: yaml.Node) -> str:
    return repr(node.value) if isinstance(node, yaml.ScalarNode) else f"a {node.tag.rsplit(':', 1)[-1]}"


class _Pulumi12Loader(yaml.SafeLoader):
    """Every scalar as the text written in the file, as Pulumi passes config values to a program; a key
    written twice in one mapping is refused (PyYAML would keep the last one without a word)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, tuple[yaml.Node, yaml.Node]] = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, str) and key in seen:
                first_key, first_value = seen[key]
                raise _DuplicateKeyError(
                    f"config key {key!r} = {_shown(first_value)} (line {first_key.start_mark.line + 1}) and "
                    f"{_shown(value_node)} (line {key_node.start_mark.line + 1}): a key may be written once; "
                    "keep the one you mean"
                )
            seen[key] = (key_node, value_node)
        return super().construct_mapping(node, deep=deep)


def _scalar_as_text(loader: yaml.SafeLoader, node: yaml.Node) -> str:
    return str(loader.construct_scalar(node))  # pyright: ignore[reportArgumentType]


# Overriding the implicit resolvers would also turn `null` into "null"; overriding the constructors of
# the tags PyYAML's YAML 1.1 resolver assigns keeps the text instead.
for _tag in ("bool", "int", "float", "null", "timestamp"):
    _Pulumi12Loader.add_constructor(f"tag:yaml.org,2002:{_tag}", _scalar_as_text)


def stacks_dir(root: Path | None = None) -> Path:
    return (root or project_root()) / "stacks"


def available_stacks(root: Path | None = None) -> list[str]:
    folder = stacks_dir(root)
    return sorted(p.name[len(STACK_FILE_PREFIX) : -len(STACK_FILE_SUFFIX)] for p in folder.glob("Pulumi.*.yaml"))


def stack_file(stack: str, root: Path | None = None) -> Path:
    return stacks_dir(root) / f"{STACK_FILE_PREFIX}{stack}{STACK_FILE_SUFFIX}"


def resolve(stack: str, root: Path | None = None) -> tuple[str, Path]:
    """A stack given by name (`gke-b200`) or by its file (`stacks/Pulumi.gke-b200.yaml`) -> (name, file)."""
    given = Path(stack)
    if given.name.startswith(STACK_FILE_PREFIX) and given.name.endswith(STACK_FILE_SUFFIX):
        name = given.name[len(STACK_FILE_PREFIX) : -len(STACK_FILE_SUFFIX)]
        if not given.is_file():
            raise StackFileError([f"no stack file {stack}"])
        if given.resolve().parent != stacks_dir(root).resolve():
            # Pulumi only finds a stack's file in the project's stackConfigDir; elsewhere it is not that stack.
            raise StackFileError([f"stack file {stack} is not in {stacks_dir(root)}: Pulumi reads stacks from there"])
        return name, given
    if "/" in stack or stack.endswith(".yaml"):
        raise StackFileError([f"stack {stack!r}: give a stack name (gke-b200) or a file stacks/Pulumi.<name>.yaml"])
    path = stack_file(stack, root)
    if not path.is_file():
        known = ", ".join(available_stacks(root)) or "none"
        raise StackFileError([f"no stack file stacks/Pulumi.{stack}.yaml (stacks: {known})"])
    return stack, path


def _key_problems(key: str) -> list[str]:
    namespace, sep, name = key.partition(":")
    if not sep and key == PROJECT_NAME:
        return [
            f"config key {key!r} holds a block: Pulumi reads no nesting; write each setting on its own line "
            f"directly under config:, as {PROJECT_NAME}:<key>: <value> (e.g. {PROJECT_NAME}:ttl: 8h)"
        ]
    if not sep:
        return [f"config key {key!r} has no namespace: Pulumi refuses it; write {PROJECT_NAME}:{key}"]
    if namespace == PROJECT_NAME:
        return []
    if namespace == STORE_PROJECT:
        return [
            f"config key {key!r} is the store project's (store/Pulumi.yaml): set it in store/Pulumi.<stack>.yaml and "
            f"run `pulumi up` in store/; a benchmark stack names the store with {PROJECT_NAME}:artifactStore"
        ]
    if namespace in PROVIDER_NAMESPACES:
        return [
            f"config key {key!r}: the program's {namespace} provider is explicit and ignores {namespace}:* keys; "
            f"set {PROJECT_NAME}:{name} ({PROVIDER_NAMESPACES[namespace]} come from {PROJECT_NAME} keys)"
        ]
    hint = difflib.get_close_matches(namespace, [PROJECT_NAME], n=1, cutoff=0.6)
    did_you_mean = f"; did you mean {hint[0]}:{name}?" if hint else ""
    return [f"config key {key!r}: unknown namespace {namespace!r} (this project reads {PROJECT_NAME}:*){did_you_mean}"]


def outside_config(data: dict[Any, Any], where: str) -> list[str]:
    """A line per top-level key that is not Pulumi's: a key outside `config:` (an indentation slip) is no config
    value, and Pulumi, which reads the file into ProjectStack, drops it without a word."""
    return [
        f"{where}: top-level key {str(key)!r} is outside `config:`; a stack file holds only "
        f"{', '.join(STACK_FILE_KEYS)} (indent {PROJECT_NAME}:<key> under config:)"
        for key in data
        if key not in STACK_FILE_KEYS
    ]


def parse_text(text: str, where: str, root: Path | None = None) -> dict[str, str]:
    """The `config:` mapping of a stack file's text: namespaced keys -> strings, as Pulumi passes them (the keys
    the user wrote; `merged` adds Pulumi.yaml's defaults as the engine does)."""
    try:
        loader = _Pulumi12Loader(text)
        try:
            # Aliases expanded as far as the CLI's yaml.v3 expands them, counted before anything walks them.
            node = loader.get_single_node()
            aliases.check_aliasing(node)
            data = (loader.construct_document(node) if node is not None else None) or {}
        finally:
            loader.dispose()
    except aliases.ExcessiveAliasingError as err:
        raise StackFileError(
            [f"{where}: {err}: the Pulumi CLI's YAML reader (yaml.v3) refuses such a file; write the values out"]
        ) from None
    except _DuplicateKeyError as err:
        raise StackFileError([f"{where}: {err.line}"]) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        # An unclosed [ or { is found lines later: its opening line (the context) names the key.
        context = getattr(err, "context_mark", None) if "flow" in str(getattr(err, "context", "")) else None
        near = pulumi_view.key_near(text, (context or mark).line) if mark is not None else ""
        near_key = f" (near key {near})" if near else ""
        raise StackFileError([f"{where}: not valid YAML{at}{near_key}: {getattr(err, 'problem', err)}"]) from None
    if not isinstance(data, dict):
        raise StackFileError([f"{where}: the file must be a mapping with a `config:` key"])
    outside = outside_config(data, where)
    if outside:
        raise StackFileError(outside)
    cfg = data.get("config") or {}
    if not isinstance(cfg, dict):
        kind = type(cfg).__name__
        raise StackFileError([f"{where}: `config:` must be a mapping of {PROJECT_NAME}:<key>: <value>, not a {kind}"])
    problems = [p for key in cfg for p in _key_problems(str(key))]
    if problems:
        raise StackFileError([f"{where}: {p}" for p in problems])
    # The values as the CLI reads them (yaml.v3) and type-checks them against Pulumi.yaml (engine/).
    engine = pulumi_view.engine_problems(text, where, cfg, root)
    if engine.problems:
        raise StackFileError([f"{where}: {p}" for p in engine.problems])
    return engine.config


def read(stack: str, root: Path | None = None) -> dict[str, str]:
    """The config of a stack (by name or file) as Pulumi hands it to the program: namespaced, all strings."""
    _, path = resolve(stack, root)
    return parse_text(path.read_text(), str(path), root)


def project_keys(stack_cfg: dict[str, str]) -> dict[str, str]:
    """The keys of this project's namespace, without the namespace."""
    prefix = f"{PROJECT_NAME}:"
    return {k[len(prefix) :]: v for k, v in stack_cfg.items() if k.startswith(prefix)}


def merged(stack_cfg: dict[str, str], root: Path | None = None) -> dict[str, str]:
    """The config the program receives at `pulumi up`: the stack's keys and Pulumi.yaml's defaults for the
    others (pkg/workspace/config.go mergeConfig; deepep_a4/engine/config_pipeline.py)."""
    return pulumi_view.merged(stack_cfg, root or project_root())


def parse_stack(name: str, root: Path | None = None, raw: dict[str, Any] | None = None) -> Any:
    """The validated config of stack `name` from what the program receives (`raw`: `pulumi config --json`,
    else the stack file merged with Pulumi.yaml's defaults); only the keys the stack file writes count as
    written (docs/settings.md#what-the-program-receives)."""
    from components import config

    written_cfg = read(name, root)
    program = merged(dict(raw) if raw is not None else written_cfg, root)
    return config.parse(project_keys(program), name, written=set(project_keys(written_cfg)))


# -- a stack as the commands take it (plan, cost, store, hwtest, capacity) -----------------------------------

STACK_HELP = "stack name (gke-b200) or its file (stacks/Pulumi.gke-b200.yaml)"


class UsageError(Exception):
    """Bad input: printed as `error: ...` lines, exit 2, nothing written."""

    def __init__(self, lines: list[str]):
        self.lines = lines
        super().__init__("\n".join(lines))


def load_stack(stack_arg: str, root: Path | None = None) -> tuple[str, dict[str, Any], config.StackConfig]:
    """(name, raw namespaced config, validated config) of a stack given by name or file; raises UsageError. `root`: the
    project folder (default: the one this command runs in)."""
    root = root or project_root()
    try:
        name, _ = resolve(stack_arg, root)
        written = read(name, root)
        stack_cfg = merged(written, root)  # what the program gets at `pulumi up`
        cfg = config.parse(project_keys(stack_cfg), name, written=set(project_keys(written)))
    except StackFileError as err:
        raise UsageError([str(p) for p in err.problems]) from None
    except config.ConfigError as err:
        if len(err.problems) == 1:  # one mistake, one line
            raise UsageError([f"stack '{stack_arg}': {err.problems[0]}; nothing was written"]) from None
        raise UsageError(
            [f"stack '{stack_arg}' has {len(err.problems)} config problems; nothing was written:"]
            + [f"  - {problem}" for problem in err.problems]
        ) from None
    return name, stack_cfg, cfg
