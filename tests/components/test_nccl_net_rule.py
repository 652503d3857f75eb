"""No rendered benchmark pod can meet NCCL's net plugin rule: a named net plugin with zero devices fails the init.

NCCL's rule, from its source (NVIDIA/nccl v2.27.5-1, the NCCL that torch 2.10.0+cu129 requires and that Google pairs
with gIB 1.1):
- src/init.cc envConfigOverride: NCCL_NET sets the communicator's config.netName;
- src/plugin/net.cc initPluginLibsOnceFunc: the plugins are the external one (NCCL_NET_PLUGIN, else
  libnccl-net.so from the library path; gIB's lib64 holds it), then the internal "IB" and "Socket"
  (src/transport/net_ib.cc, net_socket.cc);
- ncclNetPluginInit: a plugin whose devices() reports ndev <= 0 is disabled;
- ncclNetPluginAssignToComm: with netName set, only the plugin of that name (strcasecmp) is taken;
- ncclNetInit: none taken -> WARN "Failed to initialize any NET plugin", ncclInvalidUsage: the init fails.

The pods come from the real rendering (build_gke_workloads under mocks), their facts from the pod spec as GKE gives
them: a multi-network pod gets one RDMA device per RDMA network in its `networking.gke.io/interfaces` annotation,
a privileged host-network pod sees the node's eight HCAs, any other pod none; gIB's folder exists in the pod only
where its hostPath is mounted at the runner's --gib-dir. Then the real runner (run_bench.main) runs in each pod's
environment, over a file system with those facts, and every environment it starts NCCL with (the NCCL check, each
test) goes through the rule.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from components.gke import bench as gke_bench
from components.gke import objects as gke_objects
from scripts.bench import bench_env, run_bench
from tests.components.gke.test_workloads import JOB, Built, build
from tests.scripts.bench.test_runner import fake_deepep, run

INTERNAL_PLUGINS = ("IB", "Socket")


class NcclInitError(Exception):
    pass


def nccl_net_init(env: dict[str, str], rdma_devices: int, gib_lib: Path | None) -> str:
    """The net plugin NCCL 2.27.5 assigns to a communicator in `env`, or NcclInitError as ncclNetInit fails.
    gIB loads as the external plugin when its lib64 is on LD_LIBRARY_PATH and reports one device per RDMA NIC."""
    plugins: list[tuple[str, int]] = []
    paths = [Path(p) for p in env.get("LD_LIBRARY_PATH", "").split(":") if p]
    if gib_lib is not None and gib_lib in paths and any(gib_lib.glob("libnccl-net*.so*")):
        plugins.append(("gIB", rdma_devices))
    plugins += [("IB", rdma_devices), ("Socket", 1)]  # the pod's eth0
    wanted = env.get("NCCL_NET")
    for name, ndev in plugins:
        if ndev <= 0:
            continue  # ncclNetPluginInit: disabled
        if wanted and wanted.lower() != name.lower():
            continue  # ncclNetPluginAssignToComm: not the named plugin
        return name
    raise NcclInitError(f"NCCL_NET={wanted!r}: Failed to initialize any NET plugin")


def test_the_rule_as_nccl_states_it() -> None:
    gib = Path("/usr/local/gib/lib64")
    with_gib = {"NCCL_NET": "gIB", "LD_LIBRARY_PATH": str(gib)}
    with pytest.raises(NcclInitError, match="Failed to initialize any NET plugin"):
        nccl_net_init(with_gib, 0, None)  # named, not loaded
    assert nccl_net_init({}, 0, None) == "Socket"  # nothing named: NCCL falls back to its socket transport
    assert nccl_net_init({"NCCL_NET": "ib"}, 8, None) == "IB"  # strcasecmp


def pod_facts(job: dict[str, Any], rdma_networks: set[str]) -> tuple[int, bool]:
    """(RDMA devices the pod sees, whether gIB's folder is mounted where the runner looks)."""
    template = job["spec"]["template"]
    spec = template["spec"]
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    interfaces = json.loads(annotations.get("networking.gke.io/interfaces", "[]"))
    devices = sum(1 for i in interfaces if i["network"] in rdma_networks)
    [c] = spec["containers"]
    if spec.get("hostNetwork") and (c.get("securityContext") or {}).get("privileged"):
        devices = 8  # the node's HCAs: the host's network namespace, /dev/infiniband through privileged
    volumes = {v["name"]: v for v in spec["volumes"]}
    gib = any(
        m["mountPath"] == gke_objects.GIB_DIR
        and (volumes[m["name"]].get("hostPath") or {}).get("path") == gke_objects.GIB_HOST_DIR
        for m in c["volumeMounts"]
    )
    return devices, gib


def nccl_envs(tmp: Path, job: dict[str, Any], devices: int, gib: bool, monkeypatch: pytest.MonkeyPatch) -> dict:
    """Every environment the real runner starts NCCL with in this pod: the NCCL check's and each test's."""
    [c] = job["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in c["env"] if "value" in e}
    env.update(RANK="0", MASTER_ADDR="127.0.0.1")  # pod 0 of an internode Job, resolvable here
    env.pop("PATH", None)
    ib = tmp / "ib"
    for i in range(devices):
        (ib / f"mlx5_{i}").mkdir(parents=True)
    gib_dir = tmp / "gib"
    if gib:
        (gib_dir / "lib64").mkdir(parents=True)
        (gib_dir / "lib64/libnccl-net.so").write_text("")
    seen: dict[str, dict[str, str]] = {}
    real = run_bench.run_test

    def run_test(r: run_bench.TestRun, test_env: dict[str, str], *args: Any, **kw: Any) -> run_bench.TestRun:
        if r.test == "nccl":  # the all-to-all worker needs GPUs: its environment is what counts here
            seen["nccl check"] = dict(test_env)
            r.status = "passed"
            return r
        return real(r, test_env, *args, **kw)

    monkeypatch.setattr(run_bench, "run_test", run_test)
    deepep = fake_deepep(tmp, {})
    run(tmp, "--deepep-dir", str(deepep), "--gib-dir", str(gib_dir), "--ib-sysfs", str(ib), env=env)
    for test in env["BENCH_TESTS"].split(","):
        seen[test] = json.loads((tmp / f"seen-{test}.json").read_text())["env"]
    return seen


@pytest.mark.parametrize(
    ("stack", "networking"),
    [("gke-b200", "multiNetwork"), ("gke-b200-ubuntu", "hostNetwork"), ("gke-b200-ubuntu", "multiNetwork")],
)
def test_no_rendered_pod_names_a_net_plugin_it_has_no_device_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stack: str, networking: str
) -> None:
    b: Built = build(stack=stack, podNetworking=networking, ncclGib="true")
    rdma_networks = set(gke_bench.default_network_names(b.cfg)) | {f"test-rdma-{i}" for i in range(8)}
    jobs = [r.inputs for r in b.of(JOB)]
    assert {j["metadata"]["name"] for j in jobs} == {gke_bench.job_name(t) for t in b.cfg.benchmarks.tests}
    named = 0
    for job in jobs:
        name = job["metadata"]["name"]
        devices, gib = pod_facts(job, rdma_networks)
        tmp = tmp_path / name
        for where, env in nccl_envs(tmp, job, devices, gib, monkeypatch).items():
            plugin = nccl_net_init(env, devices, tmp / "gib/lib64" if gib else None)  # raises if the rule is met
            if env.get("NCCL_NET"):
                named += 1
                assert devices > 0 and gib and plugin == env["NCCL_NET"], (name, where)
        if name == gke_bench.job_name("intranode"):
            assert devices == 0 and not gib  # intranode: NVLink, no RDMA device, no gIB
    assert named >= 3  # gIB is used where it can be: the RDMA tests and their NCCL checks


def test_a_runner_that_trusts_a_wrong_device_list_would_meet_the_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check bites: gIB mounted in a pod without RDMA devices, and a runner that would not look, fail NCCL."""
    job = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "env": [{"name": "BENCH_TESTS", "value": "low-latency"}],
                            "volumeMounts": [{"name": "gib", "mountPath": gke_objects.GIB_DIR}],
                        }
                    ],
                    "volumes": [{"name": "gib", "hostPath": {"path": gke_objects.GIB_HOST_DIR}}],
                }
            }
        }
    }
    devices, gib = pod_facts(job, set())
    assert (devices, gib) == (0, True)
    monkeypatch.setattr(run_bench, "rdma_devices", lambda _: ["mlx5_0"])
    envs = nccl_envs(tmp_path, job, devices, gib, monkeypatch)
    assert envs["low-latency"]["NCCL_NET"] == "gIB"
    with pytest.raises(NcclInitError):
        nccl_net_init(envs["low-latency"], devices, tmp_path / "gib/lib64")
    assert bench_env.gib_env({}, str(tmp_path / "gib"), [])[0] is None  # the runner as it is: no gIB here
