"""The simulator's batches by value: an epoch is a shuffle of every prompt, cut into batches; when the prompts
divide into whole batches, every prompt is trained once per epoch, the last batch included (a sampled
mutant that starts the next epoch one batch early survived the world's tests)."""

from __future__ import annotations

import numpy as np

from simulators.world import BatchSampler


def test_whole_batches_cover_every_prompt_once_per_epoch():
    sampler = BatchSampler(6, 3, np.random.default_rng(0))
    for epoch in range(3):
        first, second = sampler.next(), sampler.next()
        assert sorted(np.r_[first, second].tolist()) == list(range(6)) and sampler.epoch == epoch


def test_the_partial_last_batch_is_dropped():
    sampler = BatchSampler(7, 3, np.random.default_rng(0))
    seen = np.r_[sampler.next(), sampler.next()]
    assert len(set(seen.tolist())) == 6 and sampler.epoch == 0
    sampler.next()                                   # one prompt left: a new epoch
    assert sampler.epoch == 1
