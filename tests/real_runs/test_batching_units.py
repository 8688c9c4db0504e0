"""real_runs.batching pieces that mutation testing (scripts/mutation.sh) found unpinned: the data
order's shuffle and resume across epochs, exact-fit micro-batch packing, the rollout batch's
fields, entropy defaults and gradients, the phase timer and the peak-memory figure."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from real_runs.batching import DataOrder, RolloutBatch, Timer, micro_batches, peak_memory_gb, response_logprobs  # noqa: E402
from real_runs.models import load_policy  # noqa: E402
from real_runs.types import Rollouts  # noqa: E402


def test_data_order_shuffles_each_epoch_and_not_without_shuffle():
    order = DataOrder(20, seed=5, shuffle=True)
    first, second = order.take(20), order.take(20)
    assert sorted(first.tolist()) == sorted(second.tolist()) == list(range(20))
    assert first.tolist() != list(range(20)) and first.tolist() != second.tolist()
    np.testing.assert_array_equal(first, np.random.default_rng([5, 0]).permutation(20))
    assert first.dtype == np.int64
    plain = DataOrder(6, seed=5, shuffle=False)
    assert plain.take(9).tolist() == [0, 1, 2, 3, 4, 5, 0, 1, 2]


def test_data_order_resumed_in_a_later_epoch_continues_exactly():
    whole = DataOrder(10, seed=3, shuffle=True).take(35)
    resumed = DataOrder(10, seed=3, shuffle=True)
    resumed.load_state_dict({"position": 12, "size": 10})
    np.testing.assert_array_equal(resumed.take(23), whole[12:])
    assert resumed.state_dict() == {"position": 35, "size": 10}


def test_micro_batches_pack_greedily_longest_first_up_to_an_exact_fit():
    assert [b.tolist() for b in micro_batches(np.array([5, 5, 5, 5]), 20)] == [[0, 1, 2, 3]]     # 4 x 5 = 20 fits
    assert [b.tolist() for b in micro_batches(np.array([5, 5, 5, 5]), 19)] == [[0, 1, 2], [3]]
    batches = micro_batches(np.array([2, 9, 4, 9, 1]), 18)
    assert [b.tolist() for b in batches] == [[1, 3], [2, 0, 4]]              # longest first; 9 x 2, 4 x 3


def _rollouts(tokens: list[list[int]]) -> Rollouts:
    return Rollouts(np.array([1] * len(tokens)), [[7, 8, 9][: 1 + i % 3] for i in range(len(tokens))], tokens,
                    [np.zeros(len(t), np.float32) for t in tokens], [""] * len(tokens), ["stop"] * len(tokens))


def test_rollout_batch_keeps_the_tokens_and_pads_only_an_empty_response():
    tokens = [[11, 12, 13], [], [14]]
    batch = RolloutBatch.from_rollouts(_rollouts(tokens), np.array([1.0, -1.0, 0.5]), pad_id=3)
    assert batch.responses == [[11, 12, 13], [3], [14]]
    assert batch.real_lengths.tolist() == [3, 0, 1]
    assert batch.lengths.tolist() == [1 + 3, 2 + 1, 3 + 1]                   # prompt + response tokens
    assert batch.advantages.tolist() == [1.0, -1.0, 0.5]


def test_entropy_is_returned_only_when_asked_and_carries_a_gradient_only_when_asked():
    torch.set_num_threads(1)
    model, _ = load_policy("tiny", seed=0)
    batch = RolloutBatch.from_rollouts(_rollouts([[11, 12], [13]]), np.zeros(2), pad_id=0)
    rows = np.arange(2)
    assert response_logprobs(model, batch.prompts, batch.responses, 0, torch.device("cpu"))[2] is None
    assert batch.forward(model, rows)[2] is None
    with torch.enable_grad():
        metric = batch.forward(model, rows, with_entropy=True)[2]
        bonus = batch.forward(model, rows, with_entropy=True, entropy_grad=True)[2]
    assert metric is not None and not metric.requires_grad
    assert bonus is not None and bonus.requires_grad
    torch.testing.assert_close(metric, bonus.detach())
    with torch.no_grad():
        probs = torch.softmax(model(torch.tensor([batch.prompts[1] + batch.responses[1]])).logits[0, -2].double(), -1)
    assert float(metric[1, 0]) == pytest.approx(float(-(probs * probs.log()).sum()), rel=1e-4)


def test_timer_accumulates_seconds_per_phase():
    """Two naps of 0.05 s: at least 0.1 s, at most the wall time around them (no fixed upper limit: a loaded
    machine only makes both larger)."""
    timer = Timer(torch.device("cpu"))
    started = time.perf_counter()
    for _ in range(2):
        with timer("nap"):
            time.sleep(0.05)
    wall = time.perf_counter() - started
    assert set(timer.seconds) == {"time/nap"} and 0.1 <= timer.seconds["time/nap"] <= wall


def test_peak_memory_on_cpu_is_the_peak_resident_set_in_gib():
    """Against Linux's own figure: VmHWM (peak resident set, kB) of /proc/self/status."""
    status = Path("/proc/self/status")
    if not status.exists():
        pytest.skip("needs Linux /proc")
    peak = peak_memory_gb(torch.device("cpu"))
    line = next(x for x in status.read_text().splitlines() if x.startswith("VmHWM:"))
    assert peak == pytest.approx(int(line.split()[1]) / 2**20, rel=0.05)


def test_peak_memory_on_cuda_is_the_allocators_peak_in_gib(monkeypatch: pytest.MonkeyPatch):
    """The CUDA branch without a GPU: torch.cuda.max_memory_allocated faked to 3 GiB for our device."""
    from types import SimpleNamespace

    device = SimpleNamespace(type="cuda")
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda d: 3 * 2**30 if d is device else -1)
    assert peak_memory_gb(device) == 3.0  # type: ignore[arg-type]
