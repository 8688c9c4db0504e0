"""GDRO on verl as a plugin: difficulty bins, Prompt-GDRO and Rollout-GDRO inside verl's PPO loop.

Importing verl, never copying its files or changing them on disk (tested against verl 0.9.1, the ``verl``
extra). Modules:

- :mod:`real_runs.verl.batch`: pure functions on ``DataProto`` (stable ids, per-prompt expansion,
  ragged layout, advantage scaling, :class:`gdro_lab.StepFeedback` from a batch);
- :mod:`real_runs.verl.controller`: :class:`GDROController`, the classifier, weighter and allocator
  of one run plus its run directory, driven once per step;
- :mod:`real_runs.verl.state`: controller state in verl checkpoints (``global_step_N/gdro_ctrl.json``),
  the checkpoint a launch resumes, and the one-writer lock on the run directory;
- :mod:`real_runs.verl.trainer`: ``GDRORayPPOTrainer(RayPPOTrainer)``;
- :mod:`real_runs.verl.convert`: our data loaders to verl's parquet layout;
- :mod:`real_runs.verl.reward`: ``compute_score`` for verl's reward manager (and the smoke's
  ``known_odds_score`` toy reward);
- :mod:`real_runs.verl.runner`: what a launch runs: the pre-launch checks (they build the controllers
  and check the run directory before Ray starts) and verl's task runner building the GDRO trainer;
- :mod:`real_runs.verl.main`: the launcher, ``python -m real_runs.verl.main`` (arguments only: hydra);
- :mod:`real_runs.verl.cpu`: for tests and laptops only, never imported by the above: verl's
  ``fit`` on CPU (``python -m real_runs.verl.cpu``), closing verl 0.9.1's CPU gaps at run time;
- :mod:`real_runs.verl.smoke`: the smoke run's tiny model, toy data and checks, shared by
  ``scripts/verl_smoke.sh`` and the CPU ``fit`` test;
- :mod:`real_runs.verl.paper_settings`: the paper's runs as a table (setting, value, source) that the
  launch scripts ``configs/paper_*.sh`` are tested against (docs/launch.md).
"""


class VerlPluginError(ValueError):
    """Bad input to the verl plugin; the message names the problem and the fix in one line."""
