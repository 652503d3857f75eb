"""The two Google endpoints the probes talk to: the metadata server (a token and the account it belongs to) and
Cloud Storage's JSON API (the store's manifest and parts, a results object). Stdlib only, next to the probes.

Endpoints, each overridable the way Google's own client libraries do it, so a test points them at local
stand-ins:
- GCE_METADATA_HOST (then GCE_METADATA_ROOT): the metadata server's host[:port], default
  metadata.google.internal, as google-auth does (googleapis/google-auth-library-python,
  google/auth/compute_engine/_metadata.py @19c29068: `_METADATA_ROOT = "http://{}/computeMetadata/v1/"`);
- STORAGE_EMULATOR_HOST: Cloud Storage's endpoint, default https://storage.googleapis.com, as
  google-cloud-storage does (googleapis/python-storage, google/cloud/storage/abstracts/base_client.py
  @019a0d8f: rule 2, the variable is the API endpoint). A bare HOST:PORT is taken as http:// (emulators speak
  plain HTTP).
"""

from __future__ import annotations

import hashlib
import urllib.parse
from dataclasses import dataclass

try:  # in the package (tests) or next to each other (pod, VM, build step)
    from scripts.rehearse import common
except ImportError:  # pragma: no cover - shipped as plain files
    import common  # type: ignore[no-redef]

METADATA_HOST = "metadata.google.internal"
STORAGE_HOST = "storage.googleapis.com"
FLAVOR = {"Metadata-Flavor": "Google"}
ACCOUNT = "instance/service-accounts/default"


def metadata_root(inputs: common.Inputs) -> str:
    host = inputs.get("GCE_METADATA_HOST") or inputs.get("GCE_METADATA_ROOT") or METADATA_HOST
    return f"http://{host}/computeMetadata/v1"


def storage_root(inputs: common.Inputs) -> str:
    host = inputs.get("STORAGE_EMULATOR_HOST")
    if not host:
        return f"https://{STORAGE_HOST}"
    return (host if "://" in host else f"http://{host}").rstrip("/")


@dataclass(frozen=True)
class Token:
    value: str
    email: str
    evidence: str


def token(inputs: common.Inputs, expect_email: str = "") -> Token:
    """The default account's access token and email from the metadata server.

    The answer's format is Google's ("Authenticate workloads using service accounts", the token request:
    https://cloud.google.com/compute/docs/access/authenticate-workloads, a JSON object with access_token,
    expires_in and token_type "Bearer"); the email is plain text. On GKE with Workload Identity Federation and
    no Google service account, the GKE metadata server answers the email with the workload pool,
    PROJECT_ID.svc.id.goog (https://cloud.google.com/kubernetes-engine/docs/how-to/workload-identity)."""
    root = metadata_root(inputs)
    url = f"{root}/{ACCOUNT}/token"
    reply = common.http("GET", url, headers=FLAVOR, timeout=15)
    if reply.status != 200:
        raise common.SeamFailedError(f"GET {url} -> {reply.status} {reply.text()}")
    doc = reply.json()
    value, kind, ttl = doc.get("access_token"), doc.get("token_type"), doc.get("expires_in")
    if not isinstance(value, str) or not value or kind != "Bearer" or not isinstance(ttl, int) or ttl <= 0:
        shape = {k: (f"<{len(v)} chars>" if k == "access_token" and isinstance(v, str) else v) for k, v in doc.items()}
        raise common.SeamFailedError(f"GET {url} -> 200 but not a Bearer token with expires_in > 0: {shape}")
    email_url = f"{root}/{ACCOUNT}/email"
    got = common.http("GET", email_url, headers=FLAVOR, timeout=15)
    if got.status != 200:
        raise common.SeamFailedError(f"GET {email_url} -> {got.status} {got.text()}")
    email = got.text().strip()
    evidence = (
        f"GET {url} -> 200 {{access_token: <{len(value)} chars>, expires_in: {ttl}, token_type: Bearer}}; "
        f"GET {email_url} -> {email}"
    )
    if expect_email and email != expect_email:
        raise common.SeamFailedError(f"{evidence}; expected {expect_email}: the token is another principal's")
    return Token(value, email, evidence)


def split_gs(url: str, name: str) -> tuple[str, str]:
    """gs://BUCKET[/PREFIX] -> (BUCKET, PREFIX without slashes at either end); InputError naming the variable."""
    if not url.startswith("gs://") or not url[5:].split("/", 1)[0]:
        raise common.InputError(f"{name}={url!r} is not gs://BUCKET[/PREFIX]")
    bucket, _, prefix = url[5:].partition("/")
    return bucket, prefix.strip("/")


def object_name(prefix: str, rel: str) -> str:
    return f"{prefix}/{rel}" if prefix else rel


@dataclass(frozen=True)
class Gcs:
    """Cloud Storage's JSON API with one principal's token (https://cloud.google.com/storage/docs/json_api)."""

    root: str
    token: str

    def _auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def media_url(self, bucket: str, name: str) -> str:
        return f"{self.root}/storage/v1/b/{bucket}/o/{urllib.parse.quote(name, safe='')}?alt=media"

    def read_sha256(self, bucket: str, name: str) -> tuple[str, str]:
        """(sha256, evidence) of the object's bytes, streamed (objects.get with alt=media; the evidence names
        the object as gs://BUCKET/NAME, the endpoint is the store's)."""
        url, digest, size = self.media_url(bucket, name), hashlib.sha256(), 0

        def sink(chunk: bytes) -> None:
            nonlocal size
            digest.update(chunk)
            size += len(chunk)

        reply = common.http("GET", url, headers=self._auth(), timeout=120, sink=sink)
        if reply.status != 200:
            raise common.SeamFailedError(f"objects.get gs://{bucket}/{name} -> {reply.status} {reply.text()}")
        return digest.hexdigest(), f"objects.get gs://{bucket}/{name} -> 200 ({size} bytes)"

    def read(self, bucket: str, name: str) -> tuple[bytes, str]:
        url = self.media_url(bucket, name)
        reply = common.http("GET", url, headers=self._auth(), timeout=60)
        if reply.status != 200:
            raise common.SeamFailedError(f"objects.get gs://{bucket}/{name} -> {reply.status} {reply.text()}")
        return reply.body, f"objects.get gs://{bucket}/{name} -> 200 ({len(reply.body)} bytes)"

    def create(self, bucket: str, name: str, data: bytes) -> common.Reply:
        """A create-only media upload (objects.insert, uploadType=media, ifGenerationMatch=0), as the store's
        writers do (scripts/install/store.sh `store_put`)."""
        query = urllib.parse.urlencode({"uploadType": "media", "name": name, "ifGenerationMatch": "0"})
        url = f"{self.root}/upload/storage/v1/b/{bucket}/o?{query}"
        headers = {**self._auth(), "Content-Type": "text/plain"}
        return common.http("POST", url, headers=headers, data=data, timeout=60)


def check_store(gcs: Gcs, store_url: str, manifest_sha: str, want_object: str = "") -> str:
    """The pinned manifest (manifests/SHA256.txt, whose own sha256 is its name) and one object it lists
    (`want_object`, else the first part: a `.tar` entry, else the first entry), each checked against its
    sha256: what every node's installer does (scripts/install/store.sh `_manifest_file`, `store_get`)."""
    bucket, prefix = split_gs(store_url, "REHEARSAL_STORE_URL")
    name = object_name(prefix, f"manifests/{manifest_sha}.txt")
    body, evidence = gcs.read(bucket, name)
    got = hashlib.sha256(body).hexdigest()
    if got != manifest_sha:
        raise common.SeamFailedError(f"{evidence}; sha256 {got}, not the pinned {manifest_sha}: refused")
    entries = [ln.split(None, 1) for ln in body.decode("utf-8", "replace").splitlines() if ln.strip()]
    listed = {rel.strip(): sha for sha, rel in (e for e in entries if len(e) == 2)}
    if not listed:
        raise common.SeamFailedError(f"{evidence}; the manifest lists no object")
    rel = want_object or next((r for r in listed if r.endswith(".tar")), next(iter(listed)))
    if rel not in listed:
        raise common.SeamFailedError(f"{evidence}; the manifest does not list {rel}")
    sha, part_evidence = gcs.read_sha256(bucket, object_name(prefix, rel))
    evidence = f"{evidence}, sha256 matches the pin; {part_evidence}"
    if sha != listed[rel]:
        raise common.SeamFailedError(f"{evidence}; sha256 {sha}, but the manifest lists {listed[rel]} for {rel}")
    return f"{evidence}, sha256 {sha[:16]}... as the manifest lists"
