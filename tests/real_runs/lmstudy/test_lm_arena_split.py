"""The LM arena's held-out halves: disjoint, together the whole held-out split, alternating within
each skill in drawn order, each half its own benchmark per skill (the trainer groups by source)."""

from __future__ import annotations

from real_runs.lmstudy import learning_study, lm_arena, tasks


def test_val_and_test_halves_alternate_within_each_skill() -> None:
    cfg = learning_study.QUICK
    records = lm_arena.eval_records(cfg)
    heldout = tasks.heldout_split(cfg.task_config())
    skills = sorted({p.source for p in heldout})
    assert sorted(records) == sorted(f"{s}/{half}" for s in skills for half in ("val", "test"))
    assert lm_arena.skills(cfg) == skills
    for skill in skills:
        drawn = [p.id for p in heldout if p.source == skill]  # by hand: even positions val, odd test
        assert [p.id for p in records[f"{skill}/val"]] == drawn[0::2]
        assert [p.id for p in records[f"{skill}/test"]] == drawn[1::2]
        assert all(p.source == f"{skill}/val" for p in records[f"{skill}/val"])
    val = {p.id for name, ps in records.items() if name.endswith("/val") for p in ps}
    test = {p.id for name, ps in records.items() if name.endswith("/test") for p in ps}
    assert not val & test and val | test == {p.id for p in heldout}
