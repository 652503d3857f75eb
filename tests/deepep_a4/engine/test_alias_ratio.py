"""A stack file's YAML aliases are expanded no further than the Pulumi CLI's yaml.v3 expands them
(deepep_a4/engine/alias_ratio.py cites decode.go): a billion-laughs file is refused in one line before anything
walks it; ordinary aliases still read as the CLI reads them."""

from __future__ import annotations

import time

import pytest
import yaml

from deepep_a4 import stackfile
from deepep_a4.engine import alias_ratio as aliases


def bomb(levels: int = 9, width: int = 9) -> str:
    lines = ["config:", "  deepep-a4:a: &a [" + ",".join(["lol"] * width) + "]"]
    prev = "a"
    for name in "bcdefghijklmnop"[: levels - 1]:
        lines.append(f"  deepep-a4:{name}: &{name} [" + ",".join([f"*{prev}"] * width) + "]")
        prev = name
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_in_one_line_before_it_expands() -> None:
    text = bomb()
    assert len(text.encode()) < 500  # 9 levels of 9: 9**9 = 387 million strings once expanded
    t0 = time.monotonic()
    with pytest.raises(stackfile.StackFileError) as err:
        stackfile.parse_text(text, "stacks/Pulumi.mine.yaml")
    assert time.monotonic() - t0 < 2
    (line,) = err.value.problems
    assert line.startswith("stacks/Pulumi.mine.yaml: excessive aliasing") and "yaml.v3" in line


def test_ordinary_aliases_read_as_the_cli_reads_them() -> None:
    text = "config:\n  deepep-a4:benchmarks: &b [intranode, internode]\n  deepep-a4:other: *b\n"
    got = stackfile.parse_text(text, "x")
    # A list reaches the program as Go's json.Marshal writes it: no spaces (deepep_a4/engine/config_pipeline.py).
    assert got == {
        "deepep-a4:benchmarks": '["intranode","internode"]',
        "deepep-a4:other": '["intranode","internode"]',
    }


def test_a_small_expansion_passes_as_in_yaml_v3() -> None:
    """yaml.v3 fails only past 100 aliased and 1000 decoded values: 3 levels of 9 (729 strings, about 930
    decodes in all) reads."""
    assert aliases.check_aliasing(yaml.compose(bomb(levels=3))) < 1000
    assert stackfile.parse_text(bomb(levels=3), "x")["deepep-a4:c"].count("lol") == 729


@pytest.mark.parametrize(
    ("decodes", "ratio"), [(0, 0.99), (400_000, 0.99), (2_200_000, 0.545), (4_000_000, 0.10), (9_000_000, 0.10)]
)
def test_the_allowed_ratio_is_yaml_v3s(decodes: int, ratio: float) -> None:
    assert aliases.allowed_alias_ratio(decodes) == pytest.approx(ratio)
