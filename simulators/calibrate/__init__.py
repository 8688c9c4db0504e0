"""Calibrate the simulator world to a real model, and predict each method's gain in it.

``gdro calibrate`` fits a world (``simulators.world.WorldConfig``) to what a real model did: its
per-prompt successes on a sample of its training set (``gdro eval --save-samples``) give the
initial difficulty distribution and the group structure (:mod:`.difficulty`); a short plain-GRPO
learning-rate sweep (``gdro train`` run directories) gives the learning speed, the price of a
step, the score noise and the transfer (:mod:`.dynamics`, fitted by simulation with
:mod:`.fastsim`). ``gdro predict`` (:mod:`.predict`) runs the methods in the fitted world, drawing
its parameters from the fit's uncertainty. Real outputs are read through the run format
(``gdro_lab.runformat.runlog``) and the samples file (plain JSON lines) only: nothing here imports
``real_runs``.
"""
