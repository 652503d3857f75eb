"""`deepep-a4 store build --remote`: the store's build on Cloud Build, next to the bucket (docs/store.md).

Chosen when asked (`--remote`), or when this machine cannot run the local build: no `docker` on PATH, or not
x86_64 (an ARM laptop would compile NVSHMEM and DeepEP under emulation for hours, then upload 4.6 GB).

The request goes through the `google-cloud-build` client (`cloudbuild_v1.Build` and its messages), not
`gcloud builds submit`: the request is a typed message (a wrong field name fails here, in the tests, not in
Google's API), it is printed as the API's own JSON (`--dry-run`), and no shell-out stands between the program
and the API. What it asks for:

- the same phases as the local build (store_build.build_profile), rendered here, in the same CUDA devel image
  pinned by digest; the sources downloaded here (`store fill`, over TLS, where their digests are learned);
- the rendered installer, the local store folder with the sources and the two step scripts travel as one
  archive, `build.tar.gz`, whose sha256 the request names: the first step checks it (`sha256sum -c`) before it
  unpacks anything. Cloud Build's StorageSource must be an archive that it unpacks itself, so `build.tar.gz`
  travels inside a one-file tar.gz, `PREFIX/staging/build-SHA256.tar.gz`, pinned to its generation;
- a bounded timeout (TIMEOUT_S) and the largest default-pool machine, E2_HIGHCPU_32 (32 vCPUs, 32 GB);
- its own service account (`deepep-store-builder`, made by the store project, store/): objects under the store's
  prefix only, read and create (never overwrite or delete), and log writing. With a user-specified service
  account the logs must go to Cloud Logging or a user bucket
  (https://cloud.google.com/build/docs/securing-builds/configure-user-specified-service-accounts):
  CLOUD_LOGGING_ONLY, read back here to stream them. No credential of this machine enters the request;
- the last step publishes create-only (scripts/install/store.sh `store_put`, the nodes' own code, with the build
  account's token from the metadata server) and writes the manifest; it leaves the manifest's sha256 in
  `$BUILDER_OUTPUT/output`, which the API returns as `results.build_step_outputs`. This machine then reads the
  manifest back, checks its sha256 and prints it: the user reads it and pins it, as after a local build.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import platform
import re
import shutil
import subprocess
import tarfile
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from components.config import StackConfig
from components.node import installer, staging
from components.node.store_grants import BUILDER_ACCOUNT_ID, split_store_url
from deepep_a4.store import sources as store
from deepep_a4.store.cloud_build import BUILD_SH, PUBLISH_SH
from deepep_a4.store.estimate import MACHINE_TYPE, TIMEOUT_S

STAGING_DIR = "staging"
INNER = "build.tar.gz"
WORKSPACE = "/workspace"  # Cloud Build's shared folder between steps
STEPS = ("check-source", "build", "publish")
BUILD_CMD = "bash /deepep-build/steps/build.sh"
DONE = {"SUCCESS", "FAILURE", "INTERNAL_ERROR", "TIMEOUT", "CANCELLED", "EXPIRED"}
POLL_S = 10.0


def docker_daemon_answers() -> bool:
    """`docker version` exits non-zero when the client cannot reach the daemon ("Cannot connect to the Docker
    daemon at unix:///var/run/docker.sock. Is the docker daemon running?", docker/cli cli/command/system/version.go
    prints the client part, then returns the server error): a docker on PATH is not yet a docker that builds."""
    try:
        done = subprocess.run(
            ["docker", "version", "--format", "{{.Server.Version}}"], capture_output=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def remote_reason(
    remote: bool,
    which: Callable[[str], str | None] | None = None,
    machine: str = "",
    daemon: Callable[[], bool] | None = None,
) -> str:
    """Why the build runs on Cloud Build ("" = here, in docker)."""
    arch, which = machine or platform.machine(), which or shutil.which
    if remote:
        return "--remote"
    if which("docker") is None:
        return "no docker on PATH"
    if arch.lower() not in ("x86_64", "amd64"):
        return f"this machine is {arch}, the build is linux/amd64 (emulation would take hours)"
    if not (daemon or docker_daemon_answers)():
        return "docker is on PATH but its daemon does not answer (`docker version`)"
    return ""


def cloudbuild() -> Any:
    """The client library (imported on first use: 4 s), without google.api_core's FutureWarning about
    Python 3.11's end of life (2027-10-24): the project supports 3.11 (pyproject.toml)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        from google.cloud.devtools import cloudbuild_v1

    return cloudbuild_v1


def service_account(project: str) -> str:
    """The build's identity as the API names it: projects/{PROJECT_ID}/serviceAccounts/{ACCOUNT}."""
    return f"projects/{project}/serviceAccounts/{BUILDER_ACCOUNT_ID}@{project}.iam.gserviceaccount.com"


# -- the source archive ------------------------------------------------------------------------------------


def _tar_gz(add: Callable[[tarfile.TarFile], None], level: int = 1) -> bytes:
    """A tar.gz whose bytes depend only on its contents: sorted names, zero times and owners, gzip mtime 0."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        add(tar)
    return gzip.compress(raw.getvalue(), compresslevel=level, mtime=0)


def _info(name: str, size: int = 0, mode: int = 0o644, kind: bytes = tarfile.REGTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.type, info.mtime = size, mode, kind, 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def pack(work: Path) -> bytes:
    """build.tar.gz: installer/, store/ (the sources) and steps/ of the work folder, byte for byte."""

    def add(tar: tarfile.TarFile) -> None:
        for top in ("installer", "store", "steps"):
            base = work / top
            for path in sorted([base, *base.rglob("*")]):
                if path.name.startswith(".stage."):
                    continue
                name = path.relative_to(work).as_posix()
                # What the nodes' unpacker refuses (scripts/install/store.sh _check_members) is never packed: a
                # name with a control character, or anything but a regular file or folder (a link here would
                # pack what it points to, from outside the work folder).
                if any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
                    raise click.ClickException(f"{name!r} in {work} has a control character in its name: refused")
                if path.is_symlink() or not (path.is_dir() or path.is_file()):
                    raise click.ClickException(f"{name!r} in {work} is not a regular file or folder: refused")
                if path.is_dir():
                    tar.addfile(_info(name, mode=0o755, kind=tarfile.DIRTYPE))
                else:
                    data = path.read_bytes()
                    tar.addfile(_info(name, len(data), 0o755 if path.suffix == ".sh" else 0o644), io.BytesIO(data))

    return _tar_gz(add)


def wrap(inner: bytes) -> bytes:
    """The object Cloud Build fetches and unpacks: one file, build.tar.gz (stored: it is compressed already)."""
    return _tar_gz(lambda tar: tar.addfile(_info(INNER, len(inner)), io.BytesIO(inner)), level=0)


# -- the step scripts (inside the checked archive) ----------------------------------------------------------


def publish_list(cfg: StackConfig) -> str:
    """What the publish step vouches for (store_build.built, before the build): fixed objects by name, and for
    the host profile each build phase's artifact by the key the build leaves in its state."""
    if cfg.staged:
        return "".join(f"object {rel}\n" for rel in staging.objects(cfg, cfg.platform).values())
    lines = [f"object {store.SOURCES_DIR}/{s.name}" for s in store.sources(cfg)]
    lines += [f"artifact {p} {'parts' if p == 'pytorch' else 'tar.gz'}" for p in (*installer.ARTIFACT_DEPS, "pytorch")]
    return "".join(line + "\n" for line in lines)


def write_steps(cfg: StackConfig, work: Path) -> None:
    steps = work / "steps"
    steps.mkdir(parents=True, exist_ok=True)
    (steps / "build.sh").write_text(BUILD_SH)
    (steps / "publish.sh").write_text(PUBLISH_SH)
    (steps / "publish.list").write_text(publish_list(cfg))


# -- the request -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    project: str  # where the build runs and its account lives
    region: str
    store_url: str  # gs://BUCKET/PREFIX
    root: str  # the nodes' install root the build runs at (store_build.build_root)

    @property
    def parent(self) -> str:
        return f"projects/{self.project}/locations/{self.region}"


def source_object(store_url: str, sha: str) -> str:
    _, prefix = split_store_url(store_url)
    return f"{prefix + '/' if prefix else ''}{STAGING_DIR}/build-{sha}.tar.gz"


def request(cfg: StackConfig, image: str, target: Target, sha: str, generation: int = 0) -> Any:
    """The Cloud Build request (cloudbuild_v1.Build). No `$` in any step: Cloud Build would substitute it."""
    from google.protobuf import duration_pb2

    cb = cloudbuild()

    bucket, _ = split_store_url(target.store_url)
    root = f"ln -sfn {WORKSPACE}/build /deepep-build && "  # the paths of the local build's mounts
    env = ["DEEPEP_STORE_URL=/deepep-build/store", f"DEEPEP_INSTALL_ROOT={target.root}"]
    # Cloud Build unpacks the source object into the workspace: anything there but the checked archive (a
    # planted phases/ or steps/ beside it) is refused before a step runs, and the archive must be a plain file.
    only = (
        f"cd {WORKSPACE} && if find . -mindepth 1 -maxdepth 1 ! -name {INNER} | grep -q .; then "
        f"echo 'check-source: the workspace holds more than {INNER}: refused' >&2; ls -la >&2; exit 1; fi && "
        f"test -f {INNER} && test ! -L {INNER}"
    )
    untar = f"tar -xzf {INNER} -C build --no-same-owner --no-same-permissions"
    check = f"{only} && echo '{sha}  {INNER}' | sha256sum -c - && mkdir -p build && {untar}"
    steps = [
        cb.BuildStep(id=STEPS[0], name=image, entrypoint="bash", args=["-c", check]),
        cb.BuildStep(id=STEPS[1], name=image, entrypoint="bash", args=["-c", root + BUILD_CMD], env=env),
        cb.BuildStep(
            id=STEPS[2],
            name=image,
            entrypoint="bash",
            args=["-c", root + "bash /deepep-build/steps/publish.sh"],
            env=[f"STORE_URL={target.store_url}"],
        ),
    ]  # fmt: skip
    return cb.Build(
        steps=steps,
        source=cb.Source(
            storage_source=cb.StorageSource(
                bucket=bucket, object_=source_object(target.store_url, sha), generation=generation
            )
        ),
        timeout=duration_pb2.Duration(seconds=TIMEOUT_S),
        service_account=service_account(target.project),
        options=cb.BuildOptions(
            machine_type=cb.BuildOptions.MachineType[MACHINE_TYPE],
            logging=cb.BuildOptions.LoggingMode.CLOUD_LOGGING_ONLY,
        ),
        tags=["deepep-a4-store", re.sub(r"[^\w.-]", "-", cfg.stack)[:100]],
    )


def as_json(build: Any) -> str:
    cb = cloudbuild()
    return cb.Build.to_json(build, indent=2, use_integers_for_enums=False, always_print_fields_with_no_presence=False)


# -- following the build -------------------------------------------------------------------------------------


class CloudLogs:
    """New lines of one build's log in Cloud Logging (entries.list,
    https://cloud.google.com/logging/docs/reference/v2/rest/v2/entries/list), read with this machine's
    application-default credentials. `post(url, body) -> dict` is the HTTP call (a fake in tests)."""

    URL = "https://logging.googleapis.com/v2/entries:list"

    def __init__(self, project: str, build_id: str, post: Callable[[str, dict[str, Any]], dict[str, Any]]):
        self.project, self.build_id, self.post = project, build_id, post
        self.since = ""
        self.seen: set[str] = set()

    def lines(self) -> Iterator[str]:
        flt = f'resource.type="build" AND resource.labels.build_id="{self.build_id}"'
        if self.since:
            flt += f' AND timestamp>="{self.since}"'
        token = ""
        while True:
            body = {"resourceNames": [f"projects/{self.project}"], "filter": flt, "orderBy": "timestamp asc"}
            body |= {"pageSize": 1000} | ({"pageToken": token} if token else {})
            page = self.post(self.URL, body)
            for entry in page.get("entries") or []:
                key = str(entry.get("insertId", ""))
                if key in self.seen:
                    continue
                self.seen.add(key)
                self.since = max(self.since, str(entry.get("timestamp", "")))
                yield str(entry.get("textPayload", "")).rstrip("\n")
            token = page.get("nextPageToken") or ""
            if not token:
                return


def google_post() -> Callable[[str, dict[str, Any]], dict[str, Any]]:
    import google.auth
    from google.auth.transport.requests import AuthorizedSession

    creds, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/logging.read"])
    session = AuthorizedSession(creds)

    def post(url: str, body: dict[str, Any]) -> dict[str, Any]:
        resp = session.post(url, json=body, timeout=60)
        resp.raise_for_status()
        return resp.json()

    return post


def follow(client: Any, name: str, logs: CloudLogs, echo=click.echo, sleep=time.sleep, poll_s: float = POLL_S) -> Any:
    """Polls the build until it ends, echoing its log as it grows; returns the last Build."""
    while True:
        build = client.get_build(name=name)
        for line in logs.lines():
            echo(line)
        if build.status.name in DONE:
            sleep(poll_s)  # Cloud Logging may lag the build's end by seconds: one last read
            for line in logs.lines():
                echo(line)
            return build
        sleep(poll_s)


def manifest_sha(build: Any) -> str:
    """The publish step's output: the manifest's sha256 (`$BUILDER_OUTPUT/output`, results.build_step_outputs)."""
    outputs = list(build.results.build_step_outputs)
    text = outputs[STEPS.index("publish")].decode().strip() if len(outputs) > STEPS.index("publish") else ""
    if not re.fullmatch(r"[0-9a-f]{64}", text):
        raise click.ClickException(f"the build {build.id} left no manifest sha256 (publish step output {text[:80]!r})")
    return text


# -- the whole remote build ------------------------------------------------------------------------------------


def prepare(cfg: StackConfig, work: Path, from_dir: Path | None, fill: bool, echo=click.echo) -> tuple[bytes, str]:
    """WORK holds the rendered build (store_build.render, as the local build): fills its sources unless told not
    to (a dry run packs what is there), writes the step scripts, returns build.tar.gz with its sha256."""
    if fill:
        store.fill(store.sources(cfg), store.LocalStore((work / "store").resolve()), from_dir, echo)
    write_steps(cfg, work)
    inner = pack(work)
    return inner, hashlib.sha256(inner).hexdigest()


def region_refused(err: Exception, target: Target) -> click.ClickException | None:
    """Cloud Build's FAILED_PRECONDITION on create_build as one line naming the setting, or None for any other
    error. A project restricted to Cloud Build's six regions gets it elsewhere ("due to quota restrictions,
    cannot run builds in this region": components/config/cloud_build.py cites the page and the message)."""
    from google.api_core import exceptions

    from components.config import cloud_build

    if not isinstance(err, exceptions.FailedPrecondition):
        return None
    allowed = ", ".join(cloud_build.ALWAYS_ALLOWED)
    return click.ClickException(
        f"Cloud Build refused a build in {target.region} for project {target.project} (FAILED_PRECONDITION: "
        f"{err.message}): set deepep-a4:{cloud_build.KEY} to a region every project may build in ({allowed}; "
        f"{cloud_build.SOURCE}), e.g. pulumi config set deepep-a4:{cloud_build.KEY} {cloud_build.DEFAULT_REGION}"
    )


def make_client() -> Any:
    cb = cloudbuild()
    return cb.CloudBuildClient()


def run(
    cfg: StackConfig,
    work: Path,
    image: str,
    target: Target,
    from_dir: Path | None,
    echo=click.echo,
    client: Any = None,
    post: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None,
    gcs: store.GcsStore | None = None,
    sleep=time.sleep,
) -> str:
    """WORK rendered (store_build.render): uploads the source, submits the build, streams its log; returns the
    manifest's sha256, checked."""
    inner, sha = prepare(cfg, work, from_dir, fill=True, echo=echo)
    gcs = gcs or store.GcsStore(target.store_url)
    rel = f"{STAGING_DIR}/build-{sha}.tar.gz"
    outer = work / f"build-{sha}.tar.gz"
    outer.write_bytes(wrap(inner))
    echo(f"source {target.store_url}/{rel} ({len(inner) / 1e6:.1f} MB, build.tar.gz sha256 {sha})")
    # Create-only; an object already there is trusted by its bytes, never by its name: Cloud Storage's md5Hash
    # of what it stored (computed by the service) must be this archive's, and the request pins that generation.
    gcs.put(rel, outer)
    md5, generation = gcs.stored(rel)
    if md5 != store.md5_b64(outer):
        raise click.ClickException(
            f"{target.store_url}/{rel} holds other bytes than this build's source (Cloud Storage md5Hash "
            f"{md5 or 'absent'}, this archive's {store.md5_b64(outer)}): refused; someone else wrote it, delete it "
            "and look at who could"
        )
    client = client or make_client()
    build = request(cfg, image, target, sha, generation)
    try:
        op = client.create_build(parent=target.parent, project_id=target.project, build=build)
    except Exception as err:
        if (refused := region_refused(err, target)) is None:
            raise
        raise refused from err
    build_id = op.metadata.build.id
    echo(f"Cloud Build {build_id} ({MACHINE_TYPE}, timeout {TIMEOUT_S // 60} min): {op.metadata.build.log_url}")
    logs = CloudLogs(target.project, build_id, post or google_post())
    done = follow(client, f"{target.parent}/builds/{build_id}", logs, echo, sleep)
    if done.status.name != "SUCCESS":
        raise click.ClickException(
            f"Cloud Build {build_id} ended {done.status.name}: {done.status_detail or done.log_url}"
        )
    manifest = manifest_sha(done)
    text = gcs.read(f"manifests/{manifest}.txt")
    if hashlib.sha256(text).hexdigest() != manifest:
        raise click.ClickException(f"manifests/{manifest}.txt in {target.store_url} does not have that sha256: refused")
    echo(f"manifest: {len(text.splitlines())} objects, each with its sha256 (read it before you pin it)")
    return manifest
