"""The report (deepep-a4 report): sources, baseline table, gate, Markdown, CSV and sweep plots from recorded logs."""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from deepep_a4 import config
from deepep_a4.tools import report as results
from deepep_a4.tools.report import baselines as bl
from deepep_a4.tools.report import sources as report_sources
from tests.conftest import ROOT

FIX = ROOT / "tests" / "fixtures" / "bench"
RESULTS = [sys.executable, "-m", "deepep_a4.tools.report"]


def report_of(*paths: Path, ratio: float = 0.5) -> results.Report:
    items = [i for p in paths for i in results.PathSource(str(p)).items()]
    return results.analyze(items, ratio, [str(p) for p in paths])


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


def test_h200_run_is_compared_with_the_2_gpu_b200_baseline_of_seed_001() -> None:
    rep = report_of(FIX / "h200x2_run.log")
    assert [(r.test, r.status) for r in rep.runs] == [
        ("nccl", "passed"),
        ("intranode", "passed"),
        ("low-latency", "passed"),
    ]
    bf16 = row(rep, "intranode", "dispatch", "BF16", "nvl_bw")
    assert bf16.value == 331.99 and bf16.baseline is not None and bf16.baseline.value == 334.79
    assert bf16.ratio == pytest.approx(331.99 / 334.79) and bf16.gate == "pass"
    # No 2-GPU low-latency baseline in the seeds: shown, not gated.
    ll = row(rep, "low-latency", "dispatch+combine", None, "bw")
    assert ll.value == pytest.approx(310.72, abs=0.01) and ll.gate == "n/a"
    assert row(rep, "nccl", "all-to-all", None, "busbw").value == 280.37
    assert rep.passed


def test_gate_catches_the_single_nic_trap() -> None:
    rep = report_of(FIX / "internode_v121_single_nic.log")
    rdma = row(rep, "internode", "dispatch", "BF16", "rdma_bw")
    assert rdma.value < 10 and rdma.gate == "FAIL"
    assert rdma.baseline is not None and rdma.baseline.value == 81.0
    assert not rep.passed


def test_gke_seed_sample_passes_the_default_gate_and_shows_the_other_reference() -> None:
    rep = report_of(FIX / "seed002_internode_gke.log")
    rdma = row(rep, "internode", "dispatch", "FP8", "rdma_bw")
    assert rdma.ratio == pytest.approx(43.36 / 70.0)
    assert rdma.gate == "pass"
    assert [b.value for b in rdma.references] == [43.36]
    assert rep.passed
    assert not report_of(FIX / "seed002_internode_gke.log", ratio=0.7).passed


def test_failed_or_truncated_test_fails_the_gate() -> None:
    rep = report_of(FIX / "intranode_truncated.log")
    assert rep.runs[0].status == "failed" and not rep.passed


def test_folder_source_reads_logs_and_runner_json_once(tmp_path: Path) -> None:
    (tmp_path / "node-0").mkdir()
    (tmp_path / "node-0" / "run.log").write_text((FIX / "h200x2_run.log").read_text())
    # The same run again as the runner's JSON of one test: not counted twice.
    from deepep_a4.node.bench import parse as bp

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
    from deepep_a4.program import gke_objects

    api = FakeCoreV1(
        {
            "deepep-internode-0-abcde": (FIX / "seed002_internode_gke.log").read_text(),
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

    class Memory:
        def __init__(self, spec: str):
            self.spec = spec

        def describe(self) -> str:
            return self.spec

        def items(self) -> Any:
            seen.append(self.spec)
            yield results.LogItem("mem", text=(FIX / "h200x2_run.log").read_text())

    results.register_source("mem", lambda spec, args: Memory(spec))
    try:
        rc = results.main(["mem://bucket/run", "--out", str(tmp_path), "--no-plots"])
    finally:
        report_sources._SOURCES.pop("mem")
    assert rc == 0 and seen == ["mem://bucket/run"]


def test_report_markdown_csv_json_and_plots(tmp_path: Path) -> None:
    rep = report_of(FIX / "h200x2_run.log", FIX / "seed002_internode_gke.log")
    path = results.write_report(rep, tmp_path)
    md = path.read_text()
    assert "**Gate: PASS**" in md
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
    assert doc["gate"] == "pass" and doc["gate_ratio"] == 0.5


def test_cli_exit_codes(tmp_path: Path) -> None:
    ok = subprocess.run(
        [*RESULTS, str(FIX / "h200x2_run.log"), "--out", str(tmp_path / "ok")],
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
]


@pytest.mark.parametrize(("doc", "why"), BAD_RUNNER_DOCS)
def test_malformed_runner_json_is_skipped_with_a_warning_naming_the_file(
    tmp_path: Path, doc: dict[str, Any], why: str
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
    (runs / "run.log").write_text((FIX / "h200x2_run.log").read_text())
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
    from deepep_a4.node.bench import parse as bp

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
    assert line == "error: no stack file stacks/Pulumi.nosuch.yaml (stacks: gce-b200, gke-b200)"


def test_a_known_stack_is_not_refused() -> None:
    assert results.unknown_stack("gke-b200") is None
    assert results.unknown_stack("../stacks/Pulumi.gke-b200") is not None


@pytest.mark.parametrize("value", ["-3", "-0.01", "1.5", "nan", "inf", "abc"])
def test_gate_ratio_outside_0_to_1_is_a_usage_error(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as err:
        results.main([str(FIX / "h200x2_run.log"), f"--gate-ratio={value}", "--no-plots"])
    assert err.value.code == 2
    err_text = capsys.readouterr().err
    assert f"argument --gate-ratio: must be a fraction between 0 and 1 (as benchGateRatio), e.g. 0.5, not {value}" in (
        err_text
    )


@pytest.mark.parametrize(("value", "ok"), [("-0.01", False), ("0", True), ("0.5", True), ("1", True), ("1.01", False)])
def test_gate_ratio_range_is_the_one_of_bench_gate_ratio(value: str, ok: bool) -> None:
    # deepep_a4/config: benchGateRatio "must be a fraction between 0 and 1" (0 <= ratio <= 1).
    if ok:
        assert results.gate_ratio_arg(value) == float(value)
    else:
        with pytest.raises(argparse.ArgumentTypeError, match="between 0 and 1"):
            results.gate_ratio_arg(value)


@pytest.mark.parametrize(("value", "code"), [("0", 0), ("1", 1)])
def test_gate_ratio_bounds_are_accepted(tmp_path: Path, value: str, code: int) -> None:
    rc = results.main([str(FIX / "h200x2_run.log"), "--gate-ratio", value, "--out", str(tmp_path), "--no-plots"])
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
