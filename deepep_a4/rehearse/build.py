"""The store builder's probe: a minimal Cloud Build in the stack's region, as the store's builder account, whose one
step runs scripts/rehearse/probe_build.py (it writes under the store's prefix and must be refused outside it).

The request is the real build's shape (deepep_a4/store/remote.py `request`): the same account
(`deepep-store-builder`), region, CLOUD_LOGGING_ONLY logs read back with the same CloudLogs; one step in the
probes' pinned Python image instead of three in the CUDA image, and no source archive: the step writes the probe
files it carries, then runs the probe. That Google accepted the build at all (the region, the account, the API) is
the `build-accepted` seam; the probe's own lines follow from the build's log.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from typing import Any

from components import rehearsal
from components.config import StackConfig
from components.node.store_grants import BUILDER_ACCOUNT_ID
from deepep_a4.rehearse.checklist import Seam, parse, seam
from deepep_a4.store import remote as store_remote

TIMEOUT_S = 600
# Cloud Build substitutes `$NAME` in a step's args: the step carries the probes as base64, which has no `$`.
BOOTSTRAP = (
    "import base64, json, os, subprocess, sys; files = json.loads(base64.b64decode(sys.argv[1])); "
    "os.makedirs('/workspace/rehearse', exist_ok=True); "
    "[open(os.path.join('/workspace/rehearse', n), 'w').write(t) for n, t in files.items()]; "
    "sys.exit(subprocess.call([sys.executable, '/workspace/rehearse/probe_build.py']))"
)


def builder_email(project: str) -> str:
    return f"{BUILDER_ACCOUNT_ID}@{project}.iam.gserviceaccount.com"


def request(cfg: StackConfig, run_id: str) -> Any:
    """The rehearsal's build (cloudbuild_v1.Build)."""
    from google.protobuf import duration_pb2

    cb = store_remote.cloudbuild()
    files = {n: t for n, t in rehearsal.probe_files().items() if n in ("common.py", "gcp.py", "probe_build.py")}
    payload = base64.b64encode(json.dumps(files).encode()).decode()
    env = [
        f"REHEARSAL_STORE_URL={cfg.installer.store_url}",
        f"REHEARSAL_RUN_ID={run_id}",
        f"REHEARSAL_EXPECT_EMAIL={builder_email(cfg.project)}",
    ]
    step = cb.BuildStep(
        id="rehearsal-probe", name=rehearsal.PROBE_IMAGE, entrypoint="python3", args=["-c", BOOTSTRAP, payload], env=env
    )
    return cb.Build(
        steps=[step],
        timeout=duration_pb2.Duration(seconds=TIMEOUT_S),
        service_account=store_remote.service_account(cfg.project),
        options=cb.BuildOptions(logging=cb.BuildOptions.LoggingMode.CLOUD_LOGGING_ONLY),
        tags=["deepep-a4-rehearsal"],
    )


def probe(
    cfg: StackConfig,
    run_id: str,
    client: Any = None,
    post: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> list[Seam]:
    """Submits the build, follows it to its end; its seams."""
    if not cfg.installer.store_url:
        return [seam("build-accepted", False, "no artifactStore: the stack names no store to build into", 0.0)]
    t0 = time.monotonic()
    parent = f"projects/{cfg.project}/locations/{cfg.region}"
    try:
        client = client or store_remote.make_client()
        op = client.create_build(parent=parent, project_id=cfg.project, build=request(cfg, run_id))
        build_id = op.metadata.build.id
    except Exception as err:  # the region refused, the account unknown, the API off: Google's words are the evidence
        return [seam("build-accepted", False, f"builds.create in {parent}: {type(err).__name__}: {err}", 0.0)]
    accepted = seam(
        "build-accepted", True, f"builds.create in {parent} as {builder_email(cfg.project)} -> build {build_id}", 0.0
    )
    lines: list[str] = []
    logs = store_remote.CloudLogs(cfg.project, build_id, post or store_remote.google_post())
    done = store_remote.follow(client, f"{parent}/builds/{build_id}", logs, lines.append, sleep)
    found = parse("\n".join(lines), f"build {build_id}")
    if not found:
        status = getattr(done.status, "name", str(done.status))
        tail = " ".join(lines[-5:])[-400:]
        found = [seam("build-probe", False, f"build {build_id} ended {status}, no REHEARSAL line: {tail}", 0.0)]
    return [replace_seconds(accepted, time.monotonic() - t0), *found]


def replace_seconds(s: Seam, seconds: float) -> Seam:
    from dataclasses import replace

    return replace(s, seconds=round(seconds, 3))
