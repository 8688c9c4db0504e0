"""real_runs.verl.cpu without Ray: the sampler, the HF server's weights and outputs, the registrations,
and that nothing of it leaks into a GPU launch (the plugin never imports it)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("verl.protocol", reason="verl is not installed (the plugin's own venv runs these)")
import torch  # noqa: E402

from real_runs.verl import cpu, smoke  # noqa: E402
from real_runs.verl import cpu_rollout as rollout  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("temperature", [0.5, 1.5])
def test_draw_follows_softmax_of_logits_over_temperature(temperature):
    logits = torch.tensor([2.0, 0.5, -1.0, 0.0], dtype=torch.float64)
    generator = torch.Generator().manual_seed(0)
    draws = [rollout._draw(logits, temperature, 1.0, -1, generator) for _ in range(6000)]
    want = torch.softmax(logits / temperature, -1).numpy()
    freq = np.bincount([t for t, _ in draws], minlength=4) / len(draws)
    assert np.abs(freq - want).max() < 0.02  # ~4 standard errors at n = 6000
    for token, logprob in draws[:20]:
        assert logprob == pytest.approx(float(np.log(want[token])), abs=1e-12)


def test_draw_greedy_top_k_and_top_p():
    logits = torch.tensor([0.1, 3.0, 2.9, -5.0], dtype=torch.float64)
    generator = torch.Generator().manual_seed(1)
    assert rollout._draw(logits, 0.0, 1.0, -1, generator)[0] == 1
    assert {rollout._draw(logits, 1.0, 1.0, 2, generator)[0] for _ in range(200)} == {1, 2}
    probs = torch.softmax(logits, -1)  # top-p 0.6 keeps the smallest set with mass >= 0.6: tokens 1 and 2
    assert probs[1] < 0.6 < probs[1] + probs[2]
    token, logprob = rollout._draw(logits, 1.0, 0.6, -1, generator)
    assert token in (1, 2) and logprob == pytest.approx(float(torch.log(probs[token] / (probs[1] + probs[2]))))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from omegaconf import OmegaConf

    out = tmp_path_factory.mktemp("hf_cpu")
    model_dir = smoke.prepare(out)
    config = OmegaConf.create({"seed": 7, "response_length": 6})
    return rollout.HFCPUServer(config, OmegaConf.create({"path": str(model_dir)}), 0)


def test_server_samples_with_the_models_log_probs_and_is_seeded_per_request(server):
    prompt = [5, 9, 13, 21]
    params = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "logprobs": True}
    first = asyncio.run(server.generate(prompt, params, "det-3"))
    again = asyncio.run(server.generate(prompt, params, "det-3"))
    other = asyncio.run(server.generate(prompt, params, "det-4"))
    assert first.token_ids == again.token_ids and len(first.token_ids) <= 6
    assert first.token_ids != other.token_ids or first.log_probs != other.log_probs
    with torch.no_grad():  # teacher-forced log-probs of the sampled tokens under the served model
        ids = torch.tensor([prompt + first.token_ids])
        logp = torch.log_softmax(server.model(ids).logits[0].double(), -1)
    want = [float(logp[len(prompt) - 1 + i, t]) for i, t in enumerate(first.token_ids)]
    np.testing.assert_allclose(first.log_probs, want, rtol=1e-4, atol=1e-4)
    assert first.extra_fields["global_steps"] == server.version


def test_update_weights_changes_what_is_served(server):
    prompt, params = [5, 9, 13, 21], {"temperature": 0.0, "logprobs": True}
    state = {k: v.clone() for k, v in server.model.state_dict().items()}
    before = asyncio.run(server.generate(prompt, params, "det-0"))
    moved = {k: v + 0.5 * torch.randn_like(v) if v.is_floating_point() else v for k, v in state.items()}
    assert asyncio.run(server.update_weights(moved, 7)) == len(state)
    after = asyncio.run(server.generate(prompt, params, "det-0"))
    assert server.version == 7 and after.extra_fields["global_steps"] == 7
    assert after.log_probs != before.log_probs
    with pytest.raises(ValueError, match="is not in the rollout model"):
        asyncio.run(server.update_weights({"bogus.weight": torch.zeros(1)}, 8))
    partial = {k: v for k, v in state.items() if "layers.0." not in k}
    with pytest.raises(ValueError, match="the weight sync is incomplete"):
        asyncio.run(server.update_weights(partial, 8))
    asyncio.run(server.update_weights(state, 0))
    assert asyncio.run(server.generate(prompt, params, "det-0")).token_ids == before.token_ids


def _python(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600,
                            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.strip().splitlines()[-1]


def test_install_closes_the_five_gaps_in_this_process_only():
    code = """
import torch.distributed as dist
from real_runs.verl import cpu
cpu.install(); cpu.install()  # idempotent
from verl.plugin.platform import get_platform
from verl.workers.engine.base import EngineRegistry
from verl.workers.rollout.base import get_rollout_class
from verl.workers.rollout.replica import RolloutReplicaRegistry
import verl.utils.distributed as D, verl.workers.engine_workers as W
import os
p = get_platform()
assert (p.device_name, p.communication_backend_name(), p.ray_resource_name()) == ("cpu", "gloo", "GPU"), p
assert EngineRegistry.get_engine_cls("language_model", "fsdp2").__name__ == "FSDPEngineWithLMHead"
from real_runs.verl import cpu_rollout
assert get_rollout_class("hf_cpu") is cpu_rollout.HFCPUServerAdapter
assert RolloutReplicaRegistry.get("hf_cpu") is cpu_rollout.HFCPUReplica
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29631")
W.initialize_global_process_group_ray()  # verl's own call, now on gloo
assert dist.get_backend() in ("gloo", "cpu:gloo"), dist.get_backend()
assert D.initialize_global_process_group_ray is W.initialize_global_process_group_ray
print("ok")
"""
    assert _python(code) == "ok"


def test_a_gpu_launch_never_sees_the_cpu_adaptation():
    code = """
import sys
import real_runs.verl.main, real_runs.verl.runner, real_runs.verl.trainer, real_runs.verl.controller  # what a GPU launch imports
from verl.plugin.platform import get_platform
from verl.workers.rollout.replica import RolloutReplicaRegistry
from verl.workers.engine.base import EngineRegistry
assert "real_runs.verl.cpu" not in sys.modules and "real_runs.verl.cpu_rollout" not in sys.modules
assert "hf_cpu" not in RolloutReplicaRegistry._registry
assert "cpu" not in EngineRegistry._engines["language_model"]["fsdp2"]
assert get_platform().device_name == "cuda"  # verl's own fallback on a machine without GPUs
print("ok")
"""
    assert _python(code) == "ok"


def test_cpu_overrides_compose_with_the_smoke_settings(tmp_path):
    config = cpu.compose([*cpu.cpu_overrides(2), *smoke.overrides(tmp_path, 4, ranks=2)])
    rollout = config.actor_rollout_ref.rollout
    assert (rollout.name, rollout.tensor_model_parallel_size, rollout.n) == ("hf_cpu", 2, smoke.N_BAR)
    assert config.trainer.n_gpus_per_node == 2 and config.actor_rollout_ref.actor.strategy == "fsdp2"
    assert config.actor_rollout_ref.model.override_config.attn_implementation == "sdpa"
    assert config.reward.custom_reward_function.name == "known_odds_score"


def test_known_odds_reward_succeeds_at_the_prompts_fixed_rate():
    from real_runs.verl.reward import KNOWN_ODDS, known_odds, known_odds_score

    assert [known_odds(f"toy:train:{row}") for row in range(6)] == [*KNOWN_ODDS, *KNOWN_ODDS]
    assert known_odds("no-row-id") in KNOWN_ODDS
    for row in range(3):
        pid = f"toy:train:{row}"
        results = [known_odds_score("toy", f"response {k}", "1", {"index": pid}) for k in range(4000)]
        rate = np.mean([r["acc"] for r in results])
        assert abs(rate - KNOWN_ODDS[row]) < 0.03  # > 4 standard errors
        assert all(r["score"] == (1.0 if r["acc"] else -1.0) for r in results)
        assert known_odds_score("toy", "same", "1", {"index": pid}) == known_odds_score("toy", "same", "1", {"index": pid})
