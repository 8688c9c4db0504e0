"""What every study of the project shares, outside the core: the paper's claims and how a number is
judged against them (:mod:`~studykit.claims`, :mod:`~studykit.claim_measures`), intervals over seeds
(:mod:`~studykit.stats`), report tables (:mod:`~studykit.tables`), learning-rate grids of tuned
baselines (:mod:`~studykit.lrgrid`), step matching (:mod:`~studykit.stepmatch`) and figure helpers
(:mod:`~studykit.plots`, the one module here that imports matplotlib).

The simulator's studies (simulators/) and the CPU LM study (real_runs/lmstudy/) both import it, and
never each other; studykit imports the core (gdro_lab) and nothing else of the project.
"""
