"""The stand-ins speak what the real clients expect: google-auth (Google's own metadata-server client) reads its
token and email from the metadata stand-in; the Kubernetes Python client patches a Node through the Kubernetes
API stand-in and reads its 403 as a Status. A stand-in that drifted from the protocol fails here, not only in
the probes that were written next to it."""

from __future__ import annotations

from typing import Any, cast

import pytest
from google.auth.compute_engine import _metadata
from google.auth.transport.requests import Request
from kubernetes import client as k8s

from tests.fixtures.rehearse.serve import Served
from tests.scripts.rehearse.conftest import Kube, World


def test_google_auth_reads_the_metadata_stand_in(world: World) -> None:
    root = f"http://{world.metadata_at}/computeMetadata/v1/"
    token = _metadata.get(Request(), "instance/service-accounts/default/token", root=root)
    assert token == {"access_token": world.metadata.token, "expires_in": 3599, "token_type": "Bearer"}
    email = _metadata.get(Request(), "instance/service-accounts/default/email", root=root)
    assert email == world.metadata.email
    # Without the flavor header the stand-in refuses, as the real server does.
    import requests

    assert requests.get(f"{root}instance/service-accounts/default/token", timeout=5).status_code == 403


def test_google_auth_sees_a_refused_token_as_an_error(world: World) -> None:
    world.metadata.token_status = 403
    root = f"http://{world.metadata_at}/computeMetadata/v1/"
    with pytest.raises(Exception, match="403"):
        _metadata.get(Request(), "instance/service-accounts/default/token", root=root, retry_count=1)


def api(kube: Kube) -> k8s.CoreV1Api:
    conf = k8s.Configuration(host=f"https://127.0.0.1:{kube.port}")
    conf.ssl_ca_cert = str(kube.sa_dir / "ca.crt")
    conf.api_key = {"authorization": kube.api.token}
    conf.api_key_prefix = {"authorization": "Bearer"}
    return k8s.CoreV1Api(k8s.ApiClient(conf))


def test_the_kubernetes_client_patches_a_node_through_the_stand_in(kube: Kube) -> None:
    body = {"metadata": {"labels": {"deepep-a4/installed": "abc"}}}
    node = cast(Any, api(kube).patch_node("gke-rehearsal-a4-1", body))
    assert isinstance(node, k8s.V1Node)
    meta = cast(Any, node.metadata)
    assert meta.labels["deepep-a4/installed"] == "abc"
    assert meta.resource_version == "1001"
    assert kube.api.requests[-1].endswith("application/strategic-merge-patch+json")


def test_the_kubernetes_client_reads_the_stand_ins_403_as_a_status(kube: Kube) -> None:
    kube.api.allowed = {"get"}
    with pytest.raises(k8s.ApiException) as err:
        api(kube).patch_node("gke-rehearsal-a4-1", {"metadata": {"labels": {"a": "b"}}})
    assert err.value.status == 403
    status = cast(Any, api(kube).api_client.deserialize(str(err.value.body), "V1Status", "application/json"))
    assert (status.kind, status.reason, status.code) == ("Status", "Forbidden", 403)
    assert status.details.name == "gke-rehearsal-a4-1" and status.details.kind == "nodes"


def test_the_stand_ins_serve_on_loopback_only(world: World) -> None:
    assert world.metadata_at.startswith("127.0.0.1:") and world.gcs_at.startswith("127.0.0.1:")
    with Served(object()) as served:
        assert served.httpd.server_address[0] == "127.0.0.1"
