"""The controllers a method wires together, each ``cls(config, seed)`` with ``state_dict`` / ``load_state_dict``.

Classifiers, weighters, allocators and selectors, the registry that builds them by family and name
(:mod:`~gdro_lab.controllers.registry`), the one feedback record they all take
(:mod:`~gdro_lab.controllers.feedback`) and the per-prompt state they share. The modules:
docs/core-controllers-notes.md#gdro_lab-controllers.
"""
