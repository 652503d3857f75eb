"""Every download of every rendered stack has a pin (docs/installer.md, "What is pinned").

The rendered scripts are read, not a list kept beside them: every call of `fetch` or `fetch_key` in the
phases and lib.sh is found, its URL and name are expanded with the stack's config.sh (and each Ubuntu
release a node may run), and the name must have a sha256 in config.sh's table, a fingerprint in its key
table, or be one that only the stack's store manifest can pin (the stack then has a store, and the
plan says whether the manifest is set), or, without a manifest, one whose sha256 the first `pulumi up`
resolves (components/node/pins.py: the stand-in in the plan, from the very URL the phase fetches). A new download
without a pin fails here.
"""

from __future__ import annotations

import re
import shlex

import pytest

from components import artifacts, config
from components.config import upstream, versions
from components.node import installer, pins
from deepep_a4.plan import engine as plan_engine
from tests.conftest import ROOT, stack_config

STACKS = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))
STACK_STORE = "gs://deepep-a4-demo-artifacts/deepep-a4"
UBUNTU_RELEASES = ("22.04", "24.04")
FETCHERS = ("fetch", "fetch_key")


def rendered(stack: str, **overrides: object) -> tuple[config.StackConfig, dict[str, str]]:
    artifacts.reset()
    cfg = config.parse(plan_engine.project_keys(stack_config(stack, **overrides)), stack)
    return cfg, installer.render_installer(cfg, cfg.platform)


def config_values(text: str) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """config.sh's plain values, its SHA256 table and its KEY_FPR table."""
    values: dict[str, str] = {}
    tables: dict[str, dict[str, str]] = {"SHA256": {}, "KEY_FPR": {}}
    table = ""
    for line in text.splitlines():
        if m := re.match(r"^declare -A (\w+)=\($", line):
            table = m.group(1)
        elif line == ")":
            table = ""
        elif table in tables and (m := re.match(r"^\s+\[(.+?)\]=(.*)$", line)):
            tables[table][shlex.split(m.group(1))[0]] = shlex.split(m.group(2))[0] if m.group(2) else ""
        elif not table and (m := re.match(r"^([A-Z_0-9]+)=(.*)$", line)):
            parts = shlex.split(m.group(2))
            values[m.group(1)] = parts[0] if parts else ""
    return values, tables["SHA256"], tables["KEY_FPR"]


def expand(expr: str, env: dict[str, str]) -> str:
    """${VAR//./}, ${VAR} and $VAR from env; an unknown variable stays as it is (the test then fails)."""
    expr = re.sub(
        r"\$\{(\w+)//\./\}", lambda m: env[m.group(1)].replace(".", "") if m.group(1) in env else m.group(0), expr
    )
    expr = re.sub(r"\$\{(\w+)\}", lambda m: env.get(m.group(1), m.group(0)), expr)
    return re.sub(r"\$(\w+)", lambda m: env.get(m.group(1), m.group(0)), expr)


def functions(text: str) -> list[tuple[str, str]]:
    """(name, body) of every shell function in a script (bodies end at a line holding only '}')."""
    return [(m.group(1), m.group(2)) for m in re.finditer(r"(?ms)^(\w+)\(\) \{\n(.*?)^\}$", text)]


def words_of(line: str) -> list[str]:
    """The words of a line's first simple command (no redirections, lists or comments)."""
    command = re.split(r" >&2| \|\||&&|;", line.strip())[0]
    if not command or command.startswith("#"):
        return []
    try:
        return shlex.split(command)
    except ValueError:  # a line that is not a whole command (a continued one): not a call
        return []


def assignments(body: str) -> dict[str, str]:
    """A function's simple assignments (`local a=$1 b=$2`, `repo="..."`), without command substitutions."""
    out: dict[str, str] = {}
    for line in body.splitlines():
        words = words_of(line)
        if words[:1] == ["local"]:
            words = words[1:]
        else:
            words = words[:1]
        for word in words:
            m = re.match(r"^(\w+)=(.+)$", word)
            if m and "$(" not in m.group(2):
                out[m.group(1)] = m.group(2)
    return out


def calls_of(scripts: dict[str, str], func: str) -> list[tuple[str, str, list[str]]]:
    """(file, calling function, arguments) of every call of `func` inside a function."""
    out = []
    for rel, text in scripts.items():
        for caller, body in functions(text):
            for line in body.splitlines():
                commands = [words_of(line)] + [words_of(c) for c in re.findall(r"\$\(([^()]*)\)", line)]
                out += [(rel, caller, words[1:]) for words in commands if words and words[0] == func]
    return out


def fetch_calls(files: dict[str, str]) -> list[tuple[str, str, str]]:
    """(file, URL, name) of every download call, its function's variables filled in; a wrapper's
    parameters (apt_key URL NAME) are taken from each of the wrapper's own call sites."""
    scripts = {rel: text for rel, text in files.items() if rel.endswith(".sh")}
    bodies = {(rel, name): body for rel, text in scripts.items() for name, body in functions(text)}
    found: list[tuple[str, str, str]] = []
    for fetcher in FETCHERS:
        for rel, caller, args in calls_of(scripts, fetcher):
            if caller in FETCHERS:  # fetch_key hands an unpinned key to fetch with its own arguments
                continue
            local = assignments(bodies[rel, caller])
            params = {k: int(v[1]) for k, v in local.items() if re.fullmatch(r"\$\d", v)}
            values = {k: v for k, v in local.items() if k not in params}
            url, name = expand(args[0], values), expand(args[2], values)
            if any(f"${p}" in url + name for p in params):
                for crel, _, cargs in calls_of(scripts, caller):
                    bound = {p: cargs[i - 1] for p, i in params.items()}
                    found.append((crel, expand(url, bound), expand(name, bound)))
            else:
                found.append((rel, url, name))
    return found


def check_pins(stack: str, **overrides: object) -> tuple[list[str], list[str]]:
    """The names of every download the stack's rendered installer makes, and each one without a pin."""
    cfg, files = rendered(stack, **overrides)
    values, sha256, key_fpr = config_values(files["config.sh"])
    manifest_only = set(installer.manifest_pinned(cfg))
    checked, unpinned = [], []
    for rel, url_expr, name_expr in fetch_calls(files):
        for release in UBUNTU_RELEASES:
            env = {**values, "os": release}
            url, name = expand(url_expr, env), expand(name_expr, env)
            if not url:  # NVSHMEM_SRC_URL of a stack that takes the wheel
                continue
            assert "$" not in url + name and url.startswith("https://"), f"{rel}: cannot expand {url_expr} {name_expr}"
            checked.append(name)
            if sha256.get(name) == installer.FIRST_UP_STAND_IN:  # resolved at the first up: from this URL
                assert pins.download_urls(cfg)[name] == url, (name, url)
            pinned = name in sha256 or name in key_fpr or (name in manifest_only and bool(values["STORE_URL"]))
            if not pinned:
                unpinned.append(f"{rel} downloads {name} from {url} with no pin")
    return checked, unpinned


@pytest.mark.parametrize("stack", STACKS)
def test_every_download_of_every_stack_has_a_pin(stack: str) -> None:
    # With a store (the example stacks name none of ours: a user's), whose manifest pins the rest.
    cfg, files = rendered(stack, artifactStore=STACK_STORE)
    values, sha256, key_fpr = config_values(files["config.sh"])
    assert values["REQUIRE_CHECKSUMS"] == "1"
    assert values["STORE_PUBLISH"] == "0", "nodes of an example stack publish nothing (docs/store.md)"
    checked, unpinned = check_pins(stack, artifactStore=STACK_STORE)
    assert not unpinned, unpinned
    if cfg.staged:  # the store's objects only (the manifest pins them), and gIB's keys on GCE
        assert ("google-artifact-registry" in checked) == (cfg.platform == "gce" and cfg.installer.nccl_gib)
        return
    # What the host install downloads: the CUDA repository's keyring, GDRCopy, DOCA's key, NVSHMEM's source (a
    # source build), gIB's two keys on GCE.
    assert "cuda-keyring_1.1-1_all-ubuntu2404.deb" in checked and f"gdrcopy-{cfg.versions.gdrcopy}.tar.gz" in checked
    assert "GPG-KEY-Mellanox" in checked
    assert ("google-artifact-registry" in checked) == (cfg.platform == "gce")
    if cfg.versions.nvshmem_source == "source":
        assert f"nvshmem-{cfg.versions.nvshmem}-source" in checked
    first_up = installer.first_up_names(cfg)
    for name, digest in sha256.items():
        assert re.fullmatch(r"[0-9a-f]{64}", digest) or (name in first_up and digest == installer.FIRST_UP_STAND_IN)
    for name, fprs in key_fpr.items():
        assert all(re.fullmatch(r"[0-9A-F]{16}|[0-9A-F]{40}", f) for f in fprs.split()), name


def test_a_deepep_v2_stack_pins_its_nccl_wheel() -> None:
    # deepepApi=v2: the pytorch phase fetches the NCCL wheel (install_nccl_v2), pinned by the project's sha256.
    v2 = {"deepepApi": "v2", "deepepRef": upstream.DEEPEP_V2, "deepepPr466": False, "artifactStore": STACK_STORE}
    cfg, files = rendered("gce-b200-ubuntu", **v2)
    _, wheel, sha = versions.nccl_wheel(cfg.versions.nccl, cfg.versions.torch_cuda_variant)
    checked, unpinned = check_pins("gce-b200-ubuntu", **v2)
    assert not unpinned, unpinned
    assert wheel in checked and config_values(files["config.sh"])[1][wheel] == sha


def test_the_check_finds_a_download_that_lost_its_pin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(installer.CHECKSUMS, "cuda-keyring_1.1-1_all-ubuntu2204.deb")
    _, unpinned = check_pins("gce-b200-ubuntu", artifactStore=STACK_STORE)
    assert unpinned == [
        "lib.sh downloads cuda-keyring_1.1-1_all-ubuntu2204.deb from "
        f"{installer.CUDA_REPO_BASE}/ubuntu2204/x86_64/cuda-keyring_1.1-1_all.deb with no pin"
    ]


@pytest.mark.parametrize("stack", STACKS)
def test_without_a_store_what_no_project_pin_covers_is_pinned_at_the_first_up(stack: str) -> None:
    cfg, files = rendered(stack, artifactStore="")
    checked, unpinned = check_pins(stack, artifactStore="")
    assert not unpinned, unpinned
    _, sha256, _ = config_values(files["config.sh"])
    stand_ins = {n for n, d in sha256.items() if d == installer.FIRST_UP_STAND_IN}
    assert stand_ins == set(installer.first_up_names(cfg)) == set(installer.manifest_pinned(cfg, fetched_only=True))
    assert stand_ins <= set(checked), "a first-up pin for something no phase fetches"


def test_only_the_download_helpers_call_curl() -> None:
    # Any other curl would be a download the pin check above cannot see.
    for path in sorted((ROOT / "scripts/install").rglob("*.sh")):
        for func, body in functions(path.read_text()):
            if re.search(r"(^|\s)curl\s", body):
                # store.sh's own Cloud Storage API calls: what they bring is checked by the manifest.
                assert path.name == "store.sh" or (path.name, func) == ("lib.sh", "_download"), (
                    f"{path.name}: {func} calls curl"
                )


def test_a_stack_without_a_store_manifest_shows_its_stand_in() -> None:
    for stack in STACKS:
        cfg, files = rendered(stack)
        if first_up := installer.first_up_names(cfg):
            state = "STAND-IN until then: nodes refuse it"
            assert f"# sha256 resolved at the first pulumi up ({state}): {' '.join(first_up)}" in files["config.sh"]
    for stack in ("gce-b200-ubuntu", "gce-b200"):  # with a manifest: it pins them, no stand-in is left
        _, files = rendered(stack, artifactStore=STACK_STORE, artifactStoreManifest="ab" * 32)
        text = files["config.sh"]
        assert "STAND-IN" not in text and "STORE_MANIFEST=" + "ab" * 32 in text
        assert "# Pinned only by the store manifest (" + "ab" * 32 + "): " in text


def test_the_cited_pins_match_the_urls_they_were_published_for() -> None:
    assert installer.gdrcopy_url("2.5.1") == "https://github.com/NVIDIA/gdrcopy/archive/v2.5.1.tar.gz"
    from components.config import upstream

    assert upstream.nvshmem_source_url("3.3.9") == (
        "https://developer.download.nvidia.com/compute/redist/nvshmem/3.3.9/source/nvshmem_src_cuda12-all-all-3.3.9.tar.gz"
    )


@pytest.mark.parametrize("stack", STACKS)
def test_the_plan_says_what_waits_for_the_store_manifest(stack: str) -> None:
    from deepep_a4.plan import command as plan_tool

    cfg, _ = rendered(stack)
    lines = plan_tool.store_warnings(cfg, stack)
    if cfg.installer.store_url and not cfg.installer.store_manifest:
        assert any(line.startswith("STAND-IN: no artifactStoreManifest") for line in lines), lines
        assert f"deepep-a4 store build --stack {stack}" in lines[0]
    for name in installer.manifest_pinned(cfg, fetched_only=True):
        assert any(name in line for line in lines), name
    pinned, _ = rendered(stack, artifactStore=STACK_STORE, artifactStoreManifest="ab" * 32)
    assert plan_tool.store_warnings(pinned, stack) == []
    bare, _ = rendered(stack, artifactStore="")
    waiting = installer.manifest_pinned(bare, fetched_only=True)
    # Without a store: a warning for what no pin covers, and for a staged node, which stages only from a store.
    assert bool(plan_tool.store_warnings(bare, stack)) == bool(waiting or bare.staged)
