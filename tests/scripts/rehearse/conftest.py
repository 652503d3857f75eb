"""The stand-ins the rehearsal probes run against: a Cloud Storage emulator from PyPI (gcp-storage-emulator) behind
Cloud Storage's authorization (tests/fixtures/rehearse/gcs_iam.py), the metadata server and the Kubernetes API
(tests/fixtures/rehearse/), all on 127.0.0.1, and a hosts file in place of DNS."""

from __future__ import annotations

import hashlib
import io
import json
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from gcp_storage_emulator.server import create_server

from scripts.rehearse import common
from tests.fixtures.rehearse import serve
from tests.fixtures.rehearse.gcs_iam import GcsIam, Grant
from tests.fixtures.rehearse.kube_api import KubeApi, node
from tests.fixtures.rehearse.metadata_server import MetadataServer

STORE_BUCKET, STORE_PREFIX = "demo-artifacts", "store"
RESULTS_BUCKET = "demo-results"
STAGE_PRINCIPAL = "demo-project.svc.id.goog"
PART = "artifacts/pack-userspace/0a1b2c/ubuntu24.04/00.tar"


def put(port: int, bucket: str, name: str, data: bytes) -> None:
    """Straight into the emulator (the store's builder, before the rehearsal)."""
    query = urllib.parse.urlencode({"uploadType": "media", "name": name})
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/upload/storage/v1/b/{bucket}/o?{query}", data=data, method="POST"
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200


@dataclass
class Store:
    """A store as `deepep-a4 store build` leaves it: parts and the manifest listing their sha256."""

    emulator_port: int
    manifest_sha: str = ""
    part: bytes = b""
    written: dict[str, bytes] = field(default_factory=dict)

    def publish(self, objects: dict[str, bytes], listed: dict[str, str] | None = None) -> None:
        for rel, data in objects.items():
            put(self.emulator_port, STORE_BUCKET, f"{STORE_PREFIX}/{rel}", data)
        digests = {rel: hashlib.sha256(data).hexdigest() for rel, data in objects.items()} | (listed or {})
        manifest = "".join(f"{sha}  {rel}\n" for rel, sha in sorted(digests.items())).encode()
        self.manifest_sha = hashlib.sha256(manifest).hexdigest()
        put(self.emulator_port, STORE_BUCKET, f"{STORE_PREFIX}/manifests/{self.manifest_sha}.txt", manifest)


@dataclass
class World:
    """Everything a probe talks to, and the environment that points it there."""

    tmp: Path
    metadata: MetadataServer
    metadata_at: str
    gcs: GcsIam
    gcs_at: str
    store: Store
    emulator_port: int
    hosts: Path
    env: dict[str, str] = field(default_factory=dict)

    def run(self, main: object, **overrides: str) -> tuple[int, list[dict[str, object]]]:
        """Runs a probe's main(env=..., out=...) in-process; its exit code and its parsed REHEARSAL lines."""
        env = {k: v for k, v in (self.env | overrides).items() if v is not None}
        out = io.StringIO()
        rc = main(env=env, out=out)  # type: ignore[operator]
        lines = [common.parse_line(ln) for ln in out.getvalue().splitlines()]
        assert None not in lines, out.getvalue()  # every stdout line is a REHEARSAL line
        return rc, [ln for ln in lines if ln is not None]


def status_of(lines: list[dict[str, object]]) -> dict[str, object]:
    return {str(ln["seam"]): ln["status"] for ln in lines}


def evidence_of(lines: list[dict[str, object]], seam: str) -> str:
    return next(str(ln["evidence"]) for ln in lines if ln["seam"] == seam)


@pytest.fixture(scope="module")
def emulator() -> Iterator[Any]:
    """One emulator per test module (stopping one takes half a second); `world` empties it for each test."""
    server = create_server("127.0.0.1", 0, in_memory=True, default_bucket=STORE_BUCKET)
    server.start()
    try:
        port = server._api._httpd.server_address[1]  # the OS's free port  # type: ignore[union-attr]
        urllib.request.urlopen(  # the results bucket (buckets.insert)
            urllib.request.Request(
                f"http://127.0.0.1:{port}/storage/v1/b",
                data=json.dumps({"name": RESULTS_BUCKET}).encode(),
                headers={"Content-Type": "application/json"},
                method="POST",
            ),
            timeout=10,
        ).close()
        yield server
    finally:
        server.stop()


@pytest.fixture
def world(tmp_path: Path, emulator: Any) -> Iterator[World]:
    emulator.wipe(keep_buckets=True)
    port = emulator._api._httpd.server_address[1]  # type: ignore[union-attr]
    metadata = MetadataServer(email=STAGE_PRINCIPAL)
    gcs = GcsIam(port, tokens={metadata.token: STAGE_PRINCIPAL})
    gcs.grants.append(Grant(STAGE_PRINCIPAL, STORE_BUCKET, STORE_PREFIX, frozenset({"storage.objects.get"})))
    store = Store(port)
    store.part = b"part bytes of the staged user space\n" * 64
    store.publish({PART: store.part, "sources/gdrcopy-2.5.1.tar.gz": b"source"})
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 metadata.google.internal\n127.0.0.1 storage.googleapis.com\n")
    with serve.Served(metadata) as md, serve.Served(gcs) as gs:
        w = World(tmp_path, metadata, md.address, gcs, gs.address, store, port, hosts)
        w.env = {
            "GCE_METADATA_HOST": md.address,
            "STORAGE_EMULATOR_HOST": f"http://{gs.address}",
            "REHEARSAL_HOSTS": str(hosts),
            "REHEARSAL_STORE_URL": f"gs://{STORE_BUCKET}/{STORE_PREFIX}",
            "REHEARSAL_STORE_MANIFEST": store.manifest_sha,
            "REHEARSAL_EXPECT_EMAIL": STAGE_PRINCIPAL,
            "REHEARSAL_RUN_ID": "r1",
        }
        yield w


@dataclass
class Kube:
    api: KubeApi
    sa_dir: Path
    port: int


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return serve.self_signed(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def kube(tmp_path: Path, tls: tuple[Path, Path]) -> Iterator[Kube]:
    import ssl

    cert, key = tls
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    api = KubeApi(nodes={"gke-rehearsal-a4-1": node("gke-rehearsal-a4-1")})
    sa = tmp_path / "serviceaccount"
    sa.mkdir()
    (sa / "token").write_text(api.token)
    (sa / "ca.crt").write_bytes(cert.read_bytes())
    with serve.Served(api, tls=context) as served:
        yield Kube(api, sa, served.port)
