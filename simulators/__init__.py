"""gdro-lab simulator: a heavy-tailed bandit world and the toy studies run on it.

The world (``simulators.world``) is numpy only; the training loop (``simulators.loop``) drives the
``gdro_lab`` controllers through their registry, never a copy. Studies live in
``simulators.studies``; ``gdro simulate`` dispatches to ``simulators.cli.main``.
"""
