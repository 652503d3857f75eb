"""`deepep-a4 store fill`: put a stack's sources into the artifact store (docs/store.md); `store build`
(store_build.py) fills, builds and publishes with a manifest the stack pins.

    .venv/bin/deepep-a4 store fill --stack gke-b200                      internet -> the stack's artifactStore
    .venv/bin/deepep-a4 store fill --stack gke-b200 --store DIR          ... or a local folder
    .venv/bin/deepep-a4 store fill --stack gke-b200 --from DIR           files named as below, no internet

The names are the ones the installer asks the store for (scripts/install/lib.sh `fetch`, phases/09-deepep.sh):
GDRCopy's and NVSHMEM's source archives, DeepEP at its pinned commit, PR #466's diff. A filled store lets
nodes install with no internet beyond the store and the OS package mirrors (artifactStoreOnly).

Objects are written as the nodes write them: create-only, with their sha256 (Cloud Storage custom metadata
`sha256`; in a folder, `NAME/data` and `NAME/sha256`, placed by one atomic rename).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import click

from components.config import StackConfig, upstream, versions
from components.node import installer
from deepep_a4 import options

SOURCES_DIR = "sources"
DOWNLOAD_TIMEOUT_S = 600


@dataclass(frozen=True)
class Source:
    name: str  # the object name under sources/ (what the installer's fetch asks for)
    url: str  # where to download it; empty when no public URL serves it (then `how` says how to make it)
    how: str = ""


# Signing keys no project pin covers (components/node/installer.py manifest_pinned: the store manifest pins them, or
# without one the first `pulumi up`, components/node/pins.py), by their URLs.
KEY_URLS = {
    "google-cloud-packages": installer.GOOGLE_APT_KEY_URL,
    "google-artifact-registry": installer.GIB_APT_KEY_URL,
}


def sources(cfg: StackConfig) -> list[Source]:
    """What the stack's nodes download, by the names the installer looks up in the store: the sources, and
    the signing keys that only the store manifest pins."""
    v = cfg.versions
    found = sources_of(v.gdrcopy, v.nvshmem if v.nvshmem_source == "source" else "", v.deepep_ref, v.deepep_pr466)
    # A versionOverrides download comes from the URL the stack names, as on the nodes.
    named = {
        installer.OVERRIDE_FETCH_NAMES[o.component].format(version=o.version): o.url
        for o in v.overrides
        if o.component in installer.OVERRIDE_FETCH_NAMES
    }
    keys = [Source(n, KEY_URLS[n]) for n in installer.manifest_pinned(cfg, fetched_only=True) if n in KEY_URLS]
    if v.deepep_api == "v2":  # the NCCL wheel that replaces PyTorch's in the venv (config.sh SHA256 pins it)
        _, wheel, _ = versions.nccl_wheel(v.nccl, v.torch_cuda_variant)
        found.append(Source(wheel, installer.nccl_wheel_url(v.nccl, v.torch_cuda_variant)))
    return [Source(s.name, named.get(s.name, s.url)) for s in found] + keys


def sources_of(gdrcopy: str, nvshmem_source_version: str, deepep_ref: str, pr466: bool) -> list[Source]:
    out = [Source(f"gdrcopy-{gdrcopy}.tar.gz", installer.gdrcopy_url(gdrcopy))]
    if nvshmem_source_version:
        v = nvshmem_source_version
        try:
            out.append(Source(f"nvshmem-{v}-source", upstream.nvshmem_source_url(v)))
        except KeyError:  # a development version (the hardware test): no release archive serves it
            how = (
                f"NVSHMEM {v} has no release archive on GitHub (not a tag of NVIDIA/nvshmem): make one from a "
                f"clone at the commit you mean, `git archive --format=tar.gz --prefix=nvshmem-{v}/ COMMIT`"
            )
            out.append(Source(f"nvshmem-{v}-source", "", how))
    commit = installer.deepep_commit(deepep_ref)
    if commit:
        out.append(Source(f"deepep-{commit}.tar.gz", f"https://codeload.github.com/deepseek-ai/DeepEP/tar.gz/{commit}"))
    known = upstream.DEEPEP_REFS.get(deepep_ref)
    if known and known.api == "v2":  # third-party/fmt, a submodule git archive leaves out
        fmt = upstream.DEEPEP_V2_FMT
        out.append(Source(f"fmt-{fmt}.tar.gz", f"https://codeload.github.com/fmtlib/fmt/tar.gz/{fmt}"))
    if pr466:
        out.append(
            Source(
                f"deepep-pr466-{upstream.DEEPEP_PR466_HEAD}.diff",
                "https://github.com/deepseek-ai/DeepEP/compare/"
                f"{upstream.DEEPEP_PR466_BASE}...{upstream.DEEPEP_PR466_HEAD}.diff",
            )
        )
    return out


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class LocalStore:
    """A store in a folder: REL/data and REL/sha256, created by one rename (the first writer wins)."""

    def __init__(self, root: Path):
        self.root = root

    def has(self, rel: str) -> bool:
        return (self.root / rel / "sha256").is_file()

    def digest(self, rel: str) -> str:
        """The sha256 its writer recorded ("" when absent)."""
        f = self.root / rel / "sha256"
        return f.read_text().strip() if f.is_file() else ""

    def same_bytes(self, rel: str, file: Path) -> bool:
        """Whether REL holds FILE's bytes, by hashing both (not by the recorded digest, which anyone who
        writes the folder writes too)."""
        data = self.root / rel / "data"
        return data.is_file() and sha256_file(data) == sha256_file(file)

    def put(self, rel: str, file: Path) -> bool:
        target = self.root / rel
        if target.exists():
            return False
        target.parent.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=".stage.", dir=self.root))
        shutil.copyfile(file, stage / "data")
        (stage / "sha256").write_text(sha256_file(file) + "\n")
        stage.chmod(0o755)
        try:
            os.rename(stage, target)
        except OSError:
            shutil.rmtree(stage)
            return False
        return True


def md5_b64(file: Path) -> str:
    """FILE's MD5 as Cloud Storage's md5Hash writes it: base64 of the 16-byte digest."""
    h = hashlib.md5(usedforsecurity=False)
    with file.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return base64.b64encode(h.digest()).decode()


class GcsStore:
    """A store under gs://BUCKET/PREFIX, written with the user's gcloud (as `deepep-a4 report` reads)."""

    def __init__(self, url: str, gcloud: str = "gcloud"):
        self.url = url.rstrip("/")
        self.gcloud = gcloud

    def _gcloud(self, *args: str) -> subprocess.CompletedProcess[str]:
        if shutil.which(self.gcloud) is None:
            raise click.ClickException(f"writing {self.url} needs the gcloud CLI (https://cloud.google.com/sdk)")
        return subprocess.run([self.gcloud, "storage", *args], capture_output=True, text=True, check=False)

    def has(self, rel: str) -> bool:
        return self._gcloud("objects", "describe", f"{self.url}/{rel}").returncode == 0

    def digest(self, rel: str) -> str:
        """The sha256 in the object's custom metadata ("" when absent)."""
        proc = self._gcloud("objects", "describe", f"{self.url}/{rel}", "--format=json")
        if proc.returncode != 0:
            return ""
        meta = json.loads(proc.stdout or "{}")
        return str((meta.get("custom_fields") or meta.get("metadata") or {}).get("sha256", ""))

    def generation(self, rel: str) -> int:
        """The object's generation (0 when absent): pins exactly these bytes."""
        proc = self._gcloud("objects", "describe", f"{self.url}/{rel}", "--format=json")
        return int(json.loads(proc.stdout or "{}").get("generation") or 0) if proc.returncode == 0 else 0

    def read(self, rel: str) -> bytes:
        proc = subprocess.run([self.gcloud, "storage", "cat", f"{self.url}/{rel}"], capture_output=True, check=False)
        if proc.returncode != 0:
            raise click.ClickException(f"gcloud storage cat {self.url}/{rel} failed: {proc.stderr.decode()[-400:]}")
        return proc.stdout

    def same_bytes(self, rel: str, file: Path) -> bool:
        """Whether REL holds FILE's bytes, by the MD5 Cloud Storage computed of what it stored (md5Hash: set by
        the service, not by the writer, https://cloud.google.com/storage/docs/hashes-etags); the sha256 in
        custom metadata is the writer's word only."""
        got, _ = self.stored(rel)
        return bool(got) and got == md5_b64(file)

    def stored(self, rel: str) -> tuple[str, int]:
        """REL's md5Hash and generation from one read of its metadata (("", 0) when absent): the generation a
        request pins is the one whose bytes were checked. md5Hash is the base64 of the MD5 of the object's data
        (Cloud Storage JSON API, Objects resource: https://cloud.google.com/storage/docs/json_api/v1/objects);
        gcloud storage prints it as md5_hash."""
        proc = self._gcloud("objects", "describe", f"{self.url}/{rel}", "--format=json")
        if proc.returncode != 0:
            return "", 0
        meta = json.loads(proc.stdout or "{}")
        return str(meta.get("md5_hash") or meta.get("md5Hash") or ""), int(meta.get("generation") or 0)

    def put(self, rel: str, file: Path) -> bool:
        proc = self._gcloud(
            "cp",
            "--if-generation-match=0",
            f"--custom-metadata=sha256={sha256_file(file)}",
            str(file),
            f"{self.url}/{rel}",
        )
        if proc.returncode == 0:
            return True
        if "412" in proc.stderr or "PreconditionFailed" in proc.stderr or "precondition" in proc.stderr.lower():
            return False
        raise click.ClickException(f"gcloud storage cp to {self.url}/{rel} failed: {proc.stderr.strip()[-400:]}")


def open_store(url: str) -> LocalStore | GcsStore:
    if url.startswith("gs://"):
        return GcsStore(url)
    return LocalStore(Path(url).resolve())


def _download(url: str, dest: Path) -> None:
    if not url.startswith("https://"):
        raise OSError(f"not an https URL: {url}")
    req = urllib.request.Request(url, headers={"User-Agent": "deepep-a4-store-fill"})  # noqa: S310
    with urllib.request.urlopen(req, timeout=DOWNLOAD_TIMEOUT_S) as resp, dest.open("wb") as out:  # noqa: S310
        shutil.copyfileobj(resp, out)


def where(src: Source) -> str:
    return f"download it from {src.url}" if src.url else src.how


def missing_in(wanted: list[Source], store: LocalStore | GcsStore, from_dir: Path, option: str) -> list[str]:
    """One line per source that neither the store nor FROM_DIR has: its file name and where to get it."""
    lines = []
    for src in wanted:
        if not store.has(f"{SOURCES_DIR}/{src.name}") and not (from_dir / src.name).is_file():
            lines.append(f"  {src.name}: {where(src)}")
    if lines:
        head = f"{option} {from_dir}: {len(lines)} of {len(wanted)} files missing (put them there by these names):"
        lines.insert(0, head)
    return lines


def fill(
    wanted: list[Source], store: LocalStore | GcsStore, from_dir: Path | None, echo=click.echo, option: str = "--from"
) -> int:
    """Puts every source in `wanted` into the store; returns how many were added. With FROM_DIR, every
    missing file is named at once before anything is written."""
    added = 0
    if from_dir is not None:
        from_dir.mkdir(parents=True, exist_ok=True)
        missing = missing_in(wanted, store, from_dir, option)
        if missing:
            raise click.ClickException("\n".join(missing))
    with tempfile.TemporaryDirectory(prefix="deepep-store-") as tmp:
        for src in wanted:
            rel = f"{SOURCES_DIR}/{src.name}"
            if store.has(rel):
                echo(f"  present  {rel}")
                continue
            if from_dir is not None:
                file = from_dir / src.name
            elif not src.url:
                raise click.ClickException(f"{src.name}: {src.how}; then pass the folder with {option}")
            else:
                file = Path(tmp) / src.name
                try:
                    _download(src.url, file)
                except OSError as err:
                    raise click.ClickException(f"downloading {src.url} failed: {err}") from None
            created = store.put(rel, file)
            added += created
            echo(f"  {'added' if created else 'present'}    {rel}  sha256 {sha256_file(file)[:16]}")
    return added


@click.group()
def command() -> None:
    """The artifact store: sources and prebuilt artifacts shared by every node (docs/store.md)."""


def stack_and_store(stack: str, store_url: str, required: bool = True) -> tuple[StackConfig, str]:
    """The stack's config and the store to use (--store, else the stack's artifactStore), or a usage error
    (`required=False`: "" where neither names one, for what touches no store: `store build --dry-run`)."""
    from deepep_a4 import stackfile

    try:
        _, _, cfg = stackfile.load_stack(stack)
    except stackfile.UsageError as err:
        raise click.ClickException("; ".join(err.lines)) from None
    url = store_url or cfg.installer.store_url
    if not url and required:
        raise click.UsageError(f"stack {cfg.stack} sets no artifactStore: name one with --store gs://BUCKET/PREFIX")
    return cfg, url


@command.command("fill")
@click.option("--stack", required=True, help="stack name (stacks/Pulumi.NAME.yaml) or a stack file path")
@click.option("--store", "store_url", default="", help="gs://BUCKET/PREFIX or a folder; default: the stack's")
@options.folder(
    "--from",
    "from_dir",
    help="take the files from this folder (named as the store names them; created if absent) instead of downloading",
)
def fill_command(stack: str, store_url: str, from_dir: Path | None) -> None:
    """Put the stack's sources (GDRCopy, NVSHMEM, DeepEP, PR #466) into the store."""
    cfg, url = stack_and_store(stack, store_url)
    store = open_store(url)
    click.echo(f"store {url}: sources of stack {cfg.stack}")
    added = fill(sources(cfg), store, from_dir)
    click.echo(f"{added} added")
