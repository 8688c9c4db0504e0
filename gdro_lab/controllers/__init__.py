"""The controllers a method wires together, each ``cls(config, seed)`` with ``state_dict`` / ``load_state_dict``.

Difficulty classifiers (:mod:`~gdro_lab.controllers.difficulty`), Prompt-GDRO and the other weighters
(:mod:`~gdro_lab.controllers.prompt_gdro`), Rollout-GDRO and the other allocators
(:mod:`~gdro_lab.controllers.rollout_gdro`, :mod:`~gdro_lab.controllers.allocators`,
:mod:`~gdro_lab.controllers.peer_allocators`, :mod:`~gdro_lab.controllers.prompt_rollout_gdro`), prompt
selectors (:mod:`~gdro_lab.controllers.selection`), the registry that builds them by family and name
(:mod:`~gdro_lab.controllers.registry`), the one feedback record they all take
(:mod:`~gdro_lab.controllers.feedback`) and the per-prompt state they share
(:mod:`~gdro_lab.controllers.prompts`, :mod:`~gdro_lab.controllers.prompt_stats`).
"""
