"""gdro-lab core: online difficulty bins, Prompt-GDRO, Rollout-GDRO, ragged GRPO, diagnostics.

numpy/scipy only; never imports torch or streamlit. See docs/core.md and docs/run-format.md for the contracts.
"""

from gdro_lab._validate import ConfigError
from gdro_lab.allocation.planner.exact import exact_plan
from gdro_lab.controllers.allocators import AllocatorConfig, SqrtAllocator, UniformAllocator
from gdro_lab.controllers.difficulty import BayesDifficultyClassifier, ClassifierConfig, DifficultyClassifier
from gdro_lab.controllers.feedback import StepFeedback
from gdro_lab.controllers.prompt_gdro import PromptGDRO, UniformWeighter, WeighterConfig
from gdro_lab.controllers.prompts import PromptIndex
from gdro_lab.controllers.registry import REGISTRY, build, make_config
from gdro_lab.controllers.rollout_gdro import RolloutGDRO
from gdro_lab.functional.update_rules import log_sum_exp_surrogate
from gdro_lab.methods import METHODS, MethodSpec
from gdro_lab.runformat.runlog import RunData, RunFormatError, RunWriter, read_run
from gdro_lab.step import BudgetError, MethodStep

__version__ = "0.1.0"

__all__ = [
    "AllocatorConfig", "BayesDifficultyClassifier", "BudgetError", "ClassifierConfig", "ConfigError",
    "DifficultyClassifier", "METHODS", "MethodSpec", "MethodStep", "PromptGDRO", "PromptIndex", "REGISTRY",
    "RolloutGDRO", "RunData", "RunFormatError", "RunWriter", "SqrtAllocator", "StepFeedback", "UniformAllocator",
    "UniformWeighter", "WeighterConfig", "build", "exact_plan", "log_sum_exp_surrogate", "make_config", "read_run",
]
