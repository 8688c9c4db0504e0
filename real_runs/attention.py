"""The attention implementation of every launch path: ``flash_attention_2`` when flash-attn imports, else SDPA.

One rule for ``gdro train`` / ``gdro eval``, the verl launch scripts and ``scripts/verl_smoke.sh``,
said in one line; always SDPA on CPU; with SDPA the verl overrides turn packing off.
``python -m real_runs.attention --verl`` prints the Hydra overrides (stdout) and the choice (stderr).
Why: docs/train-notes.md#real_runs-attention.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence, TextIO

FLASH = "flash_attention_2"
SDPA = "sdpa"


def flash_attn_problem() -> str | None:
    """Why ``flash_attn`` cannot be used (one line), or None when it imports."""
    try:
        importlib.import_module("flash_attn")
    except Exception as err:  # ImportError, or a broken build's OSError/RuntimeError at import
        text = str(err).strip().splitlines()
        return f"{type(err).__name__}: {text[0][:160]}" if text else type(err).__name__
    return None


def choose_attention(device: str = "cuda") -> tuple[str, str]:
    """(implementation, reason): ``flash_attention_2`` on CUDA when flash-attn imports, else ``sdpa``."""
    if not str(device).startswith("cuda"):
        return SDPA, f"device {device}: flash-attn has CUDA kernels only"
    problem = flash_attn_problem()
    if problem is None:
        return FLASH, "flash-attn imports"
    return SDPA, f"flash-attn does not import ({problem})"


def announce(implementation: str, reason: str, stream: TextIO | None = None) -> str:
    """Print (stdout by default, with the run's other progress lines) and return the one line that says
    which attention runs."""
    line = f"attention: {implementation} ({reason})"
    print(line, file=stream if stream is not None else sys.stdout, flush=True)
    return line


def verl_overrides(implementation: str) -> list[str]:
    """Hydra overrides that make verl's actor and reference models use ``implementation``.

    verl 0.9.1 reads ``actor_rollout_ref.model.override_config.attn_implementation`` (default
    flash_attention_2); its packed path (``use_remove_padding``) needs flash-attn, so SDPA turns it off.
    """
    key = "+actor_rollout_ref.model.override_config.attn_implementation"
    packing = "true" if implementation == FLASH else "false"
    return [f"{key}={implementation}", f"actor_rollout_ref.model.use_remove_padding={packing}"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m real_runs.attention", description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--verl", action="store_true", help="print verl's Hydra overrides on stdout, one per line")
    args = parser.parse_args(argv)
    implementation, reason = choose_attention(args.device)
    announce(implementation, reason, sys.stderr)  # stdout carries the overrides
    if args.verl:
        print("\n".join(verl_overrides(implementation)))
    else:
        print(implementation)
    return 0


if __name__ == "__main__":
    sys.exit(main())
