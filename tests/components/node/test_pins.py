"""Digests resolved at the first `pulumi up` (components/node/pins.py): stand-ins in the plan and a preview, the
download's sha256 at the first up, kept after it, an override that wins, one clear error, and a node that
refuses a stand-in. No network: every download is injected."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pulumi
import pytest

from components import config
from components.gce import bench as gce_bench
from components.gke.installer import configmap_key
from components.node import installer, pins
from deepep_a4.plan import engine as plan_engine
from tests.components.gce.test_startup import packed_files
from tests.conftest import of_type, one, stack_config

NVSHMEM = "nvshmem-3.5.19-source"
NVSHMEM_URL = "https://github.com/NVIDIA/nvshmem/archive/refs/tags/v3.5.19-1.tar.gz"
GCE_FIRST_UP = [NVSHMEM, "google-cloud-packages", "google-artifact-registry"]
INSTANCE = "gcp:compute/instance:Instance"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
STASH = "pulumi:index:Stash"
# gke-b200-ubuntu with NVSHMEM 3.5.19 (its own 3.3.9 has a published digest), and the DeepEP that runs it.
GKE_35: dict[str, Any] = {"nvshmemVersion": "3.5.19", "deepepRef": "29d31c095796f3c8ece47ee9cdcc167051bbeed9"}


def digest_of(url: str, served: str = "") -> str:
    return hashlib.sha256(f"{served}{url}".encode()).hexdigest()


class Downloads:
    """What a download would give: the sha256 of each URL (`served` changes the bytes), and every URL asked."""

    def __init__(self, served: str = "", fail: str = "") -> None:
        self.served, self.fail, self.asked = served, fail, []

    def __call__(self, url: str) -> str:
        self.asked.append(url)
        if self.fail and self.fail in url:
            raise OSError("HTTP Error 404: Not Found")
        return digest_of(url, self.served)


@pytest.fixture(autouse=True)
def digest_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "cache" / "digests.json"
    monkeypatch.setenv(pins.CACHE_ENV, str(path))
    return path


def cfg_of(stack: str = "gce-b200-ubuntu", **overrides: Any) -> config.StackConfig:
    return config.parse(plan_engine.project_keys(stack_config(stack, **overrides)), stack)


def sha_table(config_sh: str) -> dict[str, str]:
    block = re.search(r"(?ms)^declare -A SHA256=\(\n(.*?)^\)\n", config_sh)
    assert block
    return dict(re.findall(r"^\s+\[([^]]+)\]=(\S+)$", block[1], re.M))


def gce_config_sh(result: plan_engine.PlanResult) -> str:
    """config.sh as the GCE VMs get it: inside install.sh, packed into the startup-script metadata."""
    scripts = {vm["inputs"]["metadata"]["startup-script"] for vm in of_type(result, INSTANCE)}
    assert len(scripts) == 1
    install = packed_files(scripts.pop())["install.sh"][0].decode()
    return re.search(r"(?ms)^cat > \"\$new/config.sh\" <<'(\w+)'\n(.*?)^\1$", install)[2]  # type: ignore[index]


def up(stack: str, download: pins.Download, **overrides: Any) -> plan_engine.PlanResult:
    result, _ = plan_engine.run_program(stack, stack_config(stack, **overrides), download=download)
    return result


def test_the_first_up_names_are_what_no_project_pin_covers() -> None:
    assert installer.first_up_names(cfg_of()) == GCE_FIRST_UP
    assert installer.first_up_names(cfg_of("gce-b200")) == GCE_FIRST_UP[1:]  # staged: gIB's keys only
    assert installer.first_up_names(cfg_of("gke-b200-ubuntu")) == []  # NVSHMEM 3.3.9 is pinned; no gIB apt
    assert installer.first_up_names(cfg_of("gke-b200-ubuntu", **GKE_35)) == [NVSHMEM]
    # A stack whose store manifest pins them resolves nothing.
    pinned = cfg_of(artifactStore="gs://bucket/prefix", artifactStoreManifest="ab" * 32)
    assert installer.first_up_names(pinned) == []
    assert pins.download_urls(cfg_of())[NVSHMEM] == NVSHMEM_URL


def test_the_plan_and_a_preview_carry_the_stand_in_and_download_nothing() -> None:
    result, _ = plan_engine.run_program("gce-b200-ubuntu", stack_config("gce-b200-ubuntu"))
    table = sha_table(gce_config_sh(result))
    assert {n: table[n] for n in GCE_FIRST_UP} == dict.fromkeys(GCE_FIRST_UP, installer.FIRST_UP_STAND_IN)
    assert "# sha256 resolved at the first pulumi up (STAND-IN until then" in result.files["install/gce/config.sh"]
    stashes = [r for r in result.resources if r["type"] == STASH and r["name"].startswith("pin-")]
    assert sorted(s["inputs"]["input"] for s in stashes) == [installer.FIRST_UP_STAND_IN] * 3
    assert all(s["ignoreChanges"] == ["input"] for s in stashes)
    # A real preview: pulumi's dry run gives the stand-in too, and the downloader is never asked.
    asked = Downloads()

    @pulumi.runtime.test
    def preview() -> pulumi.Output[Any]:
        found = pins.resolved(cfg_of())
        assert found is not None
        return found.apply(lambda d: captured.update(d))

    captured: dict[str, str] = {}
    pulumi.runtime.set_mocks(plan_engine.PlanMocks("p"), preview=True)
    with pins.downloading(asked):
        preview()
    assert captured == dict.fromkeys(GCE_FIRST_UP, installer.FIRST_UP_STAND_IN) and asked.asked == []


def test_the_plan_says_which_digests_are_stand_ins(tmp_path: Path) -> None:
    from deepep_a4.plan import command as plan_tool

    lines = plan_tool.store_warnings(cfg_of(), "gce-b200-ubuntu")
    assert any(line.startswith("STAND-IN: the sha256 of " + ", ".join(GCE_FIRST_UP)) for line in lines), lines
    assert not any("nodes refuse them; set artifactStore" in line for line in lines)


def test_up_resolves_the_digests_into_the_node_config_and_keeps_the_installer_hash() -> None:
    planned, _ = plan_engine.run_program("gce-b200-ubuntu", stack_config("gce-b200-ubuntu"))
    downloads = Downloads()
    result = up("gce-b200-ubuntu", downloads)
    conf = gce_config_sh(result)
    table = sha_table(conf)
    urls = pins.download_urls(cfg_of())
    assert {n: table[n] for n in GCE_FIRST_UP} == {n: digest_of(urls[n]) for n in GCE_FIRST_UP}
    assert installer.FIRST_UP_STAND_IN not in conf and "(kept in the stack's state)" in conf
    assert sorted(downloads.asked) == sorted(urls[n] for n in GCE_FIRST_UP)
    # The digests change no installer hash: the plan's (stand-ins) and the node's are the same.
    hashes = {re.search(r"^INSTALLER_HASH=(\w+)$", t, re.M)[1] for t in (conf, gce_config_sh(planned))}  # type: ignore[index]
    assert len(hashes) == 1
    # The plan's files stay the stand-in text.
    assert installer.FIRST_UP_STAND_IN in result.files["install/gce/config.sh"]


def test_a_later_up_keeps_the_first_digest_and_the_cache_saves_the_download(digest_cache: Path) -> None:
    first = Downloads()
    up("gce-b200-ubuntu", first)
    cached = json.loads(digest_cache.read_text())
    assert cached[f"deepep-a4-demo/gce-b200-ubuntu {NVSHMEM_URL}"] == digest_of(NVSHMEM_URL)
    # The same machine: the cache answers, nothing is downloaded.
    again = Downloads(served="moved ")
    up("gce-b200-ubuntu", again)
    assert again.asked == []
    # Another stack on the same machine downloads for itself: one stack's first answer is not another's pin.
    other = Downloads(served="moved ")
    up("gce-b200-ubuntu", other, namePrefix="other-stack", project="another-project-1")
    assert NVSHMEM_URL in other.asked
    assert json.loads(digest_cache.read_text())[f"another-project-1/gce-b200-ubuntu {NVSHMEM_URL}"] == digest_of(
        NVSHMEM_URL, "moved "
    )
    # Another machine, and the URL now serves other bytes: the stack's state keeps the first digest. The
    # mock engine has no state, so the Stash's kept output is given as the real engine gives it.
    digest_cache.unlink()
    kept = {}

    class KeptState(plan_engine.PlanMocks):
        def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
            name, state = super().new_resource(args)
            if args.typ == STASH and args.name.startswith("pin-"):
                kept[args.name] = args.inputs["input"]
                state["output"] = digest_of(NVSHMEM_URL) if "nvshmem" in args.name else args.inputs["input"]
            return name, state

    moved = Downloads(served="moved ")
    captured: dict[str, str] = {}

    @pulumi.runtime.test
    def later_up() -> pulumi.Output[Any]:
        found = pins.resolved(cfg_of())
        assert found is not None
        return found.apply(lambda d: captured.update(d))

    pulumi.runtime.set_mocks(KeptState("p"), preview=False)
    with pins.downloading(moved):
        later_up()
    assert kept[next(k for k in kept if "nvshmem" in k)] == digest_of(NVSHMEM_URL, "moved ")  # the new input
    assert captured[NVSHMEM] == digest_of(NVSHMEM_URL)  # the first digest


def test_an_override_wins_and_nothing_is_downloaded() -> None:
    sha = "cd" * 32
    override = {"nvshmem": {"version": "3.5.19", "url": NVSHMEM_URL, "sha256": sha}}
    cfg = cfg_of("gke-b200-ubuntu", **GKE_35, versionOverrides=json.dumps(override))
    assert installer.first_up_names(cfg) == []
    downloads = Downloads()
    result = up("gke-b200-ubuntu", downloads, **GKE_35, versionOverrides=json.dumps(override))
    assert downloads.asked == []
    data = one(result, CONFIG_MAP, "deepep-installer-files")["inputs"]["data"]
    assert sha_table(data[configmap_key("config.sh")])[NVSHMEM] == sha
    assert not [r for r in result.resources if r["type"] == STASH and r["name"].startswith("pin-")]


def test_gke_nodes_get_the_digest_in_their_configmap() -> None:
    downloads = Downloads()
    result = up("gke-b200-ubuntu", downloads, **GKE_35)
    data = one(result, CONFIG_MAP, "deepep-installer-files")["inputs"]["data"]
    assert sha_table(data[configmap_key("config.sh")])[NVSHMEM] == digest_of(NVSHMEM_URL)
    assert downloads.asked == [NVSHMEM_URL]


def test_a_failed_download_is_one_error_naming_the_url() -> None:
    with pytest.raises(Exception, match=re.escape(NVSHMEM_URL)) as err:
        up("gce-b200-ubuntu", Downloads(fail="nvshmem"))
    text = str(err.value)
    assert f"the sha256 of {NVSHMEM} could not be resolved" in text and "404" in text
    assert "versionOverrides" in text


def test_the_real_downloader_takes_https_only_and_bounds_the_size(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(pins.PinError, match="not https"):
        pins.https_sha256("http://example.invalid/x")

    class Body:
        def __init__(self) -> None:
            self.left = 3

        def __enter__(self) -> Body:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def read(self, n: int) -> bytes:
            self.left -= 1
            return b"x" * 10 if self.left >= 0 else b""

    class Opener:
        def open(self, request: object, timeout: float) -> Body:
            return Body()

    monkeypatch.setattr(pins.urllib.request, "build_opener", lambda *handlers: Opener())
    assert pins.https_sha256("https://example.invalid/x") == hashlib.sha256(b"x" * 30).hexdigest()
    monkeypatch.setattr(pins, "MAX_BYTES", 15)
    with pytest.raises(pins.PinError, match="more than 15 bytes"):
        pins.https_sha256("https://example.invalid/x")


def test_a_node_given_a_stand_in_refuses_it_by_name(tmp_path: Path) -> None:
    # lib.sh's fetch on a stub machine: config.sh and lib.sh as rendered, a download pinned by the stand-in.
    files = installer.render_installer(cfg_of(), "gce")
    assert sha_table(files["config.sh"])[NVSHMEM] == installer.FIRST_UP_STAND_IN
    for rel in ("config.sh", "lib.sh", "store.sh"):
        (tmp_path / rel).write_text(files[rel])
    script = (
        'set -Eeuo pipefail\nHERE="$1"\nsource "$HERE/config.sh"\nsource "$HERE/lib.sh"\n'
        'STATE="$HERE/state" CACHE="$HERE/cache"\nmkdir -p "$STATE" "$CACHE"\n'
        f'fetch "$NVSHMEM_SRC_URL" "$CACHE/nv.tgz" {NVSHMEM}\n'
    )
    (tmp_path / "t.sh").write_text(script)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "DEEPEP_INSTALL_ROOT": str(tmp_path / "root")}
    proc = subprocess.run(
        ["bash", str(tmp_path / "t.sh"), str(tmp_path)], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode != 0
    assert f'the pin of {NVSHMEM} is "{installer.FIRST_UP_STAND_IN}", not a sha256' in proc.stderr
    assert "pulumi up" in proc.stderr
    assert not (tmp_path / "cache" / "nv.tgz").exists()


def test_the_startup_script_with_digests_fits_gce(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = cfg_of()
    resolved = {n: digest_of(n) for n in GCE_FIRST_UP}
    script = gce_bench.render_startup_script(cfg, resolved)
    assert len(script.encode()) <= gce_bench.STARTUP_SCRIPT_BUDGET
    conf = packed_files(script)["install.sh"][0].decode()
    assert all(d in conf for d in resolved.values())
