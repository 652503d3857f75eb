"""What the GCE benchmark stage reads and writes: its settings from the VM's metadata server, and the
results bucket (or a folder, in tests). Stdlib only: shipped next to bench_stage.py."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

try:  # in the package (tests) or next to each other on the VM
    from scripts import names
except ImportError:  # pragma: no cover - on a VM
    import names  # type: ignore[no-redef]

STARTUP_LOG = names.GCE_STARTUP_LOG

METADATA = "http://metadata.google.internal/computeMetadata/v1"
GCS = "https://storage.googleapis.com"
LOCAL_TESTS = ("intranode", "low-latency")


def say(msg: str) -> None:
    print(f"[gce-bench] {msg}", flush=True)


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- settings --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Peer:
    rank: int
    name: str
    ip: str


@dataclass(frozen=True)
class Settings:
    """Everything the stage needs; on a VM it comes from the instance metadata (see gce_bench.py)."""

    rank: int
    world_size: int
    master_addr: str
    master_port: int
    bucket: str
    run_id: str
    tests: tuple[str, ...]
    runner_args: tuple[str, ...]
    runner_env: dict[str, str]
    peers: tuple[Peer, ...]
    peer_wait_s: int
    poll_s: float = 20.0
    results_dir: str = names.GCE_RESULTS_DIR
    runner: str = ""
    python: tuple[str, ...] = ()
    test_pythons: tuple[str, ...] = ()
    image: str = ""  # the VM's boot image (components/gce/fleet.py), recorded in what ran

    @staticmethod
    def from_attributes(attrs: dict[str, str]) -> Settings:
        bench = json.loads(attrs["deepep-bench"])
        return Settings(
            rank=int(attrs["deepep-rank"]),
            world_size=int(attrs["deepep-world-size"]),
            master_addr=attrs["deepep-master-addr"],
            master_port=int(attrs["deepep-master-port"]),
            bucket=attrs["deepep-bucket"],
            run_id=attrs["deepep-run-id"],
            tests=tuple(bench["tests"]),
            runner_args=tuple(bench["runnerArgs"]),
            runner_env={str(k): str(v) for k, v in bench.get("runnerEnv", {}).items()},
            peers=tuple(Peer(p["rank"], p["name"], p["ip"]) for p in bench["peers"]),
            peer_wait_s=int(bench["peerWaitSeconds"]),
            poll_s=float(bench.get("pollSeconds", 20)),
            results_dir=bench.get("resultsDir", names.GCE_RESULTS_DIR),
            runner=bench.get("runner", ""),
            python=tuple(bench.get("python", ())),
            test_pythons=tuple(bench.get("testPythons", ())),
            image=attrs.get("deepep-image", ""),
        )

    def peer(self, rank: int) -> Peer:
        return next((p for p in self.peers if p.rank == rank), Peer(rank, f"node-{rank}", "?"))


def request(url: str, **kwargs: Any) -> urllib.request.Request:
    """A request to the metadata server or Cloud Storage, the only two places this file talks to."""
    if not url.startswith((METADATA + "/", GCS + "/")):
        raise ValueError(f"refusing to fetch {url}")
    return urllib.request.Request(url, **kwargs)  # noqa: S310 (checked above)


def http(req: urllib.request.Request, tries: int = 6) -> bytes | None:
    """urlopen with backoff on 429/5xx and network errors; None on 404."""
    delay = 2.0
    for attempt in range(1, tries + 1):
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:  # noqa: S310 (fixed Google endpoints)
                return resp.read()
        except urllib.error.HTTPError as err:
            if err.code == 404:
                return None
            if (err.code not in (408, 429) and err.code < 500) or attempt == tries:
                raise
        except (urllib.error.URLError, TimeoutError, ConnectionError):
            if attempt == tries:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 60)
    return None


class NotOnVmError(RuntimeError):
    """The stage runs only on a VM of the stack: there is no metadata server here."""


METADATA_HOST = "metadata.google.internal"


def on_gce_vm(resolve: Any = socket.getaddrinfo) -> bool:
    """Whether the metadata server's name resolves: on a GCE VM it always does, at once; elsewhere it
    does not, and asking it over HTTP would only wait through the retries."""
    try:
        resolve(METADATA_HOST, 80)
    except OSError:
        return False
    return True


def metadata_attributes() -> dict[str, str]:
    if not on_gce_vm():
        raise NotOnVmError(
            f"{METADATA_HOST} does not resolve: this is not a GCE VM of the stack (the stage runs there, from the "
            "startup script); pass --attributes FILE to run it elsewhere"
        )
    req = request(f"{METADATA}/instance/attributes/?recursive=true", headers={"Metadata-Flavor": "Google"})
    body = http(req)
    if body is None:
        raise RuntimeError("the metadata server has no instance attributes")
    return json.loads(body)


# -- storage ---------------------------------------------------------------------------------------


class Store(Protocol):
    def put(self, name: str, data: bytes) -> None: ...
    def get(self, name: str) -> bytes | None: ...
    def list(self, prefix: str) -> list[str]: ...
    def delete(self, name: str) -> None: ...


class GcsStore:
    """The results bucket through the GCS JSON API, with the VM service account's token."""

    def __init__(self, bucket: str):
        self.bucket = bucket
        self._token = ""
        self._expires = 0.0

    def _auth(self) -> dict[str, str]:
        if time.monotonic() > self._expires:
            req = request(f"{METADATA}/instance/service-accounts/default/token", headers={"Metadata-Flavor": "Google"})
            doc = json.loads(http(req) or b"{}")
            self._token = doc["access_token"]
            self._expires = time.monotonic() + int(doc.get("expires_in", 300)) - 120
        return {"Authorization": f"Bearer {self._token}"}

    def _obj(self, name: str) -> str:
        return f"{GCS}/storage/v1/b/{self.bucket}/o/{urllib.parse.quote(name, safe='')}"

    def put(self, name: str, data: bytes) -> None:
        query = urllib.parse.urlencode({"uploadType": "media", "name": name})
        url = f"{GCS}/upload/storage/v1/b/{self.bucket}/o?{query}"
        headers = {**self._auth(), "Content-Type": "application/octet-stream"}
        http(request(url, data=data, headers=headers, method="POST"))

    def get(self, name: str) -> bytes | None:
        return http(request(f"{self._obj(name)}?alt=media", headers=self._auth()))

    def list(self, prefix: str) -> list[str]:
        names: list[str] = []
        token = ""
        while True:
            query = {"prefix": prefix, "fields": "items(name),nextPageToken"}
            if token:
                query["pageToken"] = token
            url = f"{GCS}/storage/v1/b/{self.bucket}/o?{urllib.parse.urlencode(query)}"
            doc = json.loads(http(request(url, headers=self._auth())) or b"{}")
            names += [item["name"] for item in doc.get("items", [])]
            token = doc.get("nextPageToken", "")
            if not token:
                return names

    def delete(self, name: str) -> None:
        http(request(self._obj(name), headers=self._auth(), method="DELETE"))


class DirStore:
    """A folder standing in for the bucket (tests, and dry runs on a workstation)."""

    def __init__(self, root: str):
        self.root = Path(root)

    def put(self, name: str, data: bytes) -> None:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)

    def get(self, name: str) -> bytes | None:
        path = self.root / name
        return path.read_bytes() if path.is_file() else None

    def list(self, prefix: str) -> list[str]:
        if not self.root.is_dir():
            return []
        names = (str(p.relative_to(self.root)) for p in self.root.rglob("*") if p.is_file())
        return sorted(n for n in names if n.startswith(prefix) and not n.endswith(".tmp"))

    def delete(self, name: str) -> None:
        (self.root / name).unlink(missing_ok=True)


def put_json(store: Store, name: str, doc: dict[str, Any]) -> None:
    store.put(name, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode())


def get_json(store: Store, name: str) -> dict[str, Any] | None:
    data = store.get(name)
    return json.loads(data) if data else None
