#!/usr/bin/env python3
"""Rehearsal probe: the GKE staging pod's seams, run in the staging DaemonSet's place on the rehearsal's CPU node,
with its ServiceAccount (the KSA whose Workload Identity principal holds the store grant), its NetworkPolicy
(deepep-installer-egress) and its node RBAC (get/patch nodes).

    python3 probe_stage.py          # one REHEARSAL line per seam on stdout (common.py), exit 0

Seams, in this order:
- stage-dns         metadata.google.internal and storage.googleapis.com resolve (kube-dns reachable on 53)
- stage-token       the metadata server gives an access token, and the account's email is REHEARSAL_EXPECT_EMAIL
- stage-store       the pinned manifest reads and has its sha256; one part it lists reads and has the listed sha256
- stage-node-label  PATCH of its own Node's label (merge patch) with the in-cluster token and CA is accepted
- stage-denied      a TCP connect to REHEARSAL_DENIED fails (refused or dropped): the egress policy holds

Inputs (environment):
  REHEARSAL_STORE_URL         gs://BUCKET/PREFIX, the stack's artifactStore (required)
  REHEARSAL_STORE_MANIFEST    the pinned manifest's sha256, artifactStoreManifest (required)
  REHEARSAL_STORE_OBJECT      the manifest entry to read (optional; default the first `.tar` part, else the first)
  REHEARSAL_EXPECT_EMAIL      the email the metadata server must answer (optional; with Workload Identity
                              Federation and no Google service account: PROJECT_ID.svc.id.goog)
  NODE_NAME                   this pod's node (the downward API's spec.nodeName) (required)
  REHEARSAL_NODE_LABEL        KEY=VALUE to set on the node (required; e.g. deepep-a4/rehearsal=RUN_ID)
  KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT   the API server, as the kubelet sets them (required)
  REHEARSAL_SA_DIR            the mounted token and ca.crt (default /var/run/secrets/kubernetes.io/serviceaccount)
  REHEARSAL_DENIED            HOST:PORT the policy must not let it reach (required): pick an address that
                              listens (the node's kubelet, NODE_IP:10250), so a failed connect is the policy's doing
  REHEARSAL_CONNECT_TIMEOUT_S seconds a connect may take before it counts as dropped (default 5)
  REHEARSAL_HOSTS             a hosts file that replaces DNS for stage-dns (tests only)
  GCE_METADATA_HOST, STORAGE_EMULATOR_HOST   endpoint overrides as Google's clients read them (tests only; gcp.py)
"""

from __future__ import annotations

import json
import os
import ssl
import sys
from typing import TextIO

try:  # in the package (tests) or next to each other (the probe pod)
    from scripts.rehearse import common, gcp
except ImportError:  # pragma: no cover - shipped as plain files
    import common  # type: ignore[no-redef]
    import gcp  # type: ignore[no-redef]

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
NAMES = (gcp.METADATA_HOST, gcp.STORAGE_HOST)


def patch_node_label(inputs: common.Inputs) -> str:
    """What scripts/gke/stage-init.sh does after staging: PATCH /api/v1/nodes/NODE with a JSON merge patch
    (Content-Type application/merge-patch+json; https://kubernetes.io/docs/reference/using-api/api-concepts/
    "Patch"), authenticated by the pod's projected token, the server checked against the mounted CA
    (https://kubernetes.io/docs/tasks/run-application/access-api-from-pod/). The API server answers the
    patched Node, or a Status object (kind Status, reason Forbidden, code 403) when RBAC refuses."""
    node = inputs.need("NODE_NAME")
    key, sep, value = inputs.need("REHEARSAL_NODE_LABEL").partition("=")
    if not sep or not key:
        raise common.InputError(f"REHEARSAL_NODE_LABEL={key!r} is not KEY=VALUE")
    host, port = inputs.need("KUBERNETES_SERVICE_HOST"), inputs.need("KUBERNETES_SERVICE_PORT")
    sa = inputs.get("REHEARSAL_SA_DIR", SA_DIR)
    with open(os.path.join(sa, "token"), encoding="utf-8") as f:
        token = f.read().strip()
    context = ssl.create_default_context(cafile=os.path.join(sa, "ca.crt"))
    url = f"https://{f'[{host}]' if ':' in host else host}:{port}/api/v1/nodes/{node}"
    patch = json.dumps({"metadata": {"labels": {key: value}}}).encode()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/merge-patch+json"}
    reply = common.http("PATCH", url, headers=headers, data=patch, timeout=30, context=context)
    evidence = f"PATCH {url} {patch.decode()} -> {reply.status}"
    if reply.status != 200:
        doc = reply.json() if reply.body.startswith(b"{") else {}
        why = f"{doc.get('reason', '')}: {doc.get('message', '')}" if doc else reply.text()
        raise common.SeamFailedError(f"{evidence} {why}")
    labels = reply.json().get("metadata", {})
    labels = labels.get("labels", {}) if isinstance(labels, dict) else {}
    if not isinstance(labels, dict) or labels.get(key) != value:
        raise common.SeamFailedError(f"{evidence} but the Node it returned has {key}={labels.get(key)!r}")
    return f"{evidence}; the Node now carries {key}={value}"


def check_denied(inputs: common.Inputs) -> str:
    host, port = common.host_port(inputs.need("REHEARSAL_DENIED"), "REHEARSAL_DENIED")
    timeout = inputs.number("REHEARSAL_CONNECT_TIMEOUT_S", 5.0)
    try:
        outcome = common.try_connect(host, port, timeout)
    except OSError as err:
        raise common.SeamFailedError(f"connect {host}:{port}: {err}: proves nothing") from None
    if outcome == "connected":
        raise common.SeamFailedError(f"connect {host}:{port} -> connected: the egress policy let it through")
    return f"connect {host}:{port} -> {outcome}"


def probe(inputs: common.Inputs, out: TextIO) -> None:
    store_url, manifest = inputs.need("REHEARSAL_STORE_URL"), inputs.need("REHEARSAL_STORE_MANIFEST")
    gcp.split_gs(store_url, "REHEARSAL_STORE_URL")
    for name in ("NODE_NAME", "REHEARSAL_NODE_LABEL", "REHEARSAL_DENIED"):  # every input before any seam
        inputs.need(name)
    resolve = common.resolver(inputs)
    common.run_seam("stage-dns", lambda: common.check_names(resolve, NAMES), out)
    got: list[gcp.Token] = []

    def get_token() -> str:
        got.append(gcp.token(inputs, inputs.get("REHEARSAL_EXPECT_EMAIL")))
        return got[0].evidence

    common.run_seam("stage-token", get_token, out)

    def read_store() -> str:
        if not got:
            raise common.SeamFailedError("no token (stage-token failed): the store was not tried")
        gcs = gcp.Gcs(gcp.storage_root(inputs), got[0].value)
        return gcp.check_store(gcs, store_url, manifest, inputs.get("REHEARSAL_STORE_OBJECT"))

    common.run_seam("stage-store", read_store, out)
    common.run_seam("stage-node-label", lambda: patch_node_label(inputs), out)
    common.run_seam("stage-denied", lambda: check_denied(inputs), out)


def main(env: dict[str, str] | None = None, out: TextIO | None = None) -> int:
    return common.main_of(probe, os.environ if env is None else env, out)


if __name__ == "__main__":
    sys.exit(main())
