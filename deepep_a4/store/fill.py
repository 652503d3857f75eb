"""`deepep-a4 run` with a store and no pinned manifest: build the store, pin its manifest, then go on to `up`.

The build is billed (Cloud Build, or hours of a laptop), so `run` asks first on a terminal (y/N) and takes
`--build-store` instead of the question elsewhere; without a terminal and without the flag it refuses in one
line. The build is `deepep-a4 store build` (store_build.py): on Cloud Build unless this machine can run it in
docker. Its manifest is printed whole before it is pinned with `pulumi config set`, through the Automation API,
into stacks/Pulumi.STACK.yaml, where the user reads it as after a manual build (docs/store.md, the trust model).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from components.config import StackConfig

MANIFEST_KEY = "deepep-a4:artifactStoreManifest"
Builder = Callable[[StackConfig], tuple[str, str]]  # -> (manifest sha256, manifest text)


def needs_build(cfg: StackConfig) -> bool:
    return bool(cfg.installer.store_url) and not cfg.installer.store_manifest


def default_builder(cfg: StackConfig) -> tuple[str, str]:
    """`deepep-a4 store build --stack S`, as its command chooses (Cloud Build without docker or off x86_64)."""
    from deepep_a4.store import command as store_build
    from deepep_a4.store import remote as store_remote
    from deepep_a4.store import sources as store

    url, image = cfg.installer.store_url, store_build.image_for(cfg, "")
    work = Path.home() / ".cache" / "deepep-a4" / "build" / cfg.stack
    if why := store_remote.remote_reason(False):
        if not url.startswith("gs://"):
            raise click.ClickException(f"artifactStore {url}: a build on Cloud Build ({why}) needs gs://BUCKET/PREFIX")
        store_build.render(cfg, work)
        target = store_remote.Target(cfg.project, cfg.installer.store_build_region, url, store_build.build_root(cfg))
        sha = store_remote.run(cfg, work, image, target, None)
    else:
        sha = store_build.build(cfg, work, store.open_store(url), image, None)
    remote = store.open_store(url)
    rel = f"manifests/{sha}.txt"
    text = remote.read(rel) if isinstance(remote, store.GcsStore) else (remote.root / rel / "data").read_bytes()
    return sha, text.decode()


def fill_and_pin(
    name: str,
    cfg: StackConfig,
    stack: Any,
    build_store: bool,
    ask: Callable[[str], str],
    say: Callable[[str], None],
    interactive: bool,
    builder: Builder | None = None,
) -> str | None:
    """None to go on (nothing to do, or built and pinned); else the one line `run` refuses with."""
    if not needs_build(cfg):
        return None
    manual = f"deepep-a4 store build --stack {name}, then pulumi config set {MANIFEST_KEY} SHA256 -s {name}"
    if not build_store:
        if not interactive:
            return (
                f"stack {name} names artifactStore {cfg.installer.store_url} but pins no {MANIFEST_KEY}: pass "
                f"--build-store to build and pin one now (billed), or run {manual}"
            )
        from deepep_a4.store import estimate as store_estimate

        line = store_estimate.estimate_line(cfg=cfg)
        say(f"stack {name} pins no store manifest. A store build on Cloud Build: {line}")
        if ask("build the store now and pin its manifest? [y/N] ").strip().lower() not in ("y", "yes"):
            return f"no store manifest and no build: run {manual}, or answer y (or pass --build-store)"
    try:
        sha, text = (builder or default_builder)(cfg)
    except click.ClickException as err:
        return f"the store build failed, nothing pinned: {err.format_message()}"
    say(f"the manifest you are about to pin ({sha}): every object the nodes will take, with its sha256")
    for line in text.splitlines():
        say(f"  {line}")
    stack.set_config(MANIFEST_KEY, sha)
    say(f"pinned: {MANIFEST_KEY} = {sha} (stacks/Pulumi.{name}.yaml)")
    return None
