"""The artifact store (docs/store.md): store.sh against a folder and a fake Cloud Storage, the installer
serving its build phases from the store, the names `deepep-a4 store fill` writes, the plan's grants, the
store's own bucket, the hardware-test profile and the bring-up table of the real H100 runs."""

from __future__ import annotations

import hashlib
import json
import runpy
import subprocess
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from click.testing import CliRunner

from components import config
from components.config import keys
from components.node import installer
from components.node import store_grants as store_program
from deepep_a4.bringup import command as bringup
from deepep_a4.cli import main as cli
from deepep_a4.hwtest import command as hwtest
from deepep_a4.plan import engine as plan_engine
from deepep_a4.store import sources as store_tool
from scripts import payload
from tests.components.node.test_installer import Machine, cfg_of, install
from tests.conftest import ROOT, one, plan

STORE_SH = ROOT / "scripts/install/store.sh"
HW = ROOT / "tests/fixtures/install/hw"
BUCKET_IAM = "gcp:storage/bucketIAMMember:BucketIAMMember"
STACK_STORE = "gs://my-project-artifacts/deepep-a4"  # a store a user names (the example stacks name none)

# Just enough of lib.sh for store.sh alone (the installer's own functions, as lib.sh defines them).
PRELUDE = """
set -euo pipefail
R=$T/root STATE=$T/root/state CACHE=$T/root/cache DOWNLOAD_TIMEOUT_S=20
mkdir -p "$STATE/phases" "$CACHE"
log() { echo "log: $*"; }
die() { echo "die: $*" >&2; exit 1; }
sha256_of() { sha256sum "$1" | cut -d' ' -f1; }
phase_note() { echo "note: $*"; }
phase_script() { echo "$PHASE_SCRIPT"; }
source "$STORE_SH"
"""


def sh(tmp: Path, script: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", PRELUDE + script],
        env={"PATH": "/usr/bin:/bin", "T": str(tmp), "STORE_SH": str(STORE_SH), **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_folder_store_is_write_once_and_checks_every_digest(tmp_path: Path) -> None:
    out = sh(
        tmp_path,
        """
echo one >"$T/a"; echo two >"$T/b"
store_put sources/x "$T/a" && echo created
store_put sources/x "$T/b" || echo refused
store_get sources/x "$T/got" && cat "$T/got"
store_get sources/absent "$T/none" || echo absent
store_claim locks/p/k 60 && echo claimed
store_claim locks/p/k 60 || echo busy
echo evil >"$STORE_URL/sources/x/data"
store_get sources/x "$T/got2"
""",
        DEEPEP_STORE_URL=str(tmp_path / "store"),
    )
    assert out.stdout.split("\n")[:6] == ["created", "refused", "one", "absent", "claimed", "busy"]
    assert out.returncode == 1
    assert "a corrupt or tampered object" in out.stderr
    assert not (tmp_path / "got2").exists()


class FakeGcs(BaseHTTPRequestHandler):
    """The JSON API calls store.sh makes, as Cloud Storage answers them (create-only uploads: 412)."""

    objects: ClassVar[dict[str, tuple[bytes, dict[str, Any]]]] = {}
    sessions: ClassVar[dict[str, dict[str, Any]]] = {}
    seen_auth: ClassVar[set[str]] = set()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, code: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        url = urllib.parse.urlparse(self.path)
        if url.path.endswith("/service-accounts/default/token"):
            assert self.headers["Metadata-Flavor"] == "Google"
            self._send(200, json.dumps({"access_token": "tok", "expires_in": 3599}).encode())
            return
        self.seen_auth.add(self.headers.get("Authorization", ""))
        name = urllib.parse.unquote(url.path.split("/o/", 1)[1])
        if name not in self.objects:
            self._send(404, b'{"error": {"code": 404}}')
        elif "alt=media" in url.query:
            self._send(200, self.objects[name][0])
        else:
            self._send(200, json.dumps({"name": name, "metadata": self.objects[name][1]}).encode())

    def do_POST(self) -> None:
        url = urllib.parse.urlparse(self.path)
        query = urllib.parse.parse_qs(url.query)
        assert query["uploadType"] == ["resumable"] and query["ifGenerationMatch"] == ["0"]
        meta = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if meta["name"] in self.objects:
            self._send(412, b'{"error": {"code": 412}}')
            return
        sid = f"s{len(self.sessions)}"
        self.sessions[sid] = meta
        self._send(200, b"", {"Location": f"http://{self.headers['Host']}/upload/session/{sid}"})

    def do_PUT(self) -> None:
        meta = self.sessions.pop(self.path.rsplit("/", 1)[1])
        data = self.rfile.read(int(self.headers["Content-Length"]))
        if meta["name"] in self.objects:
            self._send(412)
            return
        self.objects[meta["name"]] = (data, meta.get("metadata", {}))
        self._send(200, b"{}")


@pytest.fixture
def gcs() -> Iterator[str]:
    FakeGcs.objects, FakeGcs.sessions, FakeGcs.seen_auth = {}, {}, set()
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeGcs)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_a_cloud_storage_store_is_write_once_with_the_digest_in_metadata(tmp_path: Path, gcs: str) -> None:
    out = sh(
        tmp_path,
        """
echo one >"$T/a"; echo two >"$T/b"
store_put artifacts/nvshmem/k.tar.gz "$T/a" && echo created
store_put artifacts/nvshmem/k.tar.gz "$T/b" || echo refused
store_get artifacts/nvshmem/k.tar.gz "$T/got" && cat "$T/got"
store_get artifacts/none "$T/none" || echo absent
""",
        DEEPEP_STORE_URL="gs://bucket/team/deepep",
        DEEPEP_GCS_API=gcs,
        DEEPEP_METADATA_URL=gcs,
    )
    assert out.stdout.split("\n")[:4] == ["created", "refused", "one", "absent"], out.stderr
    data, meta = FakeGcs.objects["team/deepep/artifacts/nvshmem/k.tar.gz"]
    assert data == b"one\n" and meta == {"sha256": hashlib.sha256(b"one\n").hexdigest()}
    assert FakeGcs.seen_auth == {"Bearer tok"}
    FakeGcs.objects["team/deepep/artifacts/nvshmem/k.tar.gz"] = (b"evil\n", meta)
    bad = sh(
        tmp_path,
        'store_get artifacts/nvshmem/k.tar.gz "$T/got3"',
        DEEPEP_STORE_URL="gs://bucket/team/deepep",
        DEEPEP_GCS_API=gcs,
        DEEPEP_METADATA_URL=gcs,
    )
    assert bad.returncode == 1 and "tampered" in bad.stderr


def build_notes(m: Machine) -> dict[str, str]:
    return {p: m.status()["phases"][p]["note"] for p in installer.ARTIFACT_DEPS}


def test_a_node_takes_no_artifact_the_stack_has_not_pinned_and_publishes_none(tmp_path: Path) -> None:
    # A publishing node (artifactStorePublish: true) publishes the sources it downloads, never an artifact:
    # the next node would take only what the stack's store manifest pins (tests/deepep_a4/store/test_command.py).
    m = Machine(tmp_path)
    d = m.render(cfg_of(artifactStorePublish=True))
    store = tmp_path / "store"
    install_with = {"DEEPEP_STORE_URL": str(store)}
    first = m.run(d, **install_with)
    assert first.returncode == 75, first.stderr
    m.reboot()
    done = m.run(d, **install_with)
    assert done.returncode == 0
    assert "is not in the stack's store manifest (none pinned): not taken" in (m.root / "logs/nvshmem.log").read_text()
    assert all("built here" in note for note in build_notes(m).values()), build_notes(m)
    assert not (store / "artifacts").exists() and not (store / "locks").exists()
    assert (store / "sources" / f"gdrcopy-{cfg_of().versions.gdrcopy}.tar.gz" / "data").is_file()


def artifact_keys(tmp_path: Path, cfg: config.StackConfig, edit: str = "") -> dict[str, str]:
    # One machine path for every run: the install root is part of the key (DeepEP's RPATH names it).
    machine = tmp_path / "m"
    subprocess.run(["rm", "-rf", str(machine)], check=True)
    m = Machine(machine)
    d = m.render(cfg)
    if edit:
        (d / payload.phase_script(edit)).write_text((d / payload.phase_script(edit)).read_text() + "\n# edited\n")
    install(m, d)
    return {p: (m.root / "state/artifacts" / p).read_text().strip() for p in installer.ARTIFACT_DEPS}


def test_artifact_keys_follow_what_made_the_bytes_and_nothing_else(tmp_path: Path) -> None:
    base = artifact_keys(tmp_path, cfg_of())
    # An edit to a phase that builds nothing stored (DOCA-OFED) misses no cache.
    assert artifact_keys(tmp_path, cfg_of(), edit="doca-ofed") == base
    # A new NVSHMEM is a new NVSHMEM artifact and a new DeepEP artifact (which links it), same GDRCopy.
    other = artifact_keys(tmp_path, cfg_of(nvshmemVersion="3.4.5"))
    assert other["gdrcopy"] == base["gdrcopy"]
    assert other["nvshmem"] != base["nvshmem"] and other["deepep"] != base["deepep"]
    # Editing the NVSHMEM phase's script changes its key and DeepEP's, not GDRCopy's.
    edited = artifact_keys(tmp_path, cfg_of(), edit="nvshmem")
    assert edited["gdrcopy"] == base["gdrcopy"] and edited["nvshmem"] != base["nvshmem"]


def test_store_fill_writes_the_names_the_installer_asks_for(tmp_path: Path) -> None:
    cfg = cfg_of()
    names = [s.name for s in store_tool.sources(cfg)]
    v = cfg.versions
    assert names == [
        f"gdrcopy-{v.gdrcopy}.tar.gz",
        f"nvshmem-{v.nvshmem}-source",
        f"deepep-{installer.deepep_commit(v.deepep_ref)}.tar.gz",
        f"deepep-pr466-{installer.upstream.DEEPEP_PR466_HEAD}.diff",
        # gIB's signing keys: no published fingerprint here, so only the store manifest pins them.
        "google-cloud-packages",
        "google-artifact-registry",
    ]
    scripts = "\n".join(payload.installer_files(installer.PHASES).values())
    for pattern in (
        '"gdrcopy-$GDRCOPY_VERSION.tar.gz"',
        '"nvshmem-$NVSHMEM_VERSION-source"',
        '"deepep-$DEEPEP_COMMIT.tar.gz"',
        '"deepep-pr466-$DEEPEP_PR466_HEAD.diff"',
    ):
        assert pattern in scripts
    src = tmp_path / "src"
    src.mkdir()
    for name in names:
        (src / name).write_text(f"content of {name}\n")
    result = CliRunner().invoke(
        cli, ["store", "fill", "--stack", "gce-b200", "--store", str(tmp_path / "s"), "--from", str(src)]
    )
    assert result.exit_code == 0, result.output
    assert f"{len(names)} added" in result.output
    # What the workstation wrote, the node reads (same layout and digest).
    out = sh(tmp_path, f'store_get sources/{names[0]} "$T/got" && cat "$T/got"', DEEPEP_STORE_URL=str(tmp_path / "s"))
    assert out.stdout.strip().endswith(f"content of {names[0]}"), out.stderr
    again = CliRunner().invoke(
        cli, ["store", "fill", "--stack", "gce-b200", "--store", str(tmp_path / "s"), "--from", str(src)]
    )
    assert "0 added" in again.output


def test_store_fill_without_a_store_names_the_flag() -> None:
    result = CliRunner().invoke(cli, ["store", "fill", "--stack", "gce-b200", "--store", ""])
    assert result.exit_code != 0


@pytest.mark.parametrize("stack", ["gke-b200", "gce-b200"])
def test_the_plan_grants_the_nodes_the_store_prefix_only(stack: str) -> None:
    result = plan(stack, artifactStore=STACK_STORE)
    cfg = cfg_of(stack, artifactStore=STACK_STORE)
    bucket, prefix = store_program.split_store_url(cfg.installer.store_url)
    grants = [r for r in result.resources if r["type"] == BUCKET_IAM and r["parent"] == "store"]
    # Nodes only read (artifactStorePublish is off): the builder publishes.
    assert [g["inputs"]["role"] for g in grants] == [store_program.READ_ROLE]
    for g in grants:
        assert g["inputs"]["bucket"] == bucket
        assert g["inputs"]["condition"]["expression"] == (
            f'resource.name.startsWith("projects/_/buckets/{bucket}/objects/{prefix}/")'
        )
        # A supported GKE stack stages from the pod network under the staging pod's Workload Identity principal
        # (components/gke/staging_access.py); every other stack reads as its node account.
        staged_gke = cfg.platform == "gke" and cfg.node_profile == "supported"
        assert g["inputs"]["member"].startswith("principal://" if staged_gke else "serviceAccount:")
    conf = result.files[f"install/{cfg.platform}/config.sh"]
    assert f"STORE_URL={cfg.installer.store_url}" in conf


def test_nodes_get_create_access_only_when_the_stack_lets_them_publish() -> None:
    result = plan("gce-b200", artifactStore=STACK_STORE, artifactStorePublish=True)
    roles = [r["inputs"]["role"] for r in result.resources if r["type"] == BUCKET_IAM and r["parent"] == "store"]
    assert sorted(roles) == [store_program.CREATE_ROLE, store_program.READ_ROLE]
    assert keys.KEYS_BY_NAME["artifactStorePublish"].default is False


def test_no_store_means_no_grant_and_no_store_url() -> None:
    result = plan("gce-b200", artifactStore="")
    assert not [r for r in result.resources if r["parent"] == "store"]
    assert "STORE_URL=''" in result.files["install/gce/config.sh"]


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"artifactStore": "s3://bucket/x"}, "artifactStore"),
        ({"artifactStore": "gs://Bad_Bucket"}, "artifactStore"),
        ({"artifactStore": "", "artifactStoreOnly": True}, "artifactStoreOnly"),
        ({"artifactStoreManifest": "abc"}, "artifactStoreManifest"),
        ({"artifactStore": "", "artifactStoreManifest": "ab" * 32}, "artifactStoreManifest"),
    ],
)
def test_bad_store_settings_are_refused_naming_the_key(overrides: dict[str, Any], key: str) -> None:
    with pytest.raises(config.ConfigError) as err:
        cfg_of(**overrides)
    assert key in str(err.value)


def run_store_program() -> None:
    runpy.run_path(str(ROOT / "store/__main__.py"), run_name="__main__")


def test_the_store_bucket_outlives_stacks_and_cleans_up_after_itself() -> None:
    result, _ = plan_engine.run_program(
        "demo",
        {"deepep-a4-store:project": "my-proj-123", "deepep-a4-store:prefix": "team/deepep"},
        program=run_store_program,
    )
    bucket = one(result, "gcp:storage/bucket:Bucket")["inputs"]
    assert bucket["name"] == "my-proj-123-artifacts"
    assert bucket["uniformBucketLevelAccess"] is True
    assert bucket["publicAccessPrevention"] == "enforced"
    assert bucket["forceDestroy"] is False
    rules = {tuple(r["condition"]["matchesPrefixes"]): r["condition"]["age"] for r in bucket["lifecycleRules"]}
    assert rules == {("team/deepep/artifacts/", "team/deepep/sources/"): 90, ("team/deepep/locks/",): 1}
    assert result.outputs["artifactStore"] == "gs://my-proj-123-artifacts/team/deepep"
    # protect=True: `pulumi destroy` of the store stack refuses until the protection is lifted on purpose.
    assert "protect=True" in (ROOT / "components/node/store_grants.py").read_text()


def test_the_hardware_test_ships_no_phase_that_changes_the_machine(tmp_path: Path) -> None:
    cfg = cfg_of()
    files = installer.render_profile(cfg, hwtest.profile("3.5.1", "v1.2.1", "13.0", "90", "/opt/x", "python3"))
    shipped = {p.split("-", 1)[1].removesuffix(".sh") for p in files if p.startswith("phases/")}
    assert shipped == set(hwtest.PHASES)
    assert not shipped & set(hwtest.LEFT_OUT)
    conf = files["config.sh"]
    assert "HAS_RDMA_NICS=0" in conf and "STORE_ONLY=1" in conf and "TORCH_VERSION=installed" in conf
    # Its store holds the user's own files (a mirror's GDRCopy archive is not GitHub's: another sha256), so
    # their store digests hold and no published digest is shipped; a stack's render keeps them all.
    assert "STORE_TRUST_PUBLISHED=1" in conf and "declare -A SHA256=(\n)" in conf
    assert installer.CHECKSUMS["gdrcopy-2.5.1.tar.gz"] in installer.render_installer(cfg, cfg.platform)["config.sh"]
    for phase in hwtest.LEFT_OUT:
        assert f"[{phase}]=" in conf.split("declare -A LEFT_OUT=(", 1)[1]


@pytest.mark.parametrize("version", ["3.5.1", "3.4.5"])
def test_the_h100_runs_meet_the_bring_up_targets(version: str) -> None:
    cold = json.loads((HW / f"hwtest-{version}-cold.status.json").read_text())
    warm = json.loads((HW / f"hwtest-{version}-warm.status.json").read_text())
    assert cold["ready"] and warm["ready"]
    assert set(cold["leftOut"]) == set(hwtest.LEFT_OUT)
    assert bringup.store_misses(cold, warm) == []
    for phase in bringup.STORE_PHASES:
        assert "built and published" in cold["phases"][phase]["note"]
        assert "from the store" in warm["phases"][phase]["note"]
    total_warm = sum(p["seconds"] for p in warm["phases"].values())
    assert total_warm <= bringup.WARM_TARGET_S
    text = "\n".join(bringup.table(cold, warm))
    assert "| nvshmem |" in text and "field report R2" in text


def test_bringup_refuses_a_store_phase_under_the_target(tmp_path: Path) -> None:
    cold = json.loads((HW / "hwtest-3.5.1-cold.status.json").read_text())
    warm = json.loads((HW / "hwtest-3.5.1-warm.status.json").read_text())
    warm["phases"]["nvshmem"]["seconds"] = 100.0
    (tmp_path / "c.json").write_text(json.dumps(cold))
    (tmp_path / "w.json").write_text(json.dumps(warm))
    result = CliRunner().invoke(cli, ["bringup", str(tmp_path / "c.json"), str(tmp_path / "w.json")])
    assert result.exit_code != 0 and "nvshmem" in result.output


def test_when_two_nodes_miss_at_once_one_builds_and_the_other_waits_for_it(tmp_path: Path) -> None:
    # Publishers that read their own store (builders sharing a folder, the hardware test): nodes never publish.
    script = """
PHASE=nvshmem PHASE_SCRIPT=$STORE_SH CUDA_VERSION=13.0 CUDA_ARCH=90 STORE_POLL_S=1
STORE_PUBLISH=1 STORE_TRUST_PUBLISHED=1
declare -A ARTIFACT_DEPS=()
os_version() { echo 24.04; }
artifact_inputs() { echo "nvshmem=3.5.1"; }
build() { echo "built by $NODE" >>"$T/builds"; sleep 3; mkdir -p "$R/nvshmem"; echo "$NODE" >"$R/nvshmem/who"; }
with_artifact "$R/nvshmem" build
cat "$R/nvshmem/who"
"""
    store = str(tmp_path / "store")
    procs = []
    for node in ("a", "b"):
        (tmp_path / node).mkdir()
        env = {"PATH": "/usr/bin:/bin", "T": str(tmp_path / node), "STORE_SH": str(STORE_SH)}
        env |= {"DEEPEP_STORE_URL": store, "NODE": node, "DEEPEP_STORE_LOCK_WAIT_S": "30"}
        # Replacement nodes share one install root path (part of the key); the test's output goes elsewhere.
        text = (PRELUDE + script).replace("$R/nvshmem", "$T/out/nvshmem").replace("R=$T/root", "R=/opt/deepep")
        procs.append(
            subprocess.Popen(["bash", "-c", text], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        )
    outs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    builds = [(tmp_path / n / "builds").read_text() if (tmp_path / n / "builds").exists() else "" for n in "ab"]
    assert sorted(b.strip() for b in builds) == ["", f"built by {'a' if builds[0] else 'b'}"]
    waited = outs[1][0] if builds[0] else outs[0][0]
    assert "waiting" in waited and "after waiting" in waited
    # Both nodes end with the builder's bytes.
    assert outs[0][0].strip().splitlines()[-1] == outs[1][0].strip().splitlines()[-1]


def test_deepep_ran_through_the_environment_the_hardware_test_installed() -> None:
    """2 x H200: NVSHMEM 3.5.1 from source and DeepEP 29d31c0 built by the installer, tests run through its
    env file (logs as recorded); the parser the benchmarks use reads them as passed, with their figures."""
    from scripts.bench import parse as bench_parse

    expect = bench_parse.Expect(2, 1)
    [intra] = bench_parse.parse_log((HW / "h200x2_test_intranode.log").read_text(), "intranode", expect)
    [ll] = bench_parse.parse_log((HW / "h200x2_test_low_latency.log").read_text(), "low-latency", expect)
    assert intra.passed
    # Low-latency ran and printed every rank's figure, but with NVLink on and no NICs nothing proves the
    # RDMA path, so the fail-closed verdict (docs/benchmarks.md) does not call it a pass.
    assert not ll.passed and all("not run" in p or "NIC" in p for p in ll.problems), ll.problems
    assert intra.summary["values"] == {
        "combine_nvl_bw": 292.3,
        "dispatch_BF16_nvl_bw": 340.14,
        "dispatch_FP8_nvl_bw": 247.36,
    }
    assert ll.summary["values"]["dispatch+combine_bw_mean"] == 309.42
    # The same machine with the A4 env (IBGDA remote transport, NVSHMEM_DISABLE_CUDA_VMM=1) and no NICs:
    # the buffer cannot be set up; the hardware test's env therefore names no remote transport.
    [broken] = bench_parse.parse_log(
        (HW / "h200x2_test_low_latency_ibgda_env_without_nics.log").read_text(), "low-latency", expect
    )
    assert not broken.passed
    status = json.loads((HW / "hwtest-3.5.1-h200x2.status.json").read_text())
    assert status["ready"] and "built and published" in status["phases"]["nvshmem"]["note"]


def test_without_nics_the_env_file_names_no_remote_transport(tmp_path: Path) -> None:
    files = installer.render_profile(cfg_of(), hwtest.profile("3.5.1", "v1.2.1", "13.0", "90", "/opt/x", "python3"))
    assert "HAS_RDMA_NICS=0" in files["config.sh"]
    assert 'remote_transport_env "$HCA_PREFIX"' in files[payload.phase_script("env")]
    # lib.sh's function both profiles' env files take their transport lines from, run as the phases run it.
    lib = files["lib.sh"]
    funcs = "".join(
        lib[lib.index(f"{name}() {{") :].split("\n}\n", 1)[0] + "\n}\n"
        for name in ("nvshmem_ibgda_env", "nvshmem_bootstrap_env", "remote_transport_env")
    )
    # In a GKE pod NVSHMEM's UID bootstrap takes eth0 (the pod's default interface) whatever the node's table says.
    script = funcs + "NIC_HANDLER=gpu GID_INDEX=3 NVSHMEM_TRAFFIC_CLASS=52 DEEPEP_TARGET=gke SYS=/nonexistent\n"
    script += "remote_transport_env mlx5\n"
    lines = {
        nics: subprocess.run(
            ["bash", "-c", f"HAS_RDMA_NICS={nics}\n{script}"], capture_output=True, text=True, check=True
        ).stdout
        for nics in (0, 1)
    }
    assert "export NVSHMEM_REMOTE_TRANSPORT=none" in lines[0] and "ibgda" not in lines[0]
    assert "export NVSHMEM_REMOTE_TRANSPORT=ibgda" in lines[1] and "export NVSHMEM_HCA_PREFIX=mlx5" in lines[1]
    assert all("export NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME=eth0\n" in text for text in lines.values())
