"""The report (deepep-a4 report): sources, baseline table, gate, Markdown, CSV and sweep plots from recorded logs."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import click
import pytest

from components import config
from deepep_a4 import report as results
from deepep_a4.report import baselines as bl
from deepep_a4.report import sources as report_sources
from tests.conftest import ROOT

FIX = ROOT / "tests" / "fixtures" / "bench"
RESULTS = [sys.executable, "-m", "deepep_a4.report"]


def report_of(*paths: Path, ratio: float = 0.5) -> results.Report:
    items = [i for p in paths for i in results.PathSource(str(p)).items()]
    return results.analyze(items, ratio, [str(p) for p in paths])


H200_LOG = (FIX / "h200x2_run.log").read_text()


def until_low_latency(log: str) -> str:
    """A real runner log cut before its low-latency test: the NCCL check and intranode (no RDMA test,
    so no transport or NIC evidence is asked); on 2 x H200 this part passes outright."""
    return log[
        : log.index('[runner] begin {"argv": ["/opt/torch/.venv/bin/python3", "/work/main/.deepep/tests/test_low')
    ]


@pytest.fixture
def passing_log(tmp_path: Path) -> Path:
    path = tmp_path / "passing" / "h200x2_nccl_intranode.log"
    path.parent.mkdir()
    path.write_text(until_low_latency(H200_LOG))
    return path


def row(report: results.Report, test: str, metric: str, dtype: str | None, field: str) -> results.Row:
    (r,) = [x for x in report.rows if (x.test, x.metric, x.dtype, x.field) == (test, metric, dtype, field)]
    return r


def test_default_gate_ratio_is_the_config_default() -> None:
    assert results.DEFAULT_GATE_RATIO == float(config.KEYS_BY_NAME["benchGateRatio"].default)


def test_every_baseline_names_its_seed() -> None:
    for b in bl.BASELINES:
        assert b.source.startswith("field report R"), b
        assert b.value > 0
    assert bl.primary("intranode", "dispatch", "BF16", "nvl_bw", 8, 1).value == 440.0  # type: ignore[union-attr]
    assert bl.primary("intranode", "dispatch", "BF16", "nvl_bw", 2, 1).value == 334.79  # type: ignore[union-attr]
    assert bl.primary("low-latency", "dispatch+combine", None, "bw", 2, 1) is None


def test_h200_run_is_compared_with_the_2_gpu_b200_baseline_of_field_report_r1() -> None:
    rep = report_of(FIX / "h200x2_run.log")
    # The low-latency test completed, but NVSHMEM could not start IBGDA there (no NICs): not a pass.
    assert [(r.test, r.status) for r in rep.runs] == [
        ("nccl", "passed"),
        ("intranode", "passed"),
        ("low-latency", "failed"),
    ]
    transport = "transport check FAIL: line 98: NVSHMEM could not start IBGDA"
    assert any(p.startswith(transport) for p in rep.runs[2].problems)
    bf16 = row(rep, "intranode", "dispatch", "BF16", "nvl_bw")
    assert bf16.value == 331.99 and bf16.baseline is not None and bf16.baseline.value == 334.79
    assert bf16.ratio == pytest.approx(331.99 / 334.79) and bf16.gate == "pass"
    # No 2-GPU low-latency baseline in the field reports: shown, not gated.
    ll = row(rep, "low-latency", "dispatch+combine", None, "bw")
    assert ll.value == pytest.approx(310.72, abs=0.01) and ll.gate == "n/a"
    assert row(rep, "nccl", "all-to-all", None, "busbw").value == 280.37
    assert rep.verdict == "FAIL" and not rep.passed
    figures = {c.test: c for c in rep.checks if c.name == "figures"}
    assert figures["intranode"].status == "pass"
    assert figures["low-latency"].status == "not run"
    assert "no A4 baseline for this shape (2 GPUs per node x 1 node(s))" in figures["low-latency"].detail


def test_gate_catches_the_single_nic_trap() -> None:
    rep = report_of(FIX / "internode_v121_single_nic.log")
    rdma = row(rep, "internode", "dispatch", "BF16", "rdma_bw")
    assert rdma.value < 10 and rdma.gate == "FAIL"
    assert rdma.baseline is not None and rdma.baseline.value == 81.0
    assert not rep.passed


def test_gke_field_report_sample_reaches_the_default_gate_but_proves_nothing_without_evidence() -> None:
    rep = report_of(FIX / "r2_internode_gke.log")
    rdma = row(rep, "internode", "dispatch", "FP8", "rdma_bw")
    assert rdma.ratio == pytest.approx(43.36 / 70.0)
    assert rdma.gate == "pass"
    assert [b.value for b in rdma.references] == [43.36]
    # A raw DeepEP log names no transport, holds no NIC counters and does not say how many nodes ran.
    assert rep.runs[0].status == "unproven" and rep.verdict == "NOT PROVEN" and not rep.passed
    not_run = {(c.name, c.status) for c in rep.open_checks}
    assert not_run == {("transport", "not run"), ("NIC", "not run"), ("nodes", "not run")}
    assert report_of(FIX / "r2_internode_gke.log", ratio=0.7).verdict == "FAIL"


def test_failed_or_truncated_test_fails_the_gate() -> None:
    rep = report_of(FIX / "intranode_truncated.log")
    assert rep.runs[0].status == "failed" and not rep.passed


def test_folder_source_reads_logs_and_runner_json_once(tmp_path: Path) -> None:
    (tmp_path / "node-0").mkdir()
    (tmp_path / "node-0" / "run.log").write_text((FIX / "h200x2_run.log").read_text())
    # The same run again as the runner's JSON of one test: not counted twice.
    from scripts.bench import parse as bp

    intra = next(r for r in bp.parse_log((FIX / "h200x2_run.log").read_text()) if r.test == "intranode")
    (tmp_path / "node-0" / "intranode-copy.json").write_text(
        json.dumps({"test": "intranode", "status": "passed", "problems": [], "records": intra.records})
    )
    (tmp_path / "node-0" / "summary.json").write_text("{}")
    rep = report_of(tmp_path)
    assert sorted(r.test for r in rep.runs) == ["intranode", "low-latency", "nccl"]


class FakeCoreV1:
    """What KubernetesSource uses of kubernetes.client.CoreV1Api."""

    def __init__(self, logs: dict[str, str]):
        self.logs = logs
        self.calls: list[tuple[str, Any]] = []

    def list_namespaced_pod(self, namespace: str, label_selector: str) -> Any:
        self.calls.append(("list", (namespace, label_selector)))
        pods = [
            SimpleNamespace(
                metadata=SimpleNamespace(
                    name=name,
                    labels={"job-name": name.rsplit("-", 2)[0]},
                    annotations={"batch.kubernetes.io/job-completion-index": name.split("-")[-2]},
                ),
                spec=SimpleNamespace(node_name=f"node-{i}"),
                status=SimpleNamespace(phase="Succeeded"),
            )
            for i, name in enumerate(self.logs)
        ]
        return SimpleNamespace(items=pods)

    def read_namespaced_pod_log(self, name: str, namespace: str, container: str) -> str:
        self.calls.append(("log", (name, namespace, container)))
        return self.logs[name]


def test_kubernetes_source_reads_every_benchmark_pod() -> None:
    from components.gke import objects as gke_objects

    api = FakeCoreV1(
        {
            "deepep-internode-0-abcde": (FIX / "r2_internode_gke.log").read_text(),
            "deepep-internode-1-fghij": (FIX / "internode_v121_single_nic.log").read_text(),
        }
    )
    src = results.KubernetesSource("deepep-a4", core_v1=api)
    rep = results.analyze(src.items(), 0.5, [src.describe()])
    assert api.calls[0] == ("list", ("deepep-a4", gke_objects.BENCH_SELECTOR))
    assert ("log", ("deepep-internode-0-abcde", "deepep-a4", gke_objects.BENCH_CONTAINER)) in api.calls
    assert [r.origin for r in rep.runs] == ["deepep-internode-0-abcde", "deepep-internode-1-fghij"]
    assert rep.runs[0].meta["index"] == "0"
    assert not rep.passed  # node 1 shows the single-NIC trap


def test_sources_are_pluggable(tmp_path: Path) -> None:
    seen: list[str] = []
    text = until_low_latency(H200_LOG)

    class Memory:
        def __init__(self, spec: str):
            self.spec = spec

        def describe(self) -> str:
            return self.spec

        def items(self) -> Any:
            seen.append(self.spec)
            yield results.LogItem("mem", text=text)

    results.register_source("mem", lambda spec, args: Memory(spec))
    try:
        rc = results.main(["mem://bucket/run", "--out", str(tmp_path), "--no-plots"])
    finally:
        report_sources._SOURCES.pop("mem")
    assert rc == 0 and seen == ["mem://bucket/run"]


def test_report_markdown_csv_json_and_plots(tmp_path: Path) -> None:
    rep = report_of(FIX / "h200x2_run.log", FIX / "r2_internode_gke.log")
    path = results.write_report(rep, tmp_path)
    md = path.read_text()
    assert "**Verdict: FAIL**" in md and "## Checks" in md and "## What ran" in md
    assert "## Intranode (test_intranode.py)" in md and "## Internode (test_internode.py)" in md
    assert "| 331.99 NVL |" in md and "334.79" in md and "field report R1" in md
    assert "6.5 GB/s" in md  # the single-NIC note under the internode table
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert len(pngs) == 4  # intranode: dispatch FP8, dispatch BF16, combine; internode: dispatch FP8
    assert all((tmp_path / p).read_bytes()[:4] == b"\x89PNG" for p in pngs)
    assert all(f"]({p})" in md for p in pngs)
    rows = list(csv.DictReader((tmp_path / "results.csv").open()))
    assert {"origin", "test", "metric", "dtype", "value", "baseline", "ratio", "gate"} <= set(rows[0])
    assert any(r["test"] == "internode" and r["field"] == "rdma_bw" and r["gate"] == "pass" for r in rows)
    sweeps = list(csv.DictReader((tmp_path / "sweeps.csv").open()))
    assert sum(1 for s in sweeps if s["test"] == "intranode") == 49
    assert any(s["nvl_chunk"] == "default" for s in sweeps)
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["gate"] == "fail" and doc["verdict"] == "FAIL" and doc["gate_ratio"] == 0.5
    assert {"test", "origin", "name", "status", "detail"} <= set(doc["checks"][0])


def test_cli_exit_codes(tmp_path: Path, passing_log: Path) -> None:
    ok = subprocess.run(
        [*RESULTS, str(passing_log), "--out", str(tmp_path / "ok")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr
    assert "gate: PASS" in ok.stdout and (tmp_path / "ok" / "report.md").is_file()
    bad = subprocess.run(
        [*RESULTS, str(FIX / "internode_v121_single_nic.log"), "--out", str(tmp_path / "bad"), "--no-plots"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 1 and "gate: FAIL" in bad.stdout
    assert "of the baseline 81" in bad.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    none = subprocess.run(
        [*RESULTS, str(empty), "--out", str(tmp_path / "none")], capture_output=True, text=True, check=False
    )
    assert none.returncode == 2


# -- what a user gets wrong: one line saying what and where, exit 2, never a traceback -------------------


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RESULTS, *args], capture_output=True, text=True, check=False, cwd=ROOT)


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


BAD_RUNNER_DOCS = [
    ({"test": "intranode", "records": "x"}, "`records` must be a list of records, not str"),
    ({"test": "intranode", "status": "passed", "records": [{"name": "dispatch", "values": {}}]}, "has no `kind`"),
    ({"test": "intranode", "records": ["x"]}, "record 0 is a str, not an object"),
    ({"test": "intranode", "records": [{"kind": "best", "values": {"nvl_bw": "fast"}}]}, "values.nvl_bw must be a"),
    ({"test": "intranode", "records": [{"kind": "best", "params": [], "values": {}}]}, "`params` must be an object"),
    ({"test": "internode", "records": [{"kind": "sweep", "values": {"rdma_bw": 1.0}}]}, "lacks params.nvl_chunk"),
    ({"test": "nccl", "records": [{"kind": "nccl", "values": {"busbw": 1.0}}]}, "lacks values.algbw"),
    ({"test": "allreduce", "records": []}, "`test` is 'allreduce', not one of"),
    ({"test": "intranode", "problems": [1], "records": []}, "`problems` must be a list of strings"),
    ({"test": "internode", "records": [], "checks": [{"check": "NIC"}]}, "`checks` must be a list of"),
    ({"test": "internode", "records": [], "begin": "node 0"}, "`begin` must be an object"),
]


@pytest.mark.parametrize(("doc", "why"), BAD_RUNNER_DOCS)
def test_malformed_runner_json_is_skipped_with_a_warning_naming_the_file(
    tmp_path: Path, doc: dict[str, Any], why: str, passing_log: Path
) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    bad = runs / "intranode.json"
    bad.write_text(json.dumps(doc))
    alone = run_cli(str(runs), "--out", str(tmp_path / "none"), "--no-plots")
    assert alone.returncode == 2
    assert "Traceback" not in alone.stderr, alone.stderr
    warning, last = alone.stderr.strip().splitlines()
    assert warning.startswith(f"warning: skipping {bad}: ") and why in warning
    assert "re-run the test, or remove the file" in warning
    assert last == f"no benchmark results found in: {runs}"
    assert not (tmp_path / "none").exists()
    # Next to a usable log the report is written from the log, the bad file still named.
    (runs / "run.log").write_text(passing_log.read_text())
    mixed = run_cli(str(runs), "--out", str(tmp_path / "ok"), "--no-plots")
    assert mixed.returncode == 0, mixed.stderr
    assert f"warning: skipping {bad}: " in mixed.stderr and "gate: PASS" in mixed.stdout


def test_undecodable_json_is_skipped_with_a_warning(tmp_path: Path) -> None:
    (tmp_path / "intranode.json").write_text('{"test": "intranode", "records": [')
    proc = run_cli(str(tmp_path), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert f"warning: skipping {tmp_path / 'intranode.json'}: not valid JSON" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_bad_document_of_another_source_is_skipped_too(capsys: pytest.CaptureFixture[str]) -> None:
    items = [results.LogItem("mem/intranode.json", doc={"test": "intranode", "records": [{"values": {}}]})]
    assert results.runs_from(items) == []
    assert "warning: skipping mem/intranode.json: record 0 has no `kind`" in capsys.readouterr().err


@pytest.mark.parametrize("fixture", sorted(p.name for p in FIX.glob("*.log")))
def test_the_parsers_own_records_pass_the_runner_json_check(fixture: str) -> None:
    from scripts.bench import parse as bp

    for res in bp.parse_log((FIX / fixture).read_text()):
        if res.test is None:
            continue
        doc = {"test": res.test, "status": "passed", "problems": res.problems, "records": res.records}
        assert results.check_runner_doc(json.loads(json.dumps(doc)))["records"] == res.records


def test_missing_kubeconfig_says_where_to_get_one(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent"
    proc = run_cli("k8s:deepep-a4", "--kubeconfig", str(missing), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert line.startswith(f"error: cannot load kubeconfig {missing}: no such file.")
    assert "pulumi stack output getCredentials" in line and "gcloud container clusters get-credentials" in line


def test_unparsable_kubeconfig_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    kc = tmp_path / "kubeconfig"
    kc.write_text("clusters: [\n")
    proc = run_cli("k8s:deepep-a4", "--kubeconfig", str(kc), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert line.startswith(f"error: cannot load kubeconfig {kc}: ") and "getCredentials" in line


def test_unreachable_cluster_is_a_source_error() -> None:
    class Unreachable:
        def list_namespaced_pod(self, namespace: str, label_selector: str) -> Any:
            raise ConnectionError("Max retries exceeded\nwith url: /api/v1/namespaces/deepep-a4/pods")

    src = results.KubernetesSource("deepep-a4", kubeconfig="/k/config", core_v1=Unreachable())
    with pytest.raises(results.SourceError) as err:
        list(src.items())
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith("cannot list the benchmark pods in namespace deepep-a4 with kubeconfig /k/config: ")
    assert "Max retries exceeded with url" in text and "getCredentials" in text


@pytest.mark.parametrize("sub", ["", "sub/dir"])
def test_out_that_is_a_file_is_refused_before_reading(tmp_path: Path, sub: str) -> None:
    file = tmp_path / "report.md"
    file.write_text("mine\n")
    out = file / sub if sub else file
    proc = run_cli(str(FIX / "h200x2_run.log"), "--out", str(out), "--no-plots")
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert line.startswith(f"error: --out {out} is not a folder")
    assert file.read_text() == "mine\n"


def test_nonexistent_source_path_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent.log"
    proc = run_cli(str(missing), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert one_line_error(proc) == f"error: no such file or folder: {missing}"
    assert not (tmp_path / "out").exists()


def test_unknown_stack_lists_the_available_ones(tmp_path: Path) -> None:
    proc = run_cli("--stack", "nosuch", "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    line = one_line_error(proc)
    known = ", ".join(report_sources.stackfile.available_stacks(ROOT))  # whatever stacks/ holds, a user's too
    assert line == f"error: no stack file stacks/Pulumi.nosuch.yaml (stacks: {known})"


def test_a_known_stack_is_not_refused() -> None:
    assert results.unknown_stack("gke-b200") is None
    assert results.unknown_stack("../stacks/Pulumi.gke-b200") is not None


@pytest.mark.parametrize("value", ["-3", "-0.01", "1.5", "nan", "inf", "abc"])
def test_gate_ratio_outside_0_to_1_is_a_usage_error(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert results.main([str(FIX / "h200x2_run.log"), f"--gate-ratio={value}", "--no-plots"]) == 2
    err_text = " ".join(capsys.readouterr().err.split())
    assert (
        f"Invalid value for '--gate-ratio': must be a fraction between 0 and 1 (as benchGateRatio), e.g. 0.5, "
        f"not {value}" in err_text
    )


@pytest.mark.parametrize(("value", "ok"), [("-0.01", False), ("0", True), ("0.5", True), ("1", True), ("1.01", False)])
def test_gate_ratio_range_is_the_one_of_bench_gate_ratio(value: str, ok: bool) -> None:
    # components/config: benchGateRatio "must be a fraction between 0 and 1" (0 <= ratio <= 1).
    if ok:
        assert results.gate_ratio_arg(value) == float(value)
    else:
        with pytest.raises(click.BadParameter, match="between 0 and 1"):
            results.gate_ratio_arg(value)


@pytest.mark.parametrize(("value", "code"), [("0", 0), ("1", 1)])
def test_gate_ratio_bounds_are_accepted(tmp_path: Path, value: str, code: int, passing_log: Path) -> None:
    rc = results.main([str(passing_log), "--gate-ratio", value, "--out", str(tmp_path / "out"), "--no-plots"])
    assert rc == code  # at 1 every figure must reach its baseline: 331.99 < 334.79 fails


def test_unknown_source_scheme_is_a_usage_error(tmp_path: Path) -> None:
    proc = run_cli("foo://bar", "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert line.startswith("error: unknown source scheme 'foo' in foo://bar; known: gs, k8s")


def test_a_sources_own_exit_message_exits_2_not_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    class NoTool:
        def describe(self) -> str:
            return "nt://x"

        def items(self) -> Any:
            raise SystemExit("reading nt://x needs the nt CLI")
            yield

    results.register_source("nt", lambda spec, args: NoTool())
    try:
        rc = results.main(["nt://x", "--out", str(tmp_path), "--no-plots"])
    finally:
        report_sources._SOURCES.pop("nt")
    assert rc == 2
    assert capsys.readouterr().err.strip() == "error: reading nt://x needs the nt CLI"


def test_a_stack_report_without_the_pulumi_cli_says_so(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}  # no pulumi here
    proc = subprocess.run(
        [*RESULTS, "--stack", "gke-b200", "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        cwd=ROOT,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: pulumi not found on PATH")
    assert "Traceback" not in proc.stderr


def test_the_gate_ratio_of_a_stack_comes_from_its_stack_file(tmp_path: Path, monkeypatch) -> None:
    # No silent fallback: the stack's benchGateRatio is read the way Pulumi reads the stack, no CLI needed.
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.t.yaml").write_text(
        "config:\n  deepep-a4:project: my-project-1\n  deepep-a4:benchGateRatio: '0.7'\n"
    )
    monkeypatch.setattr(report_sources, "ROOT", tmp_path)
    assert results.stack_gate_ratio("t") == 0.7
    (tmp_path / "stacks" / "Pulumi.t.yaml").write_text("config:\n  deepep-a4:benchGateRatio: lots\n")
    with pytest.raises(results.SourceError, match=r"stack t: cannot read its benchGateRatio"):
        results.stack_gate_ratio("t")


# -- every reason reaches report.md and the console, the fix first ----------------------


def test_every_reason_and_the_known_failure_fix_reach_report_md_and_the_console(tmp_path: Path) -> None:
    """The internode dispatch timeout has eight reasons; the known failure's fix was the 7th and the
    report showed only 3. Now report.md and the console carry every one, the fix first."""
    log = FIX / "internode_dispatch_timeout.log"
    proc = run_cli(str(log), "--out", str(tmp_path), "--no-plots")
    assert proc.returncode == 1
    (run,) = report_of(log).runs
    assert len(run.problems) > 3
    hint = next(p for p in run.problems if p.startswith("known failure: "))
    assert "troubleshooting T12" in hint
    md = (tmp_path / "report.md").read_text()
    assert f"{len(run.problems)} reasons: see [Reasons](#reasons)" in md
    for reason in run.problems:
        assert f"- {reason}" in md, reason
        assert f"    - {reason}" in proc.stderr, reason
    reasons = md[md.index("## Reasons") :]
    assert reasons.index(hint) < reasons.index("line 10: error: RuntimeError")  # the fix before the symptoms
    assert proc.stderr.index(hint) < proc.stderr.index("line 10: error: RuntimeError")


def test_an_intranode_timeout_gets_the_intranode_fix_in_the_report() -> None:
    (run,) = report_of(FIX / "intranode_failed.log").runs
    hints = [p for p in run.problems if p.startswith("known failure: ")]
    assert len(hints) == 1 and hints[0].startswith("known failure: intranode dispatch timed out")
    assert "T12" not in hints[0] and "NVSHMEM" not in hints[0].split(":", 2)[1]


# -- the verdict fails closed -------------------------------------------------------------

R2_INTERNODE = (FIX / "r2_internode_gke.log").read_text()  # real test_internode.py output (R2)
IBGDA_ENV = {"NVSHMEM_REMOTE_TRANSPORT": "ibgda", "NVSHMEM_IB_ENABLE_IBGDA": "1", "NVSHMEM_IBGDA_NIC_HANDLER": "gpu"}
A4_NICS = [f"mlx5_{i}/1" for i in range(8)]


def runner_log(output: str, begin: dict[str, Any], end: dict[str, Any]) -> str:
    """A test's real output between the markers the runner writes (bench_env.log), as in its pod log."""
    import io

    from scripts.bench.bench_env import log

    out = io.StringIO()
    log(out, "begin", begin)
    out.write(output)
    log(out, "end", end)
    return out.getvalue()


def internode_pod(rank: int, nics: dict[str, Any] | None, transport: dict[str, str] | None = IBGDA_ENV) -> str:
    begin: dict[str, Any] = {"test": "internode", "argv": ["python", "test_internode.py"], "processes": 8}
    begin |= {"nodes": 2, "node_rank": rank, "host": f"a4-node-{rank}", "repeat": 1}
    if transport is not None:
        begin["transport"] = transport
    end: dict[str, Any] = {"test": "internode", "rc": 0, "timed_out": False, "timeout_s": 1800, "seconds": 212.4}
    if nics is not None:
        end["nics"] = nics
    return runner_log(R2_INTERNODE, begin, end)


def even(gb: float = 40.0) -> dict[str, Any]:
    return {"sent": {n: int(gb * 1e9 / 8) for n in A4_NICS}, "expected": 8}


def report_of_texts(*texts: str, expected: tuple[str, ...] = ()) -> results.Report:
    items = [results.LogItem(f"deepep-internode-{i}", text=t) for i, t in enumerate(texts)]
    return results.analyze(items, 0.5, ["mem"], expected)


def test_internode_passes_only_with_its_evidence_from_every_node() -> None:
    rep = report_of_texts(internode_pod(0, even()), internode_pod(1, even()))
    assert rep.verdict == "PASS", [(c.name, c.status, c.detail) for c in rep.open_checks]
    checks = {(c.origin, c.name): c for c in rep.checks}
    assert checks[("deepep-internode-0", "transport")].detail.startswith("IBGDA (NVSHMEM_REMOTE_TRANSPORT=ibgda")
    assert checks[("deepep-internode-1", "NIC")].detail.startswith("every one of 8 NICs carried traffic")
    assert checks[("all", "nodes")].detail == "results from all 2 nodes"


@pytest.mark.parametrize(
    ("pods", "verdict", "check", "says"),
    [
        # Node 1's log is missing: its NICs were never judged.
        ((internode_pod(0, even()),), "NOT PROVEN", "nodes", "no result from node(s) 1 of 2"),
        # The pod could not read the counters: nothing shows the traffic crossed the NICs.
        (
            (internode_pod(0, {"error": "no readable port_xmit_data", "expected": 8}), internode_pod(1, even())),
            "NOT PROVEN",
            "NIC",
            "NIC counters not read (no readable port_xmit_data)",
        ),
        # The log does not name the transport.
        ((internode_pod(0, even(), None), internode_pod(1, even())), "NOT PROVEN", "transport", "does not name"),
        ((internode_pod(0, even(), {"NVSHMEM_REMOTE_TRANSPORT": "none"}),), "NOT PROVEN", "transport", "=none"),
        # Counters read, none moved.
        ((internode_pod(0, even(0)), internode_pod(1, even())), "FAIL", "NIC", "none of the 8 NICs sent a byte"),
        # Every GPU on mlx5_0 (troubleshooting T10).
        (
            (internode_pod(0, {"sent": {n: (8 * 10**9 if n == "mlx5_0/1" else 0) for n in A4_NICS}, "expected": 8}),),
            "FAIL",
            "NIC",
            "one NIC only (mlx5_0/1: 100%",
        ),
        # Two NICs idle; or only four visible.
        (
            (internode_pod(0, {"sent": {n: (0 if n in A4_NICS[6:] else 10**9) for n in A4_NICS}, "expected": 8}),),
            "FAIL",
            "NIC",
            "RDMA traffic on 6 of 8 NICs; idle (under 5% of 6.00 GB): mlx5_6/1, mlx5_7/1",
        ),
        (
            (internode_pod(0, {"sent": {n: 10**9 for n in A4_NICS[:4]}, "expected": 8}),),
            "FAIL",
            "NIC",
            "counters of 4 NIC(s)",
        ),
    ],
)
def test_every_gate_fails_closed(pods: tuple[str, ...], verdict: str, check: str, says: str) -> None:
    rep = report_of_texts(*pods)
    assert rep.verdict == verdict
    assert any(c.name == check and says in c.detail for c in rep.open_checks), [
        (c.name, c.status, c.detail) for c in rep.open_checks
    ]


def test_a_test_the_stack_runs_but_the_sources_lack_is_not_run() -> None:
    rep = report_of_texts(until_low_latency(H200_LOG), expected=("intranode", "low-latency", "internode"))
    missing = sorted(c.test for c in rep.open_checks if c.name == "ran")
    assert missing == ["internode", "low-latency"] and rep.verdict == "NOT PROVEN"


def test_the_verdict_and_the_checks_not_run_reach_the_console(tmp_path: Path) -> None:
    proc = run_cli(str(FIX / "r2_internode_gke.log"), "--out", str(tmp_path), "--no-plots")
    assert proc.returncode == 1 and "gate: NOT PROVEN" in proc.stdout
    assert "transport check not run: the log does not name the transport" in proc.stderr
    assert "internode (all): nodes check not run: the log does not say how many nodes ran" in proc.stderr
    md = (tmp_path / "report.md").read_text()
    assert "**Verdict: NOT PROVEN**" in md and "| NIC | not run |" in md


def test_repeated_starts_report_their_spread_and_gate_the_median(tmp_path: Path) -> None:
    """Three real intranode runs on 2 x H200 (three days, three DeepEP builds) as three starts of one node."""
    starts = []
    for i, name in enumerate(("h200x2_run.log", "h200x2_29d31c0_pr466_run.log", "h200x2_nocaps_run.log"), 1):
        log = (FIX / name).read_text()
        begin = log.index('[runner] begin {"argv"', log.index("[runner] end"))
        seg = log[begin : log.index("\n", log.index("[runner] end", begin)) + 1]
        marker = json.loads(seg.splitlines()[0].removeprefix("[runner] begin "))
        marker |= {"host": "h200-vm", "node_rank": 0, "repeat": i, "repeats": 3}
        starts.append(f"[runner] begin {json.dumps(marker)}\n" + seg.split("\n", 1)[1])
    rep = results.analyze([results.LogItem("h200-vm", text="".join(starts))], 0.5, ["mem"])
    assert [(r.test, r.repeat, r.status) for r in rep.runs] == [("intranode", i, "passed") for i in (1, 2, 3)]
    bf16 = row(rep, "intranode", "dispatch", "BF16", "nvl_bw")
    assert sorted(bf16.samples) == [331.93, 331.99, 339.38] and bf16.value == 331.99  # the median
    assert bf16.ratio == pytest.approx(331.99 / 334.79) and rep.verdict == "PASS"
    md = results.markdown(rep)
    assert "| 331.99 NVL | 3: 331.93 / 331.99 / 339.38 |" in md
    assert "the median of its starts, gated" in md
    results.write_csv(rep, tmp_path)
    csv_row = next(r for r in csv.DictReader((tmp_path / "results.csv").open()) if r["dtype"] == "BF16")
    assert (csv_row["starts"], csv_row["min"], csv_row["max"]) == ("3", "331.93", "339.38")


def test_what_ran_is_in_the_report_and_unknown_where_nothing_said() -> None:
    ran = {"host": "a4-node-0", "deepep_ref": "1.2.1+29d31c0", "nvshmem": "3.5.19", "torch": "2.10.0+cu129"}
    begin = {"test": "internode", "argv": [], "processes": 8, "nodes": 2, "node_rank": 0, "ran": ran}
    text = runner_log(R2_INTERNODE, begin, {"test": "internode", "rc": 0})
    item = results.LogItem("deepep-internode-0", text=text, meta={"image": "docker.io/library/ubuntu@sha256:abc"})
    rep = results.analyze([item], 0.5, ["mem"])
    assert rep.runs[0].ran["image"] == "docker.io/library/ubuntu@sha256:abc"  # from the pod's status
    md = results.markdown(rep)
    table = md[md.index("## What ran") :]
    header, _, node = ([c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[2:5])
    cells = dict(zip(header, node, strict=True))
    assert (
        cells["DeepEP ref"] == "1.2.1+29d31c0" and cells["NVSHMEM"] == "3.5.19" and cells["PyTorch"] == "2.10.0+cu129"
    )
    assert cells["driver"] == "unknown" and cells["image"] == "docker.io/library/ubuntu@sha256:abc"
    # A log of an older runner: every column unknown, the node still listed.
    old = results.markdown(report_of(FIX / "r2_internode_gke.log"))
    assert "| r2_internode_gke.log | unknown | unknown |" in old


def test_the_kubernetes_source_takes_the_image_digest_from_the_pod_status() -> None:
    api = FakeCoreV1({"deepep-intranode-0-abcde": until_low_latency(H200_LOG)})
    pods = api.list_namespaced_pod("deepep-a4", "x").items
    from components.gke import objects as gke_objects

    status = SimpleNamespace(name=gke_objects.BENCH_CONTAINER, image_id="docker.io/library/ubuntu@sha256:0123")
    pods[0].status.container_statuses = [status]
    api.list_namespaced_pod = lambda namespace, label_selector: SimpleNamespace(items=pods)  # type: ignore[method-assign]
    (item,) = results.KubernetesSource("deepep-a4", core_v1=api).items()
    assert item.meta["image"] == "docker.io/library/ubuntu@sha256:0123"


def test_outside_reference_band_is_shown_with_its_source_and_never_gated() -> None:
    # DeepEP README v1.2.1: H800 intranode 153/158 GB/s NVLink, internode 43-58 GB/s RDMA, LL EP8 98/127 GB/s.
    assert bl.outside("intranode", "dispatch", "FP8", "nvl_bw", 8, 1)[0].value == 153.0  # type: ignore[union-attr]
    ref, band = bl.outside("internode", "dispatch", "FP8", "rdma_bw", 8, 2)
    assert ref is not None and (ref.value, ref.ep) == (43.0, 16)
    assert [(r.ep, r.value) for r in band] == [(16, 43.0), (32, 58.0), (64, 51.0)]
    assert bl.outside("intranode", "dispatch", "BF16", "nvl_bw", 8, 1) == (None, [])  # DeepEP gives FP8 only
    assert all("H800" in r.note and "v1.2.1" in r.source for r in bl.OUTSIDE if r.test != "elastic")
    # DeepEP V2's own table (README at dd758ca): B200 figures, beside V2's elastic test only.
    assert all("B200" in r.note and "dd758caf4518" in r.source for r in bl.OUTSIDE if r.test == "elastic")
    rep = report_of_texts(internode_pod(0, even()), internode_pod(1, even()))
    rdma = next(
        r for r in rep.rows if (r.node, r.metric, r.dtype, r.field) == ("a4-node-0", "dispatch", "FP8", "rdma_bw")
    )
    assert rdma.outside is not None and rdma.gate == "pass" and rdma.baseline is not None
    md = results.markdown(rep)
    assert "| 43 at EP16 (H800 + CX7 IB); 43-58 at EP16-64 |" in md
    # A 2-GPU run has no published figure at its size: the band is named as such.
    h200 = results.markdown(report_of(FIX / "h200x2_run.log"))
    assert "| none at EP2 (published: 153 at EP8, H800 NVLink, bottleneck bandwidth) |" in h200
    assert "Outside reference: DeepEP README, v1.2.1" in md and "never a pass criterion" in md
    ll = report_of(FIX / "low_latency_interleaved_8.log")
    assert row(ll, "low-latency", "dispatch", None, "bw").outside.value == 98.0  # type: ignore[union-attr]
    # Far below the outside band, still judged against the A4 baseline only.
    assert row(ll, "low-latency", "dispatch", None, "bw").gate == "pass"


@pytest.mark.parametrize(
    ("problems", "pointer"), [(["a", "b"], False), (["a", "b", "c"], True), (["x" * 150, "y" * 150], True)]
)
def test_the_tests_table_points_to_reasons_as_benchmarks_md_says(problems: list[str], pointer: bool) -> None:
    # docs/benchmarks.md: more than two reasons, or reasons longer than 240 characters together.
    from deepep_a4.report import writers
    from deepep_a4.report.runs import Run

    run = Run("pod", "intranode", "failed", problems, [], 8, 1)
    assert writers._short_reasons(run).endswith("see [Reasons](#reasons)") is pointer
    assert "reasons longer than 240 characters together" in (ROOT / "docs" / "benchmarks.md").read_text()
