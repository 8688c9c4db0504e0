"""The paper's runs on verl as one table: each setting, its value and its source.

Sources: the paper's App. A, the released scripts, or ``ours`` with a reason; departures from either
are listed in :data:`DEPARTURES`. ``tests/real_runs/verl/test_launch_scripts.py`` asserts every row
against the composed launch scripts and the presets; ``docs/launch.md`` prints the table
(:func:`markdown_table`). No verl import here. Detail: docs/verl-notes.md#real_runs-verl-paper_settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PAPER = "paper App. A"
RELEASED = "released scripts"
RELEASED_P = "released run_groupdro.sh"
RELEASED_R = "released run_rollout_groupdro.sh"

PROMPT, ROLLOUT = "prompt_gdro", "rollout_gdro"
METHODS = (PROMPT, ROLLOUT)
MODEL_SIZES = {"1.7b": "Qwen/Qwen3-1.7B-Base", "4b": "Qwen/Qwen3-4B-Base", "8b": "Qwen/Qwen3-8B-Base"}
VAL_SETS = ("aime24", "aime25", "amc23", "math500", "minerva", "olympiadbench", "gpqa")
TEN_BINS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
#: The released scripts' other classifiers (``BINS=6`` / ``BINS=3`` in paper_run.sh): edges, window H per
#: method, exclude_extremes, and the classes the controllers then see.
CLASSIFIER_OPTIONS: dict[str, dict[str, Any]] = {
    "10": {"edges": TEN_BINS, "window": {PROMPT: 50, ROLLOUT: 50}, "exclude_extremes": False, "num_bins": 10},
    # "6 bins" in the released scripts' names, but 6 inner edges make 7 bins (its code: len(edges) + 1)
    "6": {"edges": (0.1, 0.2, 0.4, 0.6, 0.8, 0.9), "window": {PROMPT: 100, ROLLOUT: 50}, "exclude_extremes": False,
          "num_bins": 7},
    "3": {"edges": (0.4, 0.75), "window": {PROMPT: 50, ROLLOUT: 50}, "exclude_extremes": True, "num_bins": 4},
}
#: Prompt-GDRO's two schedules (``PROMPT_SCHEDULE`` in paper_run.sh): (prompts per step, steps).
PROMPT_SCHEDULES = {"paper": (256, 1000), "released": (512, 500)}


@dataclass(frozen=True)
class Setting:
    """One row: ``key`` in the composed verl config (``derived.*``: computed, see the test) has ``value``."""

    what: str
    key: str
    value: Any
    source: str
    method: str | None = None
    """prompt_gdro or rollout_gdro when the row is one method's; None = both."""
    preset: str | None = None
    """The same setting in gdro train's paper presets: a TrainConfig path (``loss.kl_coef``) or a controller
    config field (``classifier.window``, ``weighter.eta``, ``allocator.dual_lr``) under this row's method."""
    preset_value: Any = None
    """The preset's value when it is spelt differently or differs (then the note says why); None = ``value``."""
    note: str = ""
    paper: Any = None
    """App. A's value where this row departs from it; None = the row follows the paper or the paper is silent."""
    departure: str = ""
    """The title of this row's entry in :data:`DEPARTURES` (required when ``paper`` is set)."""


S = Setting
KEEP_PEAK = "ours: the paper reports each run's peak checkpoint"
VAL_N_DEPARTURE = "Prompt-GDRO validates with 16 samples per prompt, not App. A's 8"
SETTINGS: tuple[Setting, ...] = (
    # ---- model and data
    S("policy and reference model", "derived.model_size", "Qwen3-1.7B/4B/8B-Base", PAPER, preset="model.name",
      note="one script per size (MODEL_SIZE)"),
    S("gradient checkpointing", "actor_rollout_ref.model.enable_gradient_checkpointing", True, RELEASED,
      preset="model.gradient_checkpointing"),
    S("training data", "derived.train_set", "dapo", PAPER, preset="data.train",
      note="DAPO-Math-17k, English rows (data preparation: docs/install.md)"),
    S("validation sets (pooled)", "derived.val_sets", VAL_SETS, PAPER, preset="eval.benchmarks",
      note="AIME24, AIME25, AMC23, MATH-500, Minerva, OlympiadBench, GPQA-Diamond"),
    S("max prompt length", "data.max_prompt_length", 3200, RELEASED, preset="rollout.max_prompt_tokens"),
    S("max response length", "data.max_response_length", 4096, RELEASED, preset="rollout.max_new_tokens"),
    # ---- schedule
    S("prompts per step", "data.train_batch_size", 256, PAPER, preset="train.prompts_per_step",
      note="Prompt-GDRO's released script: 512 (PROMPT_SCHEDULE=released)"),
    S("training steps", "trainer.total_training_steps", 1000, PAPER, preset="train.steps",
      note="Prompt-GDRO's released script: 500 (PROMPT_SCHEDULE=released)"),
    S("PPO mini-batch (prompts)", "actor_rollout_ref.actor.ppo_mini_batch_size", 128, RELEASED),
    S("PPO mini-batches per step", "derived.mini_batches", 2, RELEASED, preset="train.mini_batches",
      note="128 of 256 prompts; the released Prompt-GDRO script's 512-prompt steps make 4"),
    S("PPO epochs per step", "actor_rollout_ref.actor.ppo_epochs", 1, RELEASED, preset="train.ppo_epochs",
      note="verl's default"),
    # ---- objective
    S("advantage estimator", "algorithm.adv_estimator", "grpo", PAPER),
    S("advantages normalised by the group std", "algorithm.norm_adv_by_std_in_grpo", True, PAPER),
    S("advantage clip [-5, 5], before the Prompt-GDRO multipliers", "gdro.adv_clip", 5.0, PAPER,
      preset="loss.adv_clip",
      note="the released scripts pass +algorithm.adv_clip_low/high but their patch never reads them"),
    S("learning rate (AdamW)", "actor_rollout_ref.actor.optim.lr", 1e-6, PAPER, preset="optim.lr"),
    S("KL loss to the frozen base model", "actor_rollout_ref.actor.use_kl_loss", True, PAPER),
    S("KL coefficient", "actor_rollout_ref.actor.kl_loss_coef", 0.001, PAPER, preset="loss.kl_coef"),
    S("KL estimator", "actor_rollout_ref.actor.kl_loss_type", "low_var_kl", RELEASED, preset="loss.kl_estimator",
      preset_value="k3", note="verl's low_var_kl is k3 (clamped to [-10, 10]); the released scripts keep verl's default"),
    S("no KL in the reward", "algorithm.use_kl_in_reward", False, PAPER),
    S("clip ratio low", "actor_rollout_ref.actor.clip_ratio_low", 0.2, PAPER, preset="loss.clip_low"),
    S("clip ratio high (clip-higher)", "actor_rollout_ref.actor.clip_ratio_high", 0.28, PAPER, preset="loss.clip_high"),
    S("loss aggregation", "actor_rollout_ref.actor.loss_agg_mode", "token-mean", RELEASED, preset="loss.agg",
      note="verl's default, kept by the released scripts"),
    S("entropy bonus", "actor_rollout_ref.actor.entropy_coeff", 0, RELEASED, note="verl's default"),
    # ---- rollouts
    S("rollout engine", "actor_rollout_ref.rollout.name", "vllm", PAPER),
    S("vLLM tensor parallel size", "actor_rollout_ref.rollout.tensor_model_parallel_size", 1, RELEASED),
    S("rollouts per prompt (mean n_bar)", "actor_rollout_ref.rollout.n", 4, PAPER, preset="method.n_bar"),
    S("training temperature", "actor_rollout_ref.rollout.temperature", 1.0, RELEASED, preset="rollout.temperature",
      note="App. A says 0.6 (a departure)", paper=0.6, departure="training temperature 1.0"),
    # ---- validation
    S("validation samples", "actor_rollout_ref.rollout.val_kwargs.do_sample", True, PAPER,
      note="pass@8 needs sampling; verl's default is greedy"),
    S("validation temperature", "actor_rollout_ref.rollout.val_kwargs.temperature", 0.6, PAPER,
      preset="eval.temperature"),
    S("validation top-p", "actor_rollout_ref.rollout.val_kwargs.top_p", 0.8, PAPER, preset="eval.top_p"),
    S("validation top-k", "actor_rollout_ref.rollout.val_kwargs.top_k", 20, PAPER, preset="eval.top_k"),
    S("validation samples per prompt", "actor_rollout_ref.rollout.val_kwargs.n", 8, RELEASED_R, ROLLOUT,
      preset="eval.k"),
    S("validation samples per prompt", "actor_rollout_ref.rollout.val_kwargs.n", 16, RELEASED_P, PROMPT,
      note="paper: 8 (pass@8 / mean@8), a departure; val_kwargs.n=8 gives App. A's", paper=8,
      departure=VAL_N_DEPARTURE),
    S("validation batch (prompts)", "data.val_batch_size", 128, PAPER,
      note="the released scripts: 128 (Rollout-GDRO) / 512 (Prompt-GDRO); verl's default (null) is the whole "
           "pooled set in one batch; the batch size does not change the scores"),
    S("validation every (steps)", "trainer.test_freq", 50, RELEASED_R, ROLLOUT, preset="eval.every"),
    S("validation every (steps)", "trainer.test_freq", 40, RELEASED_P, PROMPT),
    S("validation before training", "trainer.val_before_train", True, RELEASED_R, ROLLOUT),
    S("validation before training", "trainer.val_before_train", False, RELEASED_P, PROMPT),
    # ---- checkpoints
    S("checkpoint every (steps)", "trainer.save_freq", 50, KEEP_PEAK, ROLLOUT, preset="train.save_every"),
    S("checkpoint every (steps)", "trainer.save_freq", 40, KEEP_PEAK, PROMPT, preset="train.save_every",
      preset_value=50, note="at every validation (= test_freq), so the peak validated step can be recovered; the "
                            "released scripts set save_freq=0; gdro train's presets evaluate and save every 50 steps "
                            "for every method (differs)"),
    S("checkpoints kept (actor)", "trainer.max_actor_ckpt_to_keep", None, KEEP_PEAK, preset="train.keep_last",
      preset_value=2,
      note="null = all: 25 (Prompt-GDRO) / 20 (Rollout-GDRO) checkpoints of about 20 GB at 1.7B, 100 GB at 8B; "
           "trainer.max_actor_ckpt_to_keep=2 caps the disk and loses the peak; gdro train's presets keep the "
           "last 2 (differs)"),
    S("resume the latest checkpoint", "trainer.resume_mode", "auto", "ours: relaunch = resume"),
    # ---- memory (released; they do not change the update)
    S("actor micro-batch per GPU", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", 16, RELEASED_P, PROMPT),
    S("actor micro-batch per GPU", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", 4, RELEASED_R, ROLLOUT),
    S("log-prob micro-batch per GPU", "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", 4, RELEASED_P,
      PROMPT),
    S("log-prob micro-batch per GPU", "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", 2, RELEASED_R,
      ROLLOUT),
    S("FSDP parameter offload", "actor_rollout_ref.actor.fsdp_config.param_offload", True, RELEASED_P, PROMPT),
    S("FSDP parameter offload", "actor_rollout_ref.actor.fsdp_config.param_offload", False, RELEASED_R, ROLLOUT),
    S("FSDP optimizer offload", "actor_rollout_ref.actor.fsdp_config.optimizer_offload", True, RELEASED_P, PROMPT),
    S("FSDP optimizer offload", "actor_rollout_ref.actor.fsdp_config.optimizer_offload", False, RELEASED_R, ROLLOUT),
    S("vLLM max sequences", "actor_rollout_ref.rollout.max_num_seqs", 64, RELEASED_R, ROLLOUT),
    S("vLLM GPU memory share", "actor_rollout_ref.rollout.gpu_memory_utilization", 0.7, RELEASED_R, ROLLOUT),
    # ---- one controller per run
    S("Prompt-GDRO weights", "gdro.weighter", "gdro", PAPER, PROMPT),
    S("rollouts per prompt fixed at n_bar", "gdro.allocator", "uniform", PAPER, PROMPT),
    S("prompt weights uniform (GRPO's)", "gdro.weighter", "uniform", PAPER, ROLLOUT),
    S("Rollout-GDRO allocation", "gdro.allocator", "gdro", PAPER, ROLLOUT),
    # ---- difficulty classifier
    S("classifier: sliding-window pass@k", "gdro.classifier", "window", PAPER),
    S("bins", "derived.num_bins", 10, PAPER, preset="method.num_bins",
      note="BINS=6 / BINS=3: the released scripts' '6-bin' (6 edges: 7 bins) and 3-bin (+ the extremes' class)"),
    S("bin edges", "gdro.classifier_config.edges", TEN_BINS, PAPER),
    S("window H (visits of the prompt)", "gdro.classifier_config.window", 50, RELEASED, preset="classifier.window",
      note="passk_history_len; 100 in the released 6-bin Prompt-GDRO runs"),
    S("hysteresis delta", "gdro.classifier_config.hysteresis", 0.03, RELEASED_P, PROMPT, preset="classifier.hysteresis",
      note="the paper gives no value"),
    S("hysteresis delta", "gdro.classifier_config.hysteresis", 0.0, RELEASED_R, ROLLOUT,
      preset="classifier.hysteresis", preset_value=0.03,
      note="gdro train's presets keep the classifier default 0.03 for every method (differs)"),
    S("exclude_extremes (extra class for pass@k 0 or 1)", "gdro.classifier_config.exclude_extremes", False, RELEASED,
      preset="classifier.exclude_extremes", note="on in the released 3-bin runs (BINS=3)"),
    S("pass@k's k", "gdro.classifier_config.k", 2, "ours: unbiased pass@2 of each visit (k <= n_min)",
      preset="classifier.k", note="paper k = 8; the code: any of the visit's n rollouts correct", paper=8,
      departure="difficulty = window mean of the unbiased pass@2 of each visit"),
    # ---- Prompt-GDRO
    S("eta_q", "gdro.weighter_config.eta", 0.65, PAPER, PROMPT, preset="weighter.eta"),
    S("gamma", "gdro.weighter_config.gamma", 0.01, PAPER, PROMPT, preset="weighter.gamma"),
    S("EMA beta (weight of the newest)", "gdro.weighter_config.ema_beta", 0.12, PAPER, PROMPT,
      preset="weighter.ema_beta"),
    S("max class weight", "gdro.weighter_config.max_weight", 15.0, PAPER, PROMPT, preset="weighter.max_weight"),
    S("loss normalised by class share (loss_norm_by_class)", "gdro.weighter_config.share_normalize", True, PAPER,
      PROMPT, preset="weighter.share_normalize", note="divides by B q_hat with a floor of 0.1 (a departure)"),
    # ---- Rollout-GDRO
    S("arms n_min", "gdro.allocator_config.n_min", 2, PAPER, ROLLOUT, preset="allocator.n_min"),
    S("arms n_max (3 x n_bar)", "gdro.allocator_config.n_max", 12, PAPER, ROLLOUT, preset="allocator.n_max"),
    S("budget n_bar", "derived.n_bar", 4, PAPER, ROLLOUT, preset="allocator.n_bar"),
    S("arm eta", "gdro.allocator_config.eta", 0.65, PAPER, ROLLOUT, preset="allocator.eta"),
    S("arm gamma", "gdro.allocator_config.gamma", 0.01, PAPER, ROLLOUT, preset="allocator.gamma"),
    S("dual step alpha_mu", "gdro.allocator_config.dual_lr", 0.05, PAPER, ROLLOUT, preset="allocator.dual_lr"),
    S("arm score EMA decay 0.4", "derived.arm_score_decay", 0.0,
      "ours: arm scores are cumulative, as in the released code", ROLLOUT, preset="allocator.score_decay",
      note="the released 0.4 is its class-loss EMA (gdro_ema_beta), which our allocator does not use", paper=0.4,
      departure="Rollout-GDRO's arm scores are cumulative"),
)

#: Where these runs depart from the paper or the released code, and why (docs/launch.md prints them).
DEPARTURES: tuple[tuple[str, str], ...] = (
    ("Prompt-GDRO runs 256 prompts x 1000 steps (paper App. A), not the released script's 512 x 500",
     "the paper states one schedule for every run and gdro train's presets use it; both see 256,000 prompts and "
     "make 2,000 updates of 128 prompts; PROMPT_SCHEDULE=released gives 512 x 500"),
    ("training temperature 1.0", "the released scripts train at 1.0; App. A says 0.6 (and validates at 0.6)"),
    ("difficulty = window mean of the unbiased pass@2 of each visit",
     "the code's 'any of the visit's n rollouts correct' changes meaning when Rollout-GDRO varies n; the paper's "
     "k = 8 exceeds n_min = 2"),
    ("prompts never seen are unassigned (multiplier 1, n_bar rollouts)",
     "the code gives them accuracy 0, which fills the hardest bin early in training"),
    ("a prompt leaving the exclude_extremes class is re-binned without hysteresis",
     "one bin per prompt is kept; the code applies hysteresis against the last regular bin it kept"),
    ("Prompt-GDRO applies the raw capped omega (Eq. 16, weight_mode=paper), clips S to [-5, 5], mixes gamma over "
     "all bins and divides by B q_hat (floor 0.1)",
     "the paper's equations; the code renormalises to mean 1 (weight_mode=mean1 gives it), has no clip and no "
     "floor, and divides by q_hat (eta here = the code's eta / B)"),
    ("difficulty signal: the failure rate", "the paper's surrogate loss averages to about 0 under GRPO advantages"),
    ("Rollout-GDRO updates its arm distributions and shadow price (mu from 1, exact per-prompt planner)",
     "in the released code the arm scores and mu never move (a state overwrite); the paper's one-arm-per-bin DP "
     "is gdro.allocator_config.planner=dp_count"),
    ("advantage clip applied", "App. A clips to [-5, 5]; the released patch never reads the option. With rewards "
     "+-1 and n <= 12 it never binds (|A| <= 3.2)"),
    ("token-mean loss aggregation", "verl's default, as in the released scripts; Eq. 5-7 average per response, "
     "then per prompt (seq-mean-token-mean)"),
    ("a checkpoint at every validation (every 40 steps for Prompt-GDRO, 50 for Rollout-GDRO), all of them kept",
     "the released scripts save none (save_freq=0); a 1000-step run must be resumable, and the paper reports each "
     "run's peak checkpoint (Table 1), which only a checkpoint at every validated step can recover; about 20 GB "
     "each at 1.7B, 100 GB at 8B (trainer.max_actor_ckpt_to_keep=2 caps the disk and loses the peak)"),
    (VAL_N_DEPARTURE, "the released run_groupdro.sh validates with 16 (run_rollout_groupdro.sh with 8); verl then "
     "reports mean@16 and a bootstrapped best@8, not App. A's mean@8 and pass@8 over 8 samples; "
     "actor_rollout_ref.rollout.val_kwargs.n=8 gives App. A's"),
    ("Rollout-GDRO's arm scores are cumulative", "App. A gives an arm EMA decay of 0.4; the released code's 0.4 "
     "(gdro_ema_beta) decays its class losses and its arm scores are cumulative, as ours are"),
    ("the reward is math-verify on the last \\boxed{} (+1 / -1), multiple choice for GPQA",
     "real_runs/verl/reward.py, shared with gdro train; the paper uses verl's math_dapo"),
    ("SDPA attention when flash-attn does not import", "the paper uses FlashAttention 2; SDPA has the same math"),
)


#: What each ``derived.*`` key is computed from (the docs show this in the key column).
DERIVED_KEYS = {
    "derived.model_size": "actor_rollout_ref.model.path",
    "derived.train_set": "data.train_files",
    "derived.val_sets": "data.val_files",
    "derived.mini_batches": "data.train_batch_size / actor.ppo_mini_batch_size",
    "derived.num_bins": "gdro.classifier_config (edges, exclude_extremes)",
    "derived.n_bar": "actor_rollout_ref.rollout.n",
    "derived.arm_score_decay": "gdro.allocator_config.score_decay",
}


#: Qwen3's vocabulary (every size's ``vocab_size``): the logits' last dimension.
QWEN3_VOCAB = 151_936
MAX_PROMPT, MAX_RESPONSE = 3200, 4096


def logits_gb(micro_batch: int, seq_len: int = MAX_PROMPT + MAX_RESPONSE, vocab: int = QWEN3_VOCAB,
              bytes_per_value: int = 2) -> float:
    """The logits of one actor micro-batch, in GB (1e9 bytes): micro_batch x seq_len x vocab x bytes.

    Assumes every sequence padded to ``max_prompt_length + max_response_length`` (verl's batches are; the
    SDPA path has no remove-padding), bf16 logits (2 bytes), and counts nothing else: weights, optimizer,
    activations and any float32 copy the log-softmax makes come on top. flash-attn's remove-padding keeps
    only the real tokens."""
    return micro_batch * seq_len * vocab * bytes_per_value / 1e9


def single_gpu_memory_markdown() -> str:
    """The sentence docs/launch.md prints about the single-GPU example's logits (tested to be there)."""
    micro = {m: next(s.value for s in rows_for(m) if s.key == "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu")
             for m in METHODS}
    return (f"The largest tensor of a step is the actor's logits: micro-batch x sequence x vocabulary x 2 bytes "
            f"(bf16) = {micro[PROMPT]} x {MAX_PROMPT + MAX_RESPONSE:,} x {QWEN3_VOCAB:,} x 2 = "
            f"**{logits_gb(micro[PROMPT]):.1f} GB** for Prompt-GDRO's micro-batch of {micro[PROMPT]}, "
            f"{logits_gb(micro[ROLLOUT]):.1f} GB for Rollout-GDRO's {micro[ROLLOUT]}, assuming every sequence "
            f"padded to {MAX_PROMPT:,} prompt + {MAX_RESPONSE:,} response tokens (SDPA: no remove-padding; "
            "flash-attn keeps only the real tokens), before the weights, the optimizer, the activations and any "
            "float32 copy the log-softmax makes")


def rows_for(method: str) -> tuple[Setting, ...]:
    """The rows that apply to ``method``."""
    return tuple(s for s in SETTINGS if s.method in (None, method))


def _cell(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return ", ".join(_cell(v) for v in value)
    return str(value)


def markdown_table() -> str:
    """The table as markdown: setting, value (per method where they differ), verl key, source, note."""
    lines = ["| setting | Prompt-GDRO | Rollout-GDRO | key | source | note |", "|---|---|---|---|---|---|"]
    done: set[tuple[str, str]] = set()
    for row in SETTINGS:
        if (row.what, row.key) in done:
            continue
        done.add((row.what, row.key))
        both = sorted((s for s in SETTINGS if (s.what, s.key) == (row.what, row.key)),
                      key=lambda s: METHODS.index(s.method) if s.method else -1)  # Prompt-GDRO's first
        value = {m: next((_cell(s.value) for s in both if s.method in (None, m)), "-") for m in METHODS}
        source = " / ".join(dict.fromkeys(s.source for s in both))
        note = "; ".join(dict.fromkeys(s.note for s in both if s.note))
        key = DERIVED_KEYS.get(row.key, row.key)
        lines.append(f"| {row.what} | {value[PROMPT]} | {value[ROLLOUT]} | `{key}` | {source} | {note} |")
    return "\n".join(lines)


def departures_markdown() -> str:
    """:data:`DEPARTURES` as a markdown list."""
    return "\n".join(f"- **{what}**: {why}." for what, why in DEPARTURES)


if __name__ == "__main__":  # paste into docs/launch.md when the table changes
    print(markdown_table(), departures_markdown(), sep="\n\n")
