"""GKE workloads under pulumi mocks: build_gke_workloads with a test k8s.Provider, assert what is registered.

The harness records every registration (type, name, provider, parent, dependencies) and the inputs the
mocks receive (camelCase, as the engine sees them).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
from pulumi.runtime import mocks as pulumi_mocks

from components import artifacts, config
from components.config.keys import UBUNTU_IMAGE
from components.gke import bench as gke_bench
from components.gke import installer as gke_installer
from components.gke import objects as gke_objects
from components.gke import workloads as gke_workloads
from components.gke.nodepool import GPU_TAINT_KEY, NODE_POOL_LABEL_KEY, NODE_POOL_LABEL_VALUE
from deepep_a4.plan import engine as plan_engine
from scripts import payload
from tests.conftest import of_type, plan, stack_config

STACK = "gke-b200-ubuntu"
DS = "kubernetes:apps/v1:DaemonSet"
INSTALLER_DS = "deepep-installer"
GIB_DS = "deepep-gib"
JOB = "kubernetes:batch/v1:Job"
CM = "kubernetes:core/v1:ConfigMap"
RDMA = [f"test-rdma-{i}" for i in range(8)]


class Mocks(plan_engine.PlanMocks):
    """The plan's mocks (auto-names like the provider's), keeping each resource's resulting state."""

    def __init__(self, project: str):
        super().__init__(project)
        self.state: dict[tuple[str, str], dict[str, Any]] = {}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        rid, state = super().new_resource(args)
        self.state[(args.typ, args.name)] = state
        return rid, state


@dataclass
class Registered:
    type: str
    name: str
    urn: str
    provider: str
    parent: str
    deps: list[str]
    inputs: dict[str, Any] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)


class Monitor(pulumi_mocks.MockMonitor):
    """The stock mock monitor forgets providers, parents and dependencies: keep them."""

    def __init__(self, mocks: pulumi.runtime.Mocks):
        super().__init__(mocks)
        self.seen: list[Registered] = []

    def RegisterResource(self, request):
        response = super().RegisterResource(request)
        self.seen.append(
            Registered(
                request.type,
                request.name,
                response.urn,
                request.provider,
                request.parent,
                list(request.dependencies),
            )
        )
        return response


@dataclass
class Built:
    cfg: config.StackConfig
    resources: list[Registered]
    outputs: dict[str, Any]
    files: dict[str, str]

    def of(self, type_: str) -> list[Registered]:
        return [r for r in self.resources if r.type == type_]

    def one(self, type_: str, name: str | None = None) -> Registered:
        found = [r for r in self.of(type_) if name is None or r.name == name]
        assert len(found) == 1, [r.name for r in found]
        return found[0]

    def by_urn(self, urn: str) -> Registered:
        return next(r for r in self.resources if r.urn == urn)

    def job(self, test: str) -> dict[str, Any]:
        return next(r.inputs for r in self.of(JOB) if r.inputs["metadata"]["name"] == gke_bench.job_name(test))


def build(network_names: list[str] | None = RDMA, stack: str = STACK, **overrides: Any) -> Built:
    cfg = config.parse(plan_engine.project_keys(stack_config(stack, **overrides)), stack)
    mocks = Mocks(cfg.project)
    monitor = Monitor(mocks)
    pulumi.runtime.set_mocks(mocks, project=config.PROJECT_NAME, stack=stack, preview=False, monitor=monitor)
    artifacts.reset()
    outputs: dict[str, Any] = {}

    @pulumi.runtime.test
    def program() -> Any:
        provider = k8s.Provider("test-k8s", kubeconfig="{}")
        pool = pulumi.CustomResource("test:index:NodePool", "test-pool", {})
        # Stand-ins for the multi-network objects (gke_multinetwork.py) the Jobs must outlive on destroy.
        nets = [pulumi.CustomResource("test:index:Network", f"test-net-{i}", {}) for i in range(2)]
        out = gke_workloads.build_gke_workloads(
            cfg, provider, node_pool=pool, network_names=network_names, networks=nets
        )
        return pulumi.Output.from_input(out).apply(outputs.update)

    program()
    inputs = [(a.typ, a.name, a.inputs) for a in mocks.created]
    for reg in monitor.seen:
        reg.inputs = next((i for t, n, i in inputs if t == reg.type and n == reg.name), {})
        reg.state = mocks.state.get((reg.type, reg.name), {})
    return Built(cfg, monitor.seen, outputs, artifacts.published())


@pytest.fixture(scope="module")
def host() -> Built:
    return build(podNetworking="hostNetwork")


@pytest.fixture(scope="module")
def multi() -> Built:
    return build(podNetworking="multiNetwork")


def ds_pod(b: Built) -> dict[str, Any]:
    return b.one(DS, INSTALLER_DS).inputs["spec"]["template"]


# -- every object -------------------------------------------------------------------------------------


def test_every_kubernetes_object_uses_the_explicit_provider_and_sits_under_the_component(host: Built) -> None:
    k8s_objects = [
        r for r in host.resources if r.type.startswith("kubernetes:") and r.type != "pulumi:providers:kubernetes"
    ]
    assert len(k8s_objects) >= 10
    for r in k8s_objects:
        assert r.provider.startswith(host.one("pulumi:providers:kubernetes").urn + "::"), r.name
        assert host.by_urn(r.parent).type.startswith("deepep-a4:gke:"), r.name
    namespaced = [
        r
        for r in k8s_objects
        if not r.type.split(":")[-1].startswith(("Cluster", "Namespace", "ValidatingAdmissionPolicy"))
    ]
    assert {r.inputs["metadata"]["namespace"] for r in namespaced} == {gke_objects.NAMESPACE}


def test_namespace_waits_for_the_node_pool_and_declares_privileged(host: Built) -> None:
    ns = host.one("kubernetes:core/v1:Namespace")
    assert ns.inputs["metadata"]["name"] == "deepep-a4"
    assert ns.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    assert host.one("test:index:NodePool").urn in ns.deps
    assert host.one("test:index:NodePool").urn in host.one(DS, INSTALLER_DS).deps


def test_outputs_name_the_jobs_and_the_version_set(host: Built) -> None:
    assert host.outputs["benchNamespace"] == "deepep-a4"
    assert host.outputs["benchJobs"] == {t: f"deepep-{t}" for t in ("intranode", "low-latency", "internode")}
    assert re.fullmatch(r"[0-9a-f]{16}", host.outputs["installedVersionsHash"])
    assert host.outputs["resultsCommand"].endswith(f"--stack {STACK}")


# -- the installer DaemonSet --------------------------------------------------------------------------------


def test_installer_configmap_carries_the_rendered_installer_and_the_init_script(host: Built) -> None:
    files = gke_installer.installer_files(host.cfg)
    assert gke_objects.INSTALLER_ENTRY in files
    cm = next(r for r in host.of(CM) if "daemonset-init.sh" in r.inputs["data"])
    data = cm.inputs["data"]
    assert data["daemonset-init.sh"] == payload.gke_installer_init()
    for path, text in files.items():
        assert data[path.replace("/", "__")] == text
    items = {i["key"]: i["path"] for i in ds_pod(host)["spec"]["volumes"][2]["configMap"]["items"]}
    assert items == {k.replace("/", "__"): k for k in files} | {"daemonset-init.sh": "daemonset-init.sh"}
    assert host.files["gke/installer-daemonset/init.sh"] == payload.gke_installer_init()


def test_installer_init_container_is_privileged_with_host_pid_and_host_root(host: Built) -> None:
    spec = ds_pod(host)["spec"]
    assert spec["hostPID"] is True
    [init] = spec["initContainers"]
    assert init["securityContext"] == {"privileged": True}
    mounts = {m["name"]: m for m in init["volumeMounts"]}
    assert mounts["host-root"]["mountPath"] == "/host" and not mounts["host-root"].get("readOnly")
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["host-root"]["hostPath"] == {"path": "/", "type": "Directory"}
    assert mounts["installer"]["readOnly"] is True
    # The script enters the host's namespaces through PID 1 and runs the entry point there.
    script = payload.gke_installer_init()
    assert 'nsenter --target 1 --mount --uts --ipc --net --pid -- bash "$r/installer/$INSTALLER_ENTRY"' in script
    env = {e["name"]: e.get("value") for e in init["env"]}
    assert env["INSTALL_ROOT"] == gke_objects.INSTALL_ROOT and env["INSTALLER_ENTRY"] == "run.sh"


def test_only_the_init_container_is_privileged(host: Built) -> None:
    [main] = ds_pod(host)["spec"]["containers"]
    sc = main["securityContext"]
    assert sc["privileged"] is False and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]} and sc["readOnlyRootFilesystem"] is True
    assert main["volumeMounts"] == [{"name": "state", "mountPath": "/deepep-state", "readOnly": True}]


def test_readiness_only_when_the_status_file_says_ready_for_this_version_hash(host: Built, tmp_path) -> None:
    [main] = ds_pod(host)["spec"]["containers"]
    probe = main["readinessProbe"]["exec"]["command"]
    assert probe[:2] == ["sh", "-c"] and main["readinessProbe"]["failureThreshold"] == 1
    want = host.outputs["installedVersionsHash"]
    assert {"name": "VERSIONS_HASH", "value": want} in main["env"]

    def ready(status: str | None, installed: str | None, expect_hash: str = want) -> bool:
        state = tmp_path / "state"
        shutil.rmtree(state, ignore_errors=True)
        state.mkdir()
        if status is not None:
            (state / "status.json").write_text(status)
        if installed is not None:
            (state / "installed-hash").write_text(installed + "\n")
        check = probe[2].replace("/deepep-state", str(state))
        return subprocess.run(["sh", "-c", check], env={"VERSIONS_HASH": expect_hash}, check=False).returncode == 0

    ok = json.dumps({"ready": True, "phase": None, "phases": {}, "error": None}, indent=2)
    assert ready(ok, want)
    assert not ready(ok.replace("true", "false"), want)  # not ready yet (or a failed phase)
    assert not ready(ok, "0123456789abcdef")  # ready, but for the previous version set
    assert not ready(None, want) and not ready(ok, None)


def test_daemonset_is_awaited_long_enough_for_a_cold_install_and_a_reboot(host: Built) -> None:
    meta = host.one(DS, INSTALLER_DS).inputs["metadata"]
    assert int(meta["annotations"]["pulumi.com/timeoutSeconds"]) >= 3600
    assert "pulumi.com/skipAwait" not in meta["annotations"]


def test_installer_runs_only_on_a4_nodes_despite_the_gpu_taint_and_as_node_critical(host: Built) -> None:
    spec = ds_pod(host)["spec"]
    assert spec["nodeSelector"] == {NODE_POOL_LABEL_KEY: NODE_POOL_LABEL_VALUE}
    assert spec["tolerations"] == [
        {"key": GPU_TAINT_KEY, "operator": "Equal", "value": "present", "effect": "NoSchedule"}
    ]
    assert spec["priorityClassName"] == "system-node-critical"
    quota = host.one("kubernetes:core/v1:ResourceQuota").inputs["spec"]
    assert quota["scopeSelector"]["matchExpressions"] == [
        {"scopeName": "PriorityClass", "operator": "In", "values": ["system-node-critical"]}
    ]
    assert host.one("kubernetes:core/v1:ResourceQuota").urn in host.one(DS, INSTALLER_DS).deps


def test_rbac_allows_exactly_get_and_patch_on_nodes_for_the_installer_account(host: Built) -> None:
    role = host.one("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole").inputs
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}]
    binding = host.one("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding")
    role_name = host.one("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole").state["metadata"]["name"]
    assert binding.inputs["roleRef"]["name"] == role_name
    assert binding.inputs["subjects"] == [
        {"kind": "ServiceAccount", "name": gke_objects.installer_ksa(STACK), "namespace": "deepep-a4"}
    ]
    assert ds_pod(host)["spec"]["serviceAccountName"] == gke_objects.installer_ksa(STACK)
    assert binding.urn in host.one(DS, INSTALLER_DS).deps
    # The node label it sets is the version hash.
    init_env = {e["name"]: e.get("value") for e in ds_pod(host)["spec"]["initContainers"][0]["env"]}
    assert init_env["INSTALLED_LABEL"] == gke_objects.INSTALLED_LABEL
    assert "/api/v1/nodes/$NODE_NAME" in payload.gke_installer_init()


def test_a_changed_version_set_changes_the_pod_template(host: Built) -> None:
    other = build(nvidiaDriverVersion="580.105.08")
    assert other.outputs["installedVersionsHash"] != host.outputs["installedVersionsHash"]
    before, after = ds_pod(host), ds_pod(other)
    assert before != after
    assert after["metadata"]["annotations"][gke_objects.VERSIONS_ANNOTATION] == other.outputs["installedVersionsHash"]
    # Benchmark settings are not part of the version set: the DaemonSet stays.
    assert ds_pod(build(intranodeTokens=2048)) == before


# -- the init script's exit codes ---------------------------------------------------------------------------


def run_init(tmp_path, installer_rc: int, status: dict[str, Any] | None) -> tuple[subprocess.CompletedProcess, Any]:
    """Runs the init script with its host paths under tmp_path, nsenter/sleep/curl replaced by stubs."""
    root = tmp_path / "host"
    cm = tmp_path / "cm" / "..data"
    cm.mkdir(parents=True)
    (cm / "run.sh").write_text(f"exit {installer_rc}\n")
    stubs = tmp_path / "bin"
    stubs.mkdir()
    state = root / gke_objects.STATE_DIR.lstrip("/")
    (stubs / "nsenter").write_text(
        "#!/bin/bash\n"
        "while [[ $1 != -- ]]; do shift; done; shift\n"
        'if [[ $1 == bash ]]; then exec bash "' + str(root) + '$2"; fi\n'
        'cat > /dev/null; echo curl "$@" >> "' + str(tmp_path) + '/curl.log"\n'
    )
    (stubs / "sleep").write_text(f'#!/bin/bash\necho "$@" > "{tmp_path}/slept"\n')
    for f in stubs.iterdir():
        f.chmod(0o755)
    if status is not None:
        state.mkdir(parents=True)
        (state / "status.json").write_text(json.dumps(status))
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "ca.crt").write_text("ca")
    (sa / "token").write_text("token")
    script = (
        payload.gke_installer_init()
        .replace("host=/host", f"host={root}")
        .replace("/installer/..data", str(cm))
        .replace("sa=/var/run/secrets/kubernetes.io/serviceaccount", f"sa={sa}")
    )
    # Exactly what the DaemonSet sets (but the node name, which Kubernetes fills in).
    daemonset_env = {e["name"]: e["value"] for e in gke_installer.init_env("00112233aabbccdd") if "value" in e}
    env = {
        **daemonset_env,
        "PATH": f"{stubs}:/usr/bin:/bin",
        "NODE_NAME": "node-a",
        "KUBERNETES_SERVICE_HOST": "10.8.0.1",
        "KUBERNETES_SERVICE_PORT": "443",
    }
    proc = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, check=False)
    return proc, state


def test_init_waits_for_the_reboot_on_exit_75(tmp_path) -> None:
    proc, state = run_init(tmp_path, gke_objects.REBOOT_EXIT, {"ready": False})
    assert "scheduled a reboot" in proc.stdout
    assert (tmp_path / "slept").read_text().split() == [str(gke_objects.REBOOT_WAIT_SECONDS)]
    assert proc.returncode == 1 and "did not reboot" in proc.stderr  # only if the node stayed up
    assert not (state / "installed-hash").exists() and not (tmp_path / "curl.log").exists()


def test_init_fails_with_the_installers_exit_code(tmp_path) -> None:
    proc, state = run_init(tmp_path, 9, {"ready": False})
    assert proc.returncode == 9
    assert "failed with exit code 9" in proc.stderr and not (tmp_path / "slept").exists()
    assert not (state / "installed-hash").exists()


def test_init_records_the_hash_and_labels_the_node_when_ready(tmp_path) -> None:
    proc, state = run_init(tmp_path, 0, {"ready": True})
    assert proc.returncode == 0, proc.stderr
    assert (state / "installed-hash").read_text().strip() == "00112233aabbccdd"
    curl = (tmp_path / "curl.log").read_text()
    assert "https://10.8.0.1:443/api/v1/nodes/node-a" in curl and "-X PATCH" in curl
    assert '"deepep-a4/installed":"00112233aabbccdd"' in curl


def test_init_refuses_a_zero_exit_without_a_ready_status(tmp_path) -> None:
    proc, state = run_init(tmp_path, 0, {"ready": False})
    assert proc.returncode == 1 and "does not say ready" in proc.stderr
    assert not (state / "installed-hash").exists()


SHELLCHECK = shutil.which("shellcheck", path=f"{plan_engine.ROOT / '.venv/bin'}:/usr/bin:/bin")


@pytest.mark.skipif(SHELLCHECK is None, reason="no shellcheck")
def test_init_and_bench_scripts_pass_shellcheck(tmp_path) -> None:
    exe = str(SHELLCHECK)
    for name, text in {
        "init.sh": payload.gke_installer_init(),
        "bench.sh": "#!/bin/bash\n" + gke_bench.bench_command()[2],
    }.items():
        f = tmp_path / name
        f.write_text(text)
        proc = subprocess.run(
            [exe, "-s", "bash", "-e", "SC1090,SC1091", str(f)], capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0, proc.stdout


# -- the benchmark Jobs ---------------------------------------------------------------------------------------


def env_of(job: dict[str, Any]) -> dict[str, Any]:
    [c] = job["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c["env"]}


def test_single_node_jobs_run_one_pod_with_eight_gpus(host: Built) -> None:
    for test in ("intranode", "low-latency"):
        job = host.job(test)
        spec = job["spec"]
        assert spec["completions"] == 1 and spec["parallelism"] == 1 and "completionMode" not in spec
        [c] = spec["template"]["spec"]["containers"]
        assert c["resources"]["limits"]["nvidia.com/gpu"] == 8 == c["resources"]["requests"]["nvidia.com/gpu"]
        assert c["resources"]["requests"]["cpu"] and c["resources"]["requests"]["memory"]
        assert "cpu" not in c["resources"]["limits"]  # throttling would skew the benchmark
        assert env_of(job)["BENCH_TESTS"] == test
        assert "subdomain" not in spec["template"]["spec"]


def test_internode_is_an_indexed_job_over_every_node_with_a_headless_service() -> None:
    b = build(nodeCount=3, internodeExperts=240)  # DeepEP: experts % (3 nodes x 8 ranks) == 0
    job = b.job("internode")
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 3, 3)
    pod = spec["template"]
    assert pod["spec"]["subdomain"] == gke_objects.INTERNODE_SERVICE
    svc = b.one("kubernetes:core/v1:Service").inputs
    assert svc["metadata"]["name"] == gke_objects.INTERNODE_SERVICE and svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["publishNotReadyAddresses"] is True
    assert all(pod["metadata"]["labels"][k] == v for k, v in svc["spec"]["selector"].items())
    env = env_of(job)
    assert env["WORLD_SIZE"] == "3"
    assert env["RANK"] == {
        "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
    }
    assert env["MASTER_ADDR"] == f"deepep-internode-0.{gke_objects.INTERNODE_SERVICE}.deepep-a4.svc.cluster.local"
    assert env["MASTER_PORT"] == str(gke_objects.MASTER_PORT)
    # One pod per node.
    [term] = pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert b.one("kubernetes:core/v1:Service").urn in b.one(JOB, "deepep-bench-internode").deps


def test_jobs_follow_the_stacks_benchmarks_and_sizes() -> None:
    b = build(benchmarks=["intranode"], intranodeTokens=2048, benchProcesses=4)
    assert [j.inputs["metadata"]["name"] for j in b.of(JOB)] == ["deepep-intranode"]
    assert not b.of("kubernetes:core/v1:Service")
    env = env_of(b.job("intranode"))
    assert env["BENCH_INTRANODE_TOKENS"] == "2048" and env["BENCH_PROCESSES"] == "4"


def test_host_network_pods(host: Built) -> None:
    for j in host.of(JOB):
        spec = j.inputs["spec"]["template"]["spec"]
        if j.inputs["metadata"]["name"] == "deepep-intranode":  # NVLink only: the pod network
            assert "hostNetwork" not in spec and "dnsPolicy" not in spec
        else:
            assert spec["hostNetwork"] is True and spec["dnsPolicy"] == "ClusterFirstWithHostNet"
        assert not j.inputs["spec"]["template"]["metadata"].get("annotations")


def test_multi_network_pods_take_the_pod_network_and_the_rdma_networks_in_order(multi: Built) -> None:
    # Google's A4 test pods attach eth0 and rdma-0..7 as eth2..eth9, no gVNIC (container-engine-accelerators
    # gpudirect-rdma/nccl-test-a4.yaml, read at 155bfa49b7459a55c2352495d3eeb46a55637be6).
    for j in multi.of(JOB):
        pod = j.inputs["spec"]["template"]
        if j.inputs["metadata"]["name"] == "deepep-intranode":  # NVLink only: no NICs handed to it
            assert not pod["metadata"].get("annotations")
            continue
        assert "hostNetwork" not in pod["spec"]
        ann = pod["metadata"]["annotations"]
        assert ann["networking.gke.io/default-interface"] == "eth0"
        ifaces = json.loads(ann["networking.gke.io/interfaces"])
        assert ifaces[0] == {"interfaceName": "eth0", "network": "default"}
        assert all(i["network"] != multi.cfg.name("gvnic-1") for i in ifaces)
        assert ifaces[1:] == [{"interfaceName": f"eth{i + 2}", "network": n} for i, n in enumerate(RDMA)]


def test_network_names_must_be_the_eight_rdma_networks() -> None:
    with pytest.raises(ValueError, match="8 RDMA Network names"):
        build(network_names=RDMA[:7])


def test_the_whole_gke_plan_names_networks_that_exist_in_nic_order() -> None:
    """Through gke_platform: every network a benchmark pod names is a Network object of the plan."""
    result = plan(STACK, podNetworking="multiNetwork")
    networks = [r["inputs"]["metadata"]["name"] for r in of_type(result, "kubernetes:networking.gke.io/v1:Network")]
    prefix = result.outputs["multiNetworks"][0].rsplit("-gvnic-1", 1)[0]
    in_nic_order = [f"{prefix}-gvnic-1"] + [f"{prefix}-rdma-{i}" for i in range(8)]
    assert sorted(networks) == sorted(in_nic_order)
    rdma_jobs = [j for j in of_type(result, JOB) if j["inputs"]["metadata"]["name"] != "deepep-intranode"]
    assert len(rdma_jobs) == 2
    for job in rdma_jobs:
        ann = job["inputs"]["spec"]["template"]["metadata"]["annotations"]
        ifaces = json.loads(ann["networking.gke.io/interfaces"])
        assert [i["network"] for i in ifaces[1:]] == in_nic_order[1:]  # the RDMA NICs; the gVNIC is unused


def test_bench_pods_hold_the_least_privileges(host: Built, multi: Built) -> None:
    def sc(b: Built, test: str) -> dict[str, Any]:
        [c] = b.job(test)["spec"]["template"]["spec"]["containers"]
        return c["securityContext"]

    unprivileged = {"privileged": False, "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True}
    for b in (host, multi):
        # NVLink and CUDA IPC only: an unprivileged user with no capability at all.
        assert sc(b, "intranode") == {
            **unprivileged,
            "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": True,
            "runAsUser": 10001,
            "runAsGroup": 10001,
        }
        assert b.job("intranode")["spec"]["template"]["spec"]["securityContext"]["fsGroup"] == 10001
    for test in ("internode", "low-latency"):  # NVSHMEM registers its heap with the NICs
        assert sc(multi, test) == {
            **unprivileged,
            "runAsUser": 0,
            "capabilities": {"drop": ["ALL"], "add": ["IPC_LOCK"]},
        }
        # hostNetwork RDMA: no device plugin hands out /dev/infiniband, so only privileged opens it.
        assert sc(host, test) == {
            "privileged": True,
            "readOnlyRootFilesystem": True,
            "capabilities": {"add": ["IPC_LOCK"]},
        }
    for b in (host, multi):
        for j in b.of(JOB):
            spec = j.inputs["spec"]["template"]["spec"]
            assert not spec.get("hostPID") and not spec.get("hostIPC")
            host_paths = {v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
            # gIB only in the pods with RDMA devices (test_nccl_net_rule.py): not in intranode's.
            rdma = j.inputs["metadata"]["name"] != gke_bench.job_name("intranode")
            gib = {gke_objects.GIB_HOST_DIR} if rdma else set()
            assert host_paths == {gke_objects.HOST_NVIDIA, gke_objects.VERBS_CONFIG_HOST_DIR} | gib
            [c] = spec["containers"]
            mounts = {m["name"]: m for m in c["volumeMounts"]}
            assert mounts["install-root"]["readOnly"] is True and ("gib" in mounts) == rdma
            assert not rdma or mounts["gib"]["readOnly"] is True
            # libibverbs loads only the providers /etc/libibverbs.d names (troubleshooting T21).
            assert mounts["verbs-config"] == {
                "name": "verbs-config",
                "mountPath": "/etc/libibverbs.d",
                "readOnly": True,
            }
            volumes = {v["name"]: v for v in spec["volumes"]}
            assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "250Gi"}
            assert "readOnly" not in mounts["dshm"] and "readOnly" not in mounts["tmp"]
            # troubleshooting T16's provider fix needs libibverbs' default folder writable under a read-only root
            assert mounts["verbs-providers"]["mountPath"] == "/usr/lib/x86_64-linux-gnu/libibverbs"
            assert "readOnly" not in mounts["verbs-providers"] and "emptyDir" in volumes["verbs-providers"]
            # /dev/shm counts against the memory limit: it must fit under it
            assert int(c["resources"]["limits"]["memory"].removesuffix("Gi")) > 250
            assert spec["automountServiceAccountToken"] is False
            assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}


def test_bench_environment_comes_from_the_installers_env_file_only(host: Built) -> None:
    job = host.job("internode")
    [c] = job["spec"]["template"]["spec"]["containers"]
    assert c["image"] == host.cfg.gke.container_image == UBUNTU_IMAGE
    script = c["command"][2]
    assert c["command"][:2] == ["bash", "-c"]
    assert f"set -a; . {gke_objects.ENV_FILE}; set +a" in script
    assert "unset TORCH_NCCL_USE_COMM_NONBLOCKING" in script
    assert not re.search(r"\b(apt|apt-get|pip|pip3|curl|wget|git)\b", script)
    assert "--env-file" not in script  # sourced once, inherited by the runner
    env = env_of(job)
    assert "TORCH_NCCL_USE_COMM_NONBLOCKING" not in env
    assert not [k for k in env if k.startswith(("NCCL_", "NVSHMEM_"))]  # the runner adds gIB's where present
    assert set(env) - {"WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT", "LD_LIBRARY_PATH", "PATH", "HOME"} == {
        k for k in env if k.startswith("BENCH_")
    }
    assert env["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64:/usr/local/nvidia/lib"  # troubleshooting T16
    # The gIB plugin folder is mounted where the runner looks for it.
    assert f"--gib-dir {gke_objects.GIB_DIR}" in script


def test_bench_command_runs_the_runner_with_the_env_file_and_no_torch_nccl_nonblocking(tmp_path) -> None:
    """The container script, with its paths under tmp_path and a fake python that records its environment."""
    env_file = tmp_path / "unified-env.sh"
    env_file.write_text(
        "export DEEPEP_ROOT=/r\nexport TORCH_NCCL_USE_COMM_NONBLOCKING=1\n"
        "export LD_LIBRARY_PATH=/r/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\n"
    )
    python = tmp_path / "python"
    python.write_text(f'#!/bin/bash\nenv > "{tmp_path}/env.$#"; echo "$@" > "{tmp_path}/argv.$#"\n')
    python.chmod(0o755)
    script = (
        gke_bench.bench_command()[2]
        .replace(gke_objects.ENV_FILE, str(env_file))
        .replace(gke_objects.DEEPEP_PYTHON, str(python))
    )
    env = {
        "PATH": "/usr/bin:/bin",
        "LD_LIBRARY_PATH": "/usr/local/nvidia/lib64",
        "TORCH_NCCL_USE_COMM_NONBLOCKING": "0",
    }
    proc = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    runner_env = dict(line.split("=", 1) for line in (tmp_path / "env.7").read_text().splitlines() if "=" in line)
    assert runner_env["DEEPEP_ROOT"] == "/r" and "TORCH_NCCL_USE_COMM_NONBLOCKING" not in runner_env
    assert runner_env["LD_LIBRARY_PATH"] == "/r/lib:/usr/local/nvidia/lib64"
    argv = (tmp_path / "argv.7").read_text().split()
    assert argv[0] == f"{gke_objects.RUNNER_DIR}/run_bench.py" and "--results-dir" in argv
    # A node without the env file: the runner's usage error, which fails the Job at once.
    missing = subprocess.run(
        ["bash", "-c", gke_bench.bench_command()[2]], env=env, capture_output=True, text=True, check=False
    )
    assert missing.returncode == gke_objects.RUNNER_USAGE_EXIT and "is missing" in missing.stdout


def test_jobs_start_after_the_installer_and_do_not_block_pulumi(host: Built) -> None:
    ds = host.one(DS, INSTALLER_DS)
    for j in host.of(JOB):
        assert ds.urn in j.deps, j.name
        meta, spec = j.inputs["metadata"], j.inputs["spec"]
        assert meta["annotations"]["pulumi.com/skipAwait"] == "true"
        assert spec["ttlSecondsAfterFinished"] >= 24 * 3600
        assert spec["template"]["spec"]["restartPolicy"] == "Never"
        rules = spec["podFailurePolicy"]["rules"]
        assert rules[0] == {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
        assert rules[1]["action"] == "FailJob"
        assert rules[1]["onExitCodes"]["values"] == [gke_objects.RUNNER_USAGE_EXIT, gke_objects.RUNNER_UNPROVEN_EXIT]
        assert spec["activeDeadlineSeconds"] > 2 * host.cfg.benchmarks.timeout_minutes * 60


def test_jobs_depend_on_the_multi_network_objects_so_destroy_deletes_them_first(host: Built, multi: Built) -> None:
    for built in (host, multi):
        nets = [r.urn for r in built.of("test:index:Network")]
        assert len(nets) == 2
        for j in built.of(JOB):
            assert set(nets) <= set(j.deps), j.name
        # Only the Jobs: the installer does not wait for (nor outlive) the networks.
        assert not set(nets) & set(built.one(DS, INSTALLER_DS).deps)


def test_bench_pods_share_the_installers_placement_on_installed_nodes_only(host: Built) -> None:
    installed = ds_pod(host)["metadata"]["annotations"][gke_objects.VERSIONS_ANNOTATION]
    assert installed == host.outputs["installedVersionsHash"]
    for j in host.of(JOB):
        spec = j.inputs["spec"]["template"]["spec"]
        # the label the installer puts on a node once this version set is installed there
        assert spec["nodeSelector"] == {
            NODE_POOL_LABEL_KEY: NODE_POOL_LABEL_VALUE,
            gke_objects.INSTALLED_LABEL: installed,
        }
        assert spec["tolerations"] == ds_pod(host)["spec"]["tolerations"]
        assert (
            gke_bench.job_name(j.inputs["metadata"]["labels"][gke_objects.TEST_LABEL]) == j.inputs["metadata"]["name"]
        )


def test_runner_configmap_ships_the_runner_and_parser(host: Built) -> None:
    cm = next(r for r in host.of(CM) if "run_bench.py" in r.inputs["data"])
    bench = plan_engine.ROOT / "scripts/bench"
    expected = {p.name for p in bench.glob("*.py") if p.name != "__init__.py"} | {"names.py"}
    assert set(cm.inputs["data"]) == expected
    assert cm.inputs["data"]["parse.py"] == (bench / "parse.py").read_text()
    for j in host.of(JOB):
        vols = {v["name"]: v for v in j.inputs["spec"]["template"]["spec"]["volumes"]}
        assert vols["runner"]["configMap"]["name"] == cm.state["metadata"]["name"]


def test_a_jobs_deadline_covers_every_repeated_start() -> None:
    once = build(benchmarks=["intranode"]).job("intranode")["spec"]["activeDeadlineSeconds"]
    thrice = build(benchmarks=["intranode"], benchRepeats=3).job("intranode")["spec"]["activeDeadlineSeconds"]
    per_start = build(benchmarks=["intranode"]).cfg.benchmarks.timeout_minutes * 60
    assert thrice - once == 2 * 2 * per_start  # two more starts, each under its timeout, twice over


def test_flex_start_pods_select_the_pool_and_wait_for_the_install_in_an_init_container(tmp_path) -> None:
    # The cluster autoscaler adds a flex-start node only for a pod a new node of the pool could take; a new
    # node lacks the installed label, so the pod must not select it (spot keeps the label: test above).
    from components.gke.objects import INSTALLED_LABEL, NODE_SELECTOR, STATE_DIR

    flex = build(provisioning="flex-start", ttl="8h")
    want = flex.outputs["installedVersionsHash"]
    for job in flex.of(JOB):
        pod = job.inputs["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == NODE_SELECTOR and INSTALLED_LABEL not in pod["nodeSelector"]
        [wait] = pod["initContainers"]
        assert {"name": "VERSIONS_HASH", "value": want} in wait["env"]
        assert wait["securityContext"]["runAsNonRoot"] is True and wait["securityContext"]["privileged"] is False
        state = tmp_path / "state"
        state.mkdir(exist_ok=True)
        (state / "status.json").write_text(json.dumps({"ready": True}))
        (state / "installed-hash").write_text(want + "\n")
        script = wait["command"][2].replace(STATE_DIR, str(state))
        done = subprocess.run(["sh", "-c", script], env={"VERSIONS_HASH": want}, timeout=10, check=False)
        assert done.returncode == 0  # ready for this version set: the loop ends at once
        (state / "installed-hash").write_text("0123456789abcdef\n")
        with pytest.raises(subprocess.TimeoutExpired):  # another version set: it keeps waiting
            subprocess.run(["sh", "-c", script], env={"VERSIONS_HASH": want}, timeout=1, check=False)
    spot = build()
    for job in spot.of(JOB):
        pod = job.inputs["spec"]["template"]["spec"]
        assert pod["nodeSelector"][INSTALLED_LABEL] == spot.outputs["installedVersionsHash"]
        assert "initContainers" not in pod
