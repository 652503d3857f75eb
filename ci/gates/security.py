"""Security scan of the Kubernetes manifests an offline plan rendered, with checkov.

    python ci/gates/security.py --checkov PATH/TO/checkov build/plan/STACK [...]

Runs checkov's Kubernetes checks on every plan's files/k8s/ (offline: --skip-download) and fails on
any finding that is neither fixed nor suppressed. A suppression lives next to the object, as an
annotation on its top-level metadata, with a one-line reason:

    metadata:
      annotations:
        checkov.io/skip1: CKV_K8S_16=the installer loads kernel modules (DOCA-OFED, gdrdrv) on the host

A suppression without a reason fails the gate too. Exit 1 on any problem, 2 when checkov itself fails.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NO_REASON = ("", "no comment provided")


@dataclass(frozen=True)
class Finding:
    check: str
    title: str
    resource: str
    file: str
    reason: str = ""

    def __str__(self) -> str:
        return f"{self.file}: {self.resource}: {self.check} {self.title}"


def resource_name(resource: str) -> str:
    """checkov names a Job `Job.<namespace>.<name>` and a Pod of it by its labels too: keep kind.namespace.name."""
    return ".".join(resource.split(".")[:3])


def findings(report: Any) -> tuple[list[Finding], list[Finding], dict[str, int]]:
    """(failed, suppressed, summary) from checkov's JSON report (one run or a list of runs)."""
    runs = report if isinstance(report, list) else [report]
    failed, skipped, summary = [], [], {"passed": 0, "failed": 0, "skipped": 0, "resources": 0}
    for run in runs:
        if run.get("check_type", "kubernetes") != "kubernetes":
            continue
        s = run.get("summary", {})
        for key in ("passed", "failed", "skipped"):
            summary[key] += int(s.get(key, 0))
        summary["resources"] += int(s.get("resource_count", 0))
        results = run.get("results", {})
        for kind, into in (("failed_checks", failed), ("skipped_checks", skipped)):
            for r in results.get(kind, []):
                reason = str((r.get("check_result") or {}).get("suppress_comment") or "").strip()
                into.append(
                    Finding(
                        r["check_id"],
                        r.get("check_name", ""),
                        resource_name(r.get("resource", "?")),
                        str(r.get("file_path", "?")).lstrip("/"),
                        reason,
                    )
                )
    return failed, skipped, summary


def scan(checkov: str, folder: Path) -> Any:
    cmd = [checkov, "-d", str(folder), "--framework", "kubernetes", "-o", "json", "--skip-download"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"checkov exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    out = proc.stdout.strip()
    # With nothing failed and --quiet, checkov may print an empty report or its plain summary.
    if not out or not out.startswith(("{", "[")):
        return []
    return json.loads(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkov", default="checkov", help="checkov executable")
    ap.add_argument("plans", nargs="+", type=Path, help="plan folders (build/plan/STACK)")
    args = ap.parse_args(argv)
    bad = 0
    for plan in args.plans:
        folder = plan / "files" / "k8s"
        if not plan.is_dir():
            print(f"{plan}: no such plan folder")
            bad += 1
            continue
        if not any(folder.glob("*.yaml")):
            print(f"{plan.name}: no Kubernetes manifests to scan")
            continue
        try:
            failed, skipped, summary = findings(scan(args.checkov, folder))
        except (RuntimeError, json.JSONDecodeError) as err:
            print(f"{plan.name}: {err}")
            return 2
        unexplained = [f for f in skipped if f.reason.lower() in NO_REASON]
        print(
            f"{plan.name}: {summary['resources']} objects, {summary['passed']} checks passed, "
            f"{len(failed)} failed, {len(skipped)} suppressed ({len(unexplained)} without a reason)"
        )
        for f in skipped:
            print(f"  suppressed {f.resource} {f.check}: {f.reason or '(no reason)'}")
        for f in sorted(failed, key=lambda f: (f.file, f.check)):
            print(f"  FAILED {f}")
        for f in unexplained:
            print(f"  NO REASON {f}: write `checkov.io/skipN: {f.check}=<why>` on the object")
        bad += len(failed) + len(unexplained)
    if bad:
        print(f"{bad} finding(s): fix each, or suppress it on its object with a one-line reason (see {__file__})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
