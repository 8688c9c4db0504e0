"""The run format: the one on-disk run directory every producer writes and every reader reads
(:mod:`~gdro_lab.runformat.runlog`), and the per-step record the simulator, ``gdro train`` and the verl
plugin all log (:mod:`~gdro_lab.runformat.record`). Specified in docs/run-format.md.
"""
