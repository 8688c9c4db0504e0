"""Our verifiable reward as a verl reward function (``reward.custom_reward_function``).

Plug it in with::

    reward.custom_reward_function.path=$(python -c "import real_runs.verl.reward as m; print(m.__file__)")
    reward.custom_reward_function.name=compute_score

``compute_score`` returns ``score`` (+1 / -1, :class:`real_runs.rewards.math.MathReward` or
:class:`real_runs.rewards.choice.ChoiceReward`) and ``acc`` (the success flag the plugin reads).
:func:`known_odds_score` is a toy reward for smoke runs and CPU tests, NOT a task. Detail:
docs/verl-notes.md#real_runs-verl-reward.
"""

from __future__ import annotations

import hashlib
import threading
import zlib
from typing import Any

from real_runs.rewards.choice import ChoiceReward, reward_kind
from real_runs.rewards.math import MathReward

_LOCK = threading.Lock()
_SCORERS: dict[str, Any] = {}


def _scorer(kind: str, timeout_s: float) -> Any:
    if kind not in _SCORERS:
        _SCORERS[kind] = ChoiceReward() if kind == "choice" else MathReward(timeout_s=timeout_s, num_workers=1)
    return _SCORERS[kind]


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None,
                  timeout_s: float = 5.0, **_: Any) -> dict[str, Any]:
    """{"score": +1.0 or -1.0, "acc": bool} for one response; never raises on model output."""
    with _LOCK:
        result = _scorer(reward_kind(str(data_source)), timeout_s).score([str(solution_str)], [str(ground_truth)])
    success = bool(result.successes_R[0])
    return {"score": float(result.rewards_R[0]), "acc": success}


def close() -> None:
    """Stop the worker processes of the shared scorers."""
    with _LOCK:
        for scorer in _SCORERS.values():
            scorer.close()
        _SCORERS.clear()


KNOWN_ODDS = (0.1, 0.5, 0.9)


def known_odds(prompt_id: str) -> float:
    """The toy reward's success probability of a prompt: KNOWN_ODDS[row % 3] for ``source:split:row``.

    Ids without an integer row use crc32(id) % 3 instead.
    """
    row = str(prompt_id).rsplit(":", 1)[-1]
    bucket = int(row) if row.isdigit() else zlib.crc32(str(prompt_id).encode())
    return KNOWN_ODDS[bucket % len(KNOWN_ODDS)]


def known_odds_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None,
                     **_: Any) -> dict[str, Any]:
    """Toy reward: success (+1, else -1) with probability known_odds(extra_info["index"]).

    The draw is u < p with u = blake2b(id, response) / 2^64: a fixed function of the prompt id and
    the response text (independent across distinct responses, reproducible for a given one).
    """
    prompt_id = str((extra_info or {}).get("index", ground_truth))
    digest = hashlib.blake2b(f"{prompt_id}\x00{solution_str}".encode(), digest_size=8).digest()
    u = int.from_bytes(digest, "little") / 2**64
    success = bool(u < known_odds(prompt_id))
    return {"score": 1.0 if success else -1.0, "acc": success}
