"""Sizes of a `gdro train` run without a GPU: parameters, checkpoints and projected GPU memory.

Parameters of a Qwen3 decoder (exact; tested against a model built on the meta device), checkpoint size
(12 N bytes with AdamW) and the projected peak GPU memory of one process = static + max(update,
generation), in bytes. An estimate: a projection above 80% of a card is reported as "tight". The
formulas: docs/train-notes.md#real_runs-memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

GIB = 2**30
#: Memory of the cards a paper run targets, GiB as nvidia-smi reports them (143,771 / 81,559 MiB).
CARDS = {"H200 141 GB": 143771 / 1024, "80 GB card (H100/A100)": 81559 / 1024}

#: The Qwen3 base models of the paper presets (their Hugging Face config.json), so sizes and
#: memory can be computed without downloading them.
QWEN3_SHAPES: dict[str, dict[str, Any]] = {
    "Qwen/Qwen3-1.7B-Base": dict(hidden_size=2048, intermediate_size=6144, num_hidden_layers=28,
                                 num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                                 vocab_size=151936, tie_word_embeddings=True),
    "Qwen/Qwen3-4B-Base": dict(hidden_size=2560, intermediate_size=9728, num_hidden_layers=36,
                               num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                               vocab_size=151936, tie_word_embeddings=True),
    "Qwen/Qwen3-8B-Base": dict(hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
                               num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                               vocab_size=151936, tie_word_embeddings=False),
}


@dataclass(frozen=True)
class Shape:
    """The dimensions of a decoder that the formulas use (from a transformers config)."""

    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool

    @classmethod
    def of(cls, config: Mapping[str, Any] | Any) -> "Shape":
        def get(key: str, default: Any = None) -> Any:
            return config.get(key, default) if isinstance(config, Mapping) else getattr(config, key, default)

        hidden, heads = int(get("hidden_size")), int(get("num_attention_heads"))
        return cls(hidden, int(get("intermediate_size")), int(get("num_hidden_layers")), heads,
                   int(get("num_key_value_heads") or heads), int(get("head_dim") or hidden // heads),
                   int(get("vocab_size")), bool(get("tie_word_embeddings", False)))

    @property
    def parameters(self) -> int:
        """N of the module docstring (a Qwen3 decoder-only model)."""
        h, hq, kv, d = self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim, self.head_dim
        layer = h * hq + 2 * h * kv + hq * h + 3 * h * self.intermediate + 2 * h + 2 * d
        return self.vocab * h * (1 if self.tied else 2) + h + self.layers * layer


def human(size: float) -> str:
    """Bytes in decimal units: ``20.6 GB``, ``757 kB``."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size:.0f} B"


def checkpoint_bytes(parameters: int) -> dict[str, int]:
    """Bytes of one checkpoint with fp32 master weights: model, optimizer and both."""
    return {"model": 4 * parameters, "optimizer": 8 * parameters, "total": 12 * parameters}


@dataclass(frozen=True)
class Projection:
    """Projected peak GPU memory, bytes per term (see the module docstring)."""

    static: dict[str, float]
    update: dict[str, float]
    generation: dict[str, float]

    @property
    def peak(self) -> float:
        return sum(self.static.values()) + max(sum(self.update.values()), sum(self.generation.values()))


def project(shape: Shape, *, micro_batch_tokens: int, kl: bool, gradient_checkpointing: bool,
            kv_tokens: int = 65536) -> Projection:
    """The memory of one gdro train process on one GPU (module docstring formula)."""
    n, t, h, layers = shape.parameters, micro_batch_tokens, shape.hidden, shape.layers
    hq, kv = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    one_layer = t * (4 * (2 * h + 3 * hq + 2 * kv + 4 * shape.intermediate) + 8 * h)
    static = {"weights fp32 4N": 4.0 * n, "gradients fp32 4N": 4.0 * n, "AdamW moments 8N": 8.0 * n}
    if kl:
        static["reference bf16 2N"] = 2.0 * n
    if gradient_checkpointing:
        update = {"checkpointed layer inputs 4LTh": 4.0 * layers * t * h, "one layer recomputed": float(one_layer)}
    else:
        update = {"every layer's activations": float(layers * one_layer)}
    update["logits 18VT"] = 18.0 * shape.vocab * t
    generation = {"KV cache 4 L kv G": 4.0 * layers * kv * kv_tokens}
    return Projection(static, update, generation)


def format_projection(name: str, projection: Projection, parameters: int) -> list[str]:
    """Printable lines: the terms in GiB and the verdict against each card."""
    def gib(value: float) -> str:
        return f"{value / GIB:.1f} GiB"

    lines = [f"projected GPU memory of {name} ({parameters:,} parameters), one process, hf engine:"]
    for title, terms in (("static", projection.static), ("update (per micro-batch)", projection.update),
                         ("generation", projection.generation)):
        lines.append(f"  {title:<25} {gib(sum(terms.values())):>10}  = " +
                     " + ".join(f"{k} {gib(v)}" for k, v in terms.items()))
    lines.append(f"  {'peak = static + max(update, generation)':<25} {gib(projection.peak):>10}")
    for card, capacity in CARDS.items():
        ratio = projection.peak / GIB / capacity
        verdict = "fits" if ratio <= 0.8 else "tight (over 80%)" if ratio <= 1.0 else "DOES NOT FIT"
        lines.append(f"  {card:<25} {capacity:>6.1f} GiB: {verdict} ({100 * ratio:.0f}%)")
    return lines
