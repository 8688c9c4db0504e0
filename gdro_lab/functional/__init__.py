"""The shared math as pure functions (no state, no RNG), as in ``torch.nn.functional``.

Every update rule of the two controllers, one function per equation
(:mod:`~gdro_lab.functional.update_rules`), pass@k and difficulty estimators
(:mod:`~gdro_lab.functional.estimators`), ragged GRPO advantages (:mod:`~gdro_lab.functional.grpo`) and
the paper's diagnostics (:mod:`~gdro_lab.functional.diagnostics`). Named ``functional`` rather than ``math`` so that it never
reads as the standard library's module.
"""
