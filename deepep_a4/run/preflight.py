"""What `deepep-a4 run` checks before it creates or changes anything, each against the Pulumi CLI's own rule.

1. The CLI version, read as the Automation API reads it (`LocalWorkspace.pulumi_version`: `pulumi version`,
   a leading "v" dropped; pulumi sdk/python/lib/pulumi/automation/_cmd.py `PulumiCommand.__init__`). The
   program keeps values in `pulumi:index:Stash` resources, which the engine has since 3.208.0 (pulumi
   CHANGELOG.md, 3.208.0: "[engine] Add a new builtin `Stash` resource which can be used to save a value to
   state", #20819). The SDK's own floor is 3.1.0 (_minimum_version.py), so it would not stop an older CLI.
2. The secrets provider the backend needs. A DIY backend (`file://`, `gs://`, `s3://`, ...) defaults to the
   passphrase provider (pkg/backend/diy/backend.go `DefaultSecretManager`), and the Automation API runs every
   command with `--non-interactive` (_cmd.py `run`), where the passphrase is read from
   PULUMI_CONFIG_PASSPHRASE (set, even empty) or a non-empty PULUMI_CONFIG_PASSPHRASE_FILE, else the command
   fails with "passphrase must be set with PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE
   environment variables" (pkg/secrets/passphrase/manager.go `readPassphrase`). Pulumi Cloud (an http(s)
   backend) and a stack file with its own `secretsprovider` (gcpkms://, ...) need none.
3. The policy pack's Python environment. PulumiPolicy.yaml says `runtime: {name: python, options:
   {virtualenv: venv}}`; for python the CLI starts `pulumi-analyzer-policy-python` in the pack's folder with
   `-virtualenv=venv` and installs nothing (sdk/go/common/resource/plugin/analyzer_plugin.go
   `NewPolicyAnalyzer`). The pack imports this project's rules (policy/requirements.txt is `-e ..[policy]`),
   so policy/venv is made a link to the environment `deepep-a4` runs in: the rules the tests ran are the
   rules enforced, with no second download of the SDKs; it needs pulumi-policy there (the `policy` extra).
4. The store: a supported-profile stack with no pinned manifest (components/node/manifest_gate.py).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from components.config import StackConfig
from components.node import manifest_gate as store_gate
from deepep_a4.paths import project_root

ROOT = project_root()
MIN_CLI = (3, 208, 0)
# Never logged in, the CLI means Pulumi Cloud and, non-interactive, fails with this (pulumi/pulumi
# pkg/backend/backenderr/backenderr.go MissingEnvVarForNonInteractiveError at 1b5949891b3cefcb9974752b24a5ecef0acc86c8).
LOGIN_ERROR = "PULUMI_ACCESS_TOKEN must be set for login during non-interactive CLI sessions"
NOT_LOGGED_IN = (
    "the Pulumi CLI is not logged in to a backend (`pulumi whoami`: " + LOGIN_ERROR + "): run `pulumi login --local` "
    "(state on this machine) or `pulumi login gs://BUCKET`, or export PULUMI_ACCESS_TOKEN for Pulumi Cloud"
)
POLICY_PACK = ROOT / "policy"
SECRETS_FIX = (
    "export PULUMI_CONFIG_PASSPHRASE_FILE=~/.pulumi-passphrase (a file holding the stack's passphrase; "
    "or PULUMI_CONFIG_PASSPHRASE), or give the stack a secrets provider: "
    "pulumi stack change-secrets-provider gcpkms://projects/P/locations/L/keyRings/R/cryptoKeys/K"
)


@dataclass(frozen=True)
class Cli:
    """What the installed Pulumi CLI says about itself and its backend."""

    version: str
    backend_url: str


def read_cli(root: Path = ROOT) -> Cli:
    """`pulumi version` and `pulumi whoami --json` through the Automation API; neither changes anything."""
    from pulumi import automation as auto

    workspace = auto.LocalWorkspace(
        work_dir=str(root),
        # Our own floor is checked below with one line of advice; the SDK's error names only its own floor.
        pulumi_command=auto.PulumiCommand(skip_version_check=True),
    )
    version = workspace.pulumi_version
    url = ""
    if _parse(version) >= MIN_CLI:  # an old CLI fails here already: ask it nothing more
        url = workspace.who_am_i().url or ""
    return Cli(version=version, backend_url=url)


def _parse(version: str) -> tuple[int, int, int]:
    core = version.strip().removeprefix("v").split("-")[0].split("+")[0]
    major, minor, patch = [*(int(p) for p in core.split(".")[:3]), 0, 0, 0][:3]
    return major, minor, patch


def version_problem(version: str) -> str | None:
    try:
        found = _parse(version)
    except ValueError:
        return f"the Pulumi CLI answered `pulumi version` with {version!r}, not a version"
    if found >= MIN_CLI:
        return None
    need = ".".join(map(str, MIN_CLI))
    return (
        f"the Pulumi CLI is {version}; this program needs {need} or newer (its `pulumi:index:Stash` resources): "
        "update it with `curl -fsSL https://get.pulumi.com | sh` (https://www.pulumi.com/docs/install/)"
    )


def is_diy_backend(url: str) -> bool:
    """Every backend but Pulumi Cloud (http or https) keeps its state itself and encrypts with a passphrase."""
    return not url.startswith(("https://", "http://"))


def stack_secrets_provider(name: str, root: Path = ROOT) -> str:
    """The stack file's `secretsprovider` ("" where it has none: the backend's default)."""
    path = root / "stacks" / f"Pulumi.{name}.yaml"
    try:
        doc: Any = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError):
        return ""
    return str(doc.get("secretsprovider") or "") if isinstance(doc, dict) else ""


def secrets_problem(name: str, backend_url: str, env: Mapping[str, str], root: Path = ROOT) -> str | None:
    if not is_diy_backend(backend_url):
        return None
    provider = stack_secrets_provider(name, root)
    if provider and provider not in ("passphrase", "default"):
        return None
    if "PULUMI_CONFIG_PASSPHRASE" in env:  # set, even empty, is a passphrase (readPassphrase: LookupEnv)
        return None
    phrase_file = env.get("PULUMI_CONFIG_PASSPHRASE_FILE", "")
    if phrase_file.startswith("~"):
        # readPassphrase takes filepath.Abs of the value: `~` is a folder named ~ there; only a shell expands it.
        return (
            f"PULUMI_CONFIG_PASSPHRASE_FILE={phrase_file} starts with a literal ~: the shell did not expand it (it was "
            f"quoted, or set in a file the shell does not read) and Pulumi reads it as a folder named ~ under "
            f"{root}; write the full path: export PULUMI_CONFIG_PASSPHRASE_FILE=$HOME{phrase_file[1:]}"
        )
    if phrase_file:
        # readPassphrase: filepath.Abs (no ~ expansion), from the CLI's folder, the workspace's work_dir.
        if (root / phrase_file).is_file():
            return None
        return f"PULUMI_CONFIG_PASSPHRASE_FILE={phrase_file} is not a readable file: {SECRETS_FIX}"
    return (
        f"the backend {backend_url or '(pulumi login)'} keeps stack {name}'s secrets under a passphrase, and the "
        'Automation API runs the Pulumi CLI non-interactively, where it fails with "passphrase must be set with '
        f'PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE environment variables": {SECRETS_FIX}'
    )


def has_policy_engine(prefix: Path) -> bool:
    """pulumi-policy importable in the environment at `prefix` (this process's, when it is that one)."""
    if prefix.resolve() == Path(sys.prefix).resolve():
        return importlib.util.find_spec("pulumi_policy") is not None
    return any((prefix / "lib").glob("python3*/site-packages/pulumi_policy/__init__.py"))


def policy_env_problem(pack: Path | None = None, prefix: Path | None = None) -> str | None:
    """policy/venv exists and has the policy engine, or is made a link to this environment; else one line."""
    pack = pack or POLICY_PACK
    prefix = prefix or Path(sys.prefix)
    venv = pack / "venv"
    fix = f"{prefix}/bin/python -m pip install -e '{pack.parent}[policy]'"
    if venv.exists():
        if not (venv / "bin" / "python").exists():
            return f"{venv} is not a Python environment (no bin/python): remove it and run this again"
        if not has_policy_engine(venv):
            return f"the policy pack's environment {venv} has no pulumi-policy: {fix}"
        return None
    if venv.is_symlink():  # a link to an environment that is gone
        return f"{venv} links to {os.readlink(venv)}, which is gone: remove it and run this again"
    if prefix == Path(sys.base_prefix) or not (prefix / "pyvenv.cfg").is_file():
        return f"deepep-a4 runs outside a virtual environment ({prefix}): make {venv} yourself and run {fix} in it"
    if not has_policy_engine(prefix):
        return f"the policy pack runs in this environment ({prefix}), which has no pulumi-policy: {fix}"
    venv.symlink_to(prefix, target_is_directory=True)
    return None


def check(
    name: str,
    cfg: StackConfig,
    destroy_only: bool = False,
    *,
    read: Callable[[], Cli] = read_cli,
    env: Mapping[str, str] | None = None,
    pack: Path | None = None,
) -> list[str]:
    """One line per problem, in the order a user fixes them; [] when `run` may go ahead."""
    env = os.environ if env is None else env
    try:
        cli = read()
    except Exception as err:  # a CLI that cannot answer `pulumi version` is as good as none
        if LOGIN_ERROR in str(err):
            return [NOT_LOGGED_IN]
        return [f"the Pulumi CLI did not answer `pulumi version`: {type(err).__name__}: {str(err).strip()[-300:]}"]
    if problem := version_problem(cli.version):
        return [problem]
    problems = [p for p in [secrets_problem(name, cli.backend_url, env)] if p]
    if not destroy_only:
        try:
            policy = policy_env_problem(pack)
        except OSError as err:  # the link could not be made (a read-only checkout): say so, no traceback
            policy = f"could not make the policy pack's environment {pack or POLICY_PACK}/venv: {err}"
        # A stack that names its store but pins no manifest is run's to fill (store_fill.fill_and_pin asks, or
        # --build-store); one with no store at all has nothing to fill and is refused here.
        store = None if cfg.installer.store_url else store_gate.unpinned_store(cfg)
        problems += [p for p in [policy, store] if p]
    return problems
