"""deepep-a4: A4 (B200) machines on Google Cloud with the DeepEP stack installed and benchmarked.

Thin on purpose: validate the stack's config before anything exists, then build the components of
the chosen platform and export what a user needs next.
"""

import importlib.util
from pathlib import Path

import pulumi
import pulumi_gcp as gcp
import yaml

# Another installed `components` or `scripts` package would win over ours; refuse it (docs/development.md).
for _name in ("components", "scripts"):
    _spec = importlib.util.find_spec(_name)
    _where = Path(_spec.origin).resolve().parent if _spec and _spec.origin else None
    if _where is None or _where.parent != Path(__file__).resolve().parent:
        raise pulumi.RunError(
            f"package {_name} is imported from {_where}, not from this project: uninstall the other one"
        )

from components import config  # noqa: E402
from components.deadline import stack_deadline  # noqa: E402
from components.gce.platform import build_gce_platform  # noqa: E402
from components.gke.platform import build_gke_platform  # noqa: E402
from components.network import A4Network, A4NetworkArgs  # noqa: E402
from components.node.manifest_gate import refuse_unpinned_up  # noqa: E402
from deepep_a4 import stackfile  # noqa: E402

# Pulumi reads a stack file into ProjectStack and drops any other top-level key (a `deepep-a4:ttl` written outside
# `config:`); the program reads its own file, where there is one, to refuse that (deepep_a4/stackfile.py).
_stack_file = stackfile.stack_file(pulumi.get_stack(), Path(__file__).absolute().parent)
# The engine merges Pulumi.yaml's defaults into the config it hands over (pkg/workspace/config.go mergeConfig):
# the keys the file writes are the ones the user wrote (docs/settings.md#what-the-program-receives).
_written: set[str] = set()
if _stack_file.is_file():
    _data = yaml.safe_load(_stack_file.read_text()) or {}
    _outside = stackfile.outside_config(_data, str(_stack_file)) if isinstance(_data, dict) else []
    if _outside:
        raise pulumi.RunError("; ".join(_outside))
    _config = _data.get("config") if isinstance(_data, dict) else None
    _written = set(stackfile.project_keys({str(k): "" for k in _config})) if isinstance(_config, dict) else set()

try:
    cfg = config.load(_written)
except config.ConfigError as err:
    # RunError prints the message alone: the user needs the keys, not a traceback.
    raise pulumi.RunError(str(err)) from None

# No paid machine without a store: a real `up` of a supported-profile stack with no pinned manifest stops
# here, before any resource; a preview and the offline plan only warn (components/node/manifest_gate.py).
refuse_unpinned_up(cfg)

# Fixed at the first `pulumi up`; after it, `pulumi up` is refused. Every gcp resource waits for that check
# through the provider, so a refused run changes nothing (components/deadline.py).
deadline = stack_deadline(cfg.ttl_seconds)
gcp_provider = gcp.Provider(
    "gcp",
    project=cfg.project,
    region=cfg.region,
    zone=cfg.zone,
    default_labels=cfg.labels,
    opts=pulumi.ResourceOptions(depends_on=[deadline.gate] if deadline else None),
)
gcp_opts = pulumi.ResourceOptions(providers=[gcp_provider])

network = A4Network("a4", A4NetworkArgs(cfg), gcp_opts)

if cfg.platform == "gke":
    platform_outputs = build_gke_platform(cfg, network, gcp_opts, deadline)
else:
    platform_outputs = build_gce_platform(cfg, network, gcp_opts, deadline)

pulumi.export("platform", cfg.platform)
pulumi.export("zone", cfg.zone)
pulumi.export("rdmaNetwork", network.rdma_network.name)
pulumi.export("rdmaSubnets", [s.name for s in network.rdma_subnets])
pulumi.export("deadline", deadline.at if deadline else None)
for key, value in platform_outputs.items():
    pulumi.export(key, value)
