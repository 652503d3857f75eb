"""`deepep-a4 run --help`: what it bills, what it needs first and its exit statuses (issue 41)."""

from __future__ import annotations

# `deepep-a4 run`'s exit statuses (deepep_a4/run/command.py returns them).
EXIT_PASS, EXIT_GATE_FAILED, EXIT_USAGE, EXIT_NO_CLI, EXIT_FAILED, EXIT_DESTROY_FAILED, EXIT_INTERRUPTED = (
    0,
    1,
    2,
    3,
    4,
    5,
    130,
)


def run_help(summary: str) -> str:
    return f"""{summary}

It creates billed A4 machines (a4-highgpu-8g, 8 B200 GPUs each; spot by default) in your Google Cloud project,
and for GKE stacks a cluster; it destroys the stack at the end unless --keep. `deepep-a4 plan` and `deepep-a4
cost` show what it would create and bill, offline.

\b
It needs first:
  - the Pulumi CLI 3.208 or newer, logged in: `pulumi login --local`, `pulumi login gs://BUCKET`,
    or PULUMI_ACCESS_TOKEN for Pulumi Cloud;
  - on a local or gs:// backend the stack's passphrase: PULUMI_CONFIG_PASSPHRASE_FILE
    (or PULUMI_CONFIG_PASSPHRASE);
  - Google Application Default Credentials: `gcloud auth application-default login`;
  - gke-gcloud-auth-plugin on PATH for GKE stacks.

\b
Exit status: {EXIT_PASS} the report's gate passed, {EXIT_GATE_FAILED} it failed (or a benchmark failed),
{EXIT_USAGE} bad arguments or config (nothing created), {EXIT_NO_CLI} the Pulumi CLI missing, too old or not
logged in, or the auth plugin missing, {EXIT_FAILED} the stack did not come up, its preview failed or a wait
timed out, {EXIT_DESTROY_FAILED} the destroy failed, {EXIT_INTERRUPTED} interrupted."""
