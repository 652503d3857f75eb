"""Digests resolved at the first `pulumi up`: a sha256 for every download the nodes fetch with no pin.

A download is pinned in the project where its digest is published (components/node/installer.py CHECKSUMS,
KEY_FINGERPRINTS) or by the stack's store manifest. What has neither (`installer.first_up_names`: NVSHMEM's
GitHub tag archive, gIB's two apt keys on GCE, a GDRCopy release without a published digest) is downloaded
once here, on the deployer's machine, at the first `pulumi up`, and its sha256 is kept in the stack's state: a
`pulumi.Stash` per URL whose input is ignored after it exists, the pattern of the GKE version and the GCE boot
image (components/gce/fleet.py `_boot_image`). A later `up` keeps the first digest, whatever the URL serves by then.
For a signing key the digest is the key file's sha256 (no fingerprint is published where we could cite it).

- Preview (`pulumi.runtime.is_dry_run()`) and the offline plan (`offline()`) download nothing: the value is
  `installer.FIRST_UP_STAND_IN`, which the plan lists and which a node refuses by name (lib.sh `fetch`).
- The installer's hash is named by the text with the stand-ins (installer._render), so the digest that
  replaces them changes no INSTALLER_HASH: the first `up` after this one replaces no node.
- Resolved digests are cached on the deployer's machine (`cache_file()`) per stack and URL, so a later `up`
  of that stack does not download again. Another stack's first `up` downloads for itself: one stack's first
  answer never becomes another's pin. An entry does not expire: it is the stack's own first answer, which its
  Stash keeps as well; a `pulumi destroy` then `up` of the same stack reuses it (delete the file, or set
  DEEPEP_A4_DIGEST_CACHE to a fresh path, for a new first use). A `versionOverrides` entry (URL and sha256)
  pins a download itself and nothing is fetched.
- A later `up` never depends on the URL: the Stash's `output` is what it held at creation and an `up` never
  changes it (pulumi's Stash: "output: the value saved in the state"; `input`: "the most recent value
  passed"), so a failed download there is an input nobody reads (`UNRESOLVED`). Only a Stash created by this
  `up` with that input, the first up, stops the run with the download's error.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pulumi

from components.config import StackConfig
from components.node import installer

Download = Callable[[str], str]  # URL -> sha256 (64 hex digits) of what it serves
MAX_BYTES = 1 << 30  # the largest download we digest (NVSHMEM's source archive is about 10 MB)
TIMEOUT_S = 600  # the whole download; each read waits at most READ_TIMEOUT_S
READ_TIMEOUT_S = 60
SHA256_RE = re.compile(r"[0-9a-f]{64}")
CACHE_ENV = "DEEPEP_A4_DIGEST_CACHE"  # a file; default: $XDG_CACHE_HOME or ~/.cache, then deepep-a4/digests.json


class PinError(RuntimeError):
    """A download whose digest could not be resolved: one line naming the URL."""


def download_urls(cfg: StackConfig) -> dict[str, str]:
    """Every name `fetch` may look up with no project pin, with the URL the node downloads it from."""
    urls = {
        "google-cloud-packages": installer.GOOGLE_APT_KEY_URL,
        "google-artifact-registry": installer.GIB_APT_KEY_URL,
        f"gdrcopy-{cfg.versions.gdrcopy}.tar.gz": installer.gdrcopy_src_url(cfg),
    }
    if cfg.versions.nvshmem_source == "source":
        urls[f"nvshmem-{cfg.versions.nvshmem}-source"] = installer.nvshmem_src_url(cfg)
    return urls


def https_sha256(url: str) -> str:
    """The sha256 of what `url` serves, streamed over HTTPS only (a redirect to http is refused), bounded by
    MAX_BYTES and TIMEOUT_S."""
    if not url.startswith("https://"):
        raise PinError(f"{url}: not https")
    opener = urllib.request.build_opener(_HttpsOnlyRedirects())
    digest, size, deadline = hashlib.sha256(), 0, time.monotonic() + TIMEOUT_S
    request = urllib.request.Request(url, headers={"User-Agent": "deepep-a4 (first-up digest)"})  # noqa: S310 (https only, checked above)
    with opener.open(request, timeout=READ_TIMEOUT_S) as response:
        while chunk := response.read(1 << 20):
            size += len(chunk)
            if size > MAX_BYTES:
                raise PinError(f"{url}: more than {MAX_BYTES} bytes")
            if time.monotonic() > deadline:
                raise PinError(f"{url}: not downloaded within {TIMEOUT_S} s")
            digest.update(chunk)
    return digest.hexdigest()


class _HttpsOnlyRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # urllib's signature
        if not newurl.startswith("https://"):
            raise PinError(f"{req.full_url}: redirected to {newurl}, which is not https")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def cache_file() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "deepep-a4" / "digests.json"


def _read_cache(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {u: d for u, d in data.items() if isinstance(d, str) and SHA256_RE.fullmatch(d)}


def cached_sha256(url: str, download: Download, scope: str = "") -> str:
    """The URL's sha256 from the cache on this machine for `scope` (a stack), else downloaded (then cached)."""
    path = cache_file()
    known = _read_cache(path)
    key = f"{scope} {url}" if scope else url
    if key in known:
        return known[key]
    got = download(url)
    if not SHA256_RE.fullmatch(got or ""):
        raise PinError(f"{url}: the download gave {got!r}, not a sha256")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps({**_read_cache(path), key: got}, indent=1, sort_keys=True) + "\n")
        tmp.replace(path)
    except OSError as err:  # a cache we cannot write costs a download next time, nothing more
        pulumi.log.warn(f"could not cache the sha256 of {url} in {path}: {err}")
    return got


# How this process resolves: None is a real `pulumi up` (https_sha256); the offline plan sets `offline`;
# tests set a downloader of their own.
_MODE: dict[str, Download | bool | None] = {"download": None, "offline": False}


@contextlib.contextmanager
def offline() -> Iterator[None]:
    """Within it nothing is downloaded: every first-up digest is the stand-in (the offline plan)."""
    saved = dict(_MODE)
    _MODE.update(offline=True)
    try:
        yield
    finally:
        _MODE.update(saved)


@contextlib.contextmanager
def downloading(download: Download) -> Iterator[None]:
    """Within it, digests come from `download` (tests: an up without the network)."""
    saved = dict(_MODE)
    _MODE.update(download=download, offline=False)
    try:
        yield
    finally:
        _MODE.update(saved)


def _fix(name: str, url: str) -> str:
    if name.startswith(("gdrcopy-", "nvshmem-")):
        component = name.split("-", 1)[0]
        return (
            f"pin it yourself with versionOverrides ({component}: version, url {url}, sha256 of that file), "
            "or with the store manifest (deepep-a4 store build, artifactStoreManifest)"
        )
    return "pin it with the store manifest (deepep-a4 store build, artifactStoreManifest)"


# The Stash input of a download that failed at this `up`: read only where the Stash is new (the first up).
UNRESOLVED = "unresolved: "


def _resolve(name: str, url: str, scope: str) -> str:
    """The sha256 of `url`, or UNRESOLVED with the reason: a Stash that already holds a digest keeps it."""
    download = _MODE["download"]
    try:
        return cached_sha256(url, download if callable(download) else https_sha256, scope)
    except Exception as err:  # any failure is the same one line for the deployer, if it matters at all
        return f"{UNRESOLVED}downloading {url} failed ({err})"


def _kept(name: str, url: str, value: object, urn: object = "") -> str:
    """The Stash's value as the installer takes it: a sha256, or the stand-in where nothing was resolved."""
    text = str(value)
    if SHA256_RE.fullmatch(text) or (text == installer.FIRST_UP_STAND_IN and _stand_ins_allowed()):
        return text
    if text.startswith(UNRESOLVED):
        raise pulumi.RunError(
            f"the sha256 of {name} could not be resolved at this first `pulumi up`: {text[len(UNRESOLVED) :]}; "
            f"once it answers, run `pulumi state delete '{urn}'` and `pulumi up` again, or {_fix(name, url)}"
        )
    raise pulumi.RunError(
        f"the stack's state keeps {text!r} as the sha256 of {name} ({url}), not a digest: remove that Stash "
        f"(pulumi state delete) and run pulumi up again, or {_fix(name, url)}"
    )


def offline_plan() -> bool:
    """The offline plan (`offline()`): no engine, nothing created."""
    return bool(_MODE["offline"])


def _stand_ins_allowed() -> bool:
    return bool(_MODE["offline"]) or pulumi.runtime.is_dry_run()


def node_installer(
    cfg: StackConfig, target: str, files: dict[str, str], parent: pulumi.Resource | None = None
) -> dict[str, pulumi.Input[str]]:
    """The rendered installer as the node gets it: `files` (the stand-in text the plan shows), with config.sh
    carrying the kept digests when the stack has first-up downloads."""
    found = resolved(cfg, parent)
    if found is None:
        return dict(files)
    return {
        **files,
        "config.sh": found.apply(lambda d: installer.render_installer(cfg, target, digests(d))["config.sh"]),
    }


def digests(found: dict[str, str]) -> dict[str, str] | None:
    """The resolved digests of `found` (None where all are stand-ins: the plan's text, unchanged)."""
    return {n: d for n, d in found.items() if SHA256_RE.fullmatch(d)} or None


def resolved(cfg: StackConfig, parent: pulumi.Resource | None = None) -> pulumi.Output[dict[str, str]] | None:
    """name -> sha256 of every first-up download of the stack, kept in its state (None: there is none)."""
    names = installer.first_up_names(cfg)
    if not names:
        return None
    urls = download_urls(cfg)
    kept: dict[str, pulumi.Output[str]] = {}
    for name in names:
        url = urls[name]
        scope = f"{cfg.project}/{cfg.stack}"
        value = installer.FIRST_UP_STAND_IN if _stand_ins_allowed() else _resolve(name, url, scope)
        slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
        stash = pulumi.Stash(
            f"pin-{slug}-{hashlib.sha256(url.encode()).hexdigest()[:8]}",
            input=value,
            # The first answer is the pin: a later `up` (or a preview's stand-in) changes nothing.
            opts=pulumi.ResourceOptions(parent=parent, ignore_changes=["input"]),
        )
        kept[name] = pulumi.Output.all(stash.output, stash.urn).apply(lambda v, n=name, u=url: _kept(n, u, *v))
    return pulumi.Output.all(**kept)
