"""The example launch scripts' overrides compose with verl 0.9.1's config schema and pass our checks."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

pytest.importorskip("verl.protocol", reason="verl is not installed (the plugin's own venv runs these)")
from real_runs.verl.main import check_launch_config  # noqa: E402
from real_runs.verl.trainer import controller_from_config  # noqa: E402
from verl_helpers import CONFIG_DIR, compose_config  # noqa: E402

VARS = {"DATA": "/data", "MODEL": "/model", "CKPT": "/ckpt", "RUN_DIR": "/nonexistent/gdro_run", "REWARD": "/reward.py",
        "NNODES": "4"}


def overrides(script: Path) -> list[str]:
    """The hydra overrides a launch script passes (shell variables replaced by placeholders)."""
    text = script.read_text().replace("\\\n", " ")
    line = next(l for l in text.splitlines() if "real_runs.verl.main" in l or "one_node_8gpu.sh" in l)
    line = re.sub(r"\$\{?(\w+)\}?", lambda m: VARS.get(m.group(1), m.group(0)), line)
    args = shlex.split(line)
    start = next(i for i, a in enumerate(args) if a.endswith(("real_runs.verl.main", "one_node_8gpu.sh"))) + 1
    return [a for a in args[start:] if "=" in a]


@pytest.mark.parametrize("name", ["one_node_8gpu.sh", "multi_node.sh"])
def test_launch_script_overrides_compose(name):
    args = overrides(CONFIG_DIR / name)
    assert len(args) > 8
    if name == "multi_node.sh":
        args = overrides(CONFIG_DIR / "one_node_8gpu.sh") + args
    cfg = compose_config(args)  # hydra raises on any key verl 0.9.1 does not have
    check_launch_config(cfg)
    controller = controller_from_config(cfg)
    assert controller.n_bar == cfg.actor_rollout_ref.rollout.n == 4
    assert cfg.trainer.nnodes == (4 if name == "multi_node.sh" else 1)
