"""No refusal advises a change that the next check refuses (issue 41): on a supported stack hcaPrefix,
useDocaOfed and gdrcopyKernelModule are host-install keys, so no line may tell the user to set them."""

from __future__ import annotations

import pytest

from components import config
from components.config.rules import HOST_INSTALL_KEYS
from deepep_a4 import stackfile
from deepep_a4.plan import engine as plan_engine

ROOT = plan_engine.ROOT


def problems(stack: str, **overrides: str) -> list[str]:
    written = stackfile.read(stack, ROOT)
    written.update({f"deepep-a4:{k}": v for k, v in overrides.items()})
    merged = stackfile.merged(written, ROOT)
    with pytest.raises(config.ConfigError) as err:
        config.parse(stackfile.project_keys(merged), stack, written=set(stackfile.project_keys(written)))
    return [str(p) for p in err.value.problems]


@pytest.mark.parametrize(
    "overrides",
    [{"nvshmemVersion": "3.3.24"}, {"nicHandler": "cpu"}, {"hcaPrefix": "mlx5"}, {"useDocaOfed": "true"}],
)
@pytest.mark.parametrize("stack", ["gke-b200", "gce-b200"])
def test_supported_stacks_get_no_advice_to_set_a_host_install_key(stack: str, overrides: dict[str, str]) -> None:
    lines = problems(stack, **overrides)
    for line in lines:
        advice = line.split(":", 1)[1]
        for key in HOST_INSTALL_KEYS:
            assert f"set {key}" not in advice and f"{key}=" not in advice.replace("nodeProfile=", ""), line
