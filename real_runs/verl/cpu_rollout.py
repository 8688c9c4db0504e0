"""The ``hf_cpu`` rollout for verl 0.9.1 on CPU (tests and laptops; see :mod:`real_runs.verl.cpu`).

One rollout replica is one :class:`HFCPUServer` Ray actor holding the Hugging Face model, started by
:class:`HFCPUReplica`; :class:`HFCPUServerAdapter` forwards the actor's weights. Import this module after
``real_runs.verl.cpu.install`` has set the platform. Detail: docs/verl-notes.md#real_runs-verl-cpu_rollout.
"""

from __future__ import annotations

import asyncio
import zlib
from typing import Any, Iterable

import torch

SERVER_PREFIX = "gdro_hf_cpu_server_"


class HFCPUServer:
    """One rollout replica's generation server: the Hugging Face model on CPU, token in, token out.

    ``generate`` has the signature verl's ``LLMServerClient`` calls on vLLM's server and returns verl's
    ``TokenOutput``; ``update_weights`` loads the actor's full state dict (version = training step).
    Sampling and seeds: docs/verl-notes.md#real_runs-verl-cpu_rollout.
    """

    def __init__(self, config: Any, model_config: Any, replica_rank: int):
        from transformers import AutoModelForCausalLM

        torch.set_num_threads(1)
        self.config, self.replica_rank = config, replica_rank
        path = model_config.get("local_path", None) or model_config.get("path")  # verl passes a DictConfig
        self.model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="sdpa").eval()
        eos = self.model.generation_config.eos_token_id  # generation_config.json's, else the model config's
        eos = eos if eos is not None else self.model.config.eos_token_id
        self.eos_ids = [int(e) for e in (eos if isinstance(eos, (list, tuple)) else [eos]) if e is not None]
        self.version = 0
        self.requests = 0
        self.seeded_requests = 0  # requests that carried their own sampling seed
        self.weight_updates = 0
        self._lock = asyncio.Lock()

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any], request_id: str,
                       **_: Any) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        async with self._lock:  # one forward pass at a time: the model is shared
            tokens, logprobs, finished = self._sample(list(prompt_ids), dict(sampling_params), str(request_id))
        return TokenOutput(token_ids=tokens, log_probs=logprobs if sampling_params.get("logprobs") else None,
                           stop_reason="completed" if finished else "length",
                           extra_fields={"global_steps": self.version})

    @torch.no_grad()
    def _sample(self, prompt_ids: list[int], params: dict[str, Any], request_id: str
                ) -> tuple[list[int], list[float], bool]:
        limit = int(params.get("max_tokens") or params.get("max_new_tokens") or self.config.response_length)
        temperature = float(params.get("temperature", 1.0))
        top_p, top_k = float(params.get("top_p", 1.0)), int(params.get("top_k", -1))
        self.requests += 1
        generator = torch.Generator().manual_seed(self._request_seed(params.get("seed"), request_id))
        ids = torch.tensor([prompt_ids], dtype=torch.long)
        past, tokens, logprobs = None, [], []
        for _ in range(limit):
            out = self.model(input_ids=ids if past is None else ids[:, -1:], past_key_values=past, use_cache=True)
            past = out.past_key_values
            logits = out.logits[0, -1].double()
            token, logprob = _draw(logits, temperature, top_p, top_k, generator)
            tokens.append(token)
            logprobs.append(logprob)
            if token in self.eos_ids:
                return tokens, logprobs, True
            ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
        return tokens, logprobs, False

    def _request_seed(self, seed: Any, request_id: str) -> int:
        """The request's own seed if it has one, else one derived from its id (or a counter)."""
        if seed is not None:
            self.seeded_requests += 1
            if self.seeded_requests == 1:
                print(f"hf_cpu: replica {self.replica_rank} samples with the requests' own seeds", flush=True)
            return int(seed) % 2**63
        key = request_id if request_id.startswith("det-") else f"n{self.requests}"
        return _seed(int(self.config.seed), self.version, key)

    async def update_weights(self, state: dict[str, torch.Tensor], global_steps: int | None) -> int:
        """Load the actor's weights (names as in the HF model); returns the number of tensors."""
        async with self._lock:
            own = self.model.state_dict()
            unknown = sorted(set(state) - set(own))
            if unknown:
                raise ValueError(f"actor weight {unknown[0]} is not in the rollout model: the actor and "
                                 "rollout models differ (same model.path for both)")
            tied = {"lm_head.weight"} if getattr(self.model.config, "tie_word_embeddings", False) else set()
            missing = sorted(set(own) - set(state) - tied)
            if missing:
                raise ValueError(f"the actor sent no {missing[0]}: the weight sync is incomplete")
            with torch.no_grad():
                for name, tensor in state.items():
                    own[name].copy_(tensor.to(own[name].dtype))
            self.version = int(global_steps or 0)
            self.weight_updates += 1
        print(f"hf_cpu: weights of step {self.version} loaded into replica {self.replica_rank} "
              f"({len(state)} tensors)", flush=True)
        return len(state)

    async def stats(self) -> dict[str, int]:
        return {"requests": self.requests, "seeded_requests": self.seeded_requests,
                "weight_updates": self.weight_updates, "version": self.version}

    async def _noop(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return {}

    wake_up = sleep = clear_kv_cache = release_kv_cache = resume_kv_cache = _noop
    resume_generation = start_profile = stop_profile = wait_for_requests_to_drain = _noop

    async def abort_all_requests(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return {"aborted_count": 0, "request_ids": []}


def _seed(base: int, version: int, key: str) -> int:
    return (zlib.crc32(f"{base}:{version}:{key}".encode()) * 2654435761 + base) % (2**63)


def _draw(logits: torch.Tensor, temperature: float, top_p: float, top_k: int,
          generator: torch.Generator) -> tuple[int, float]:
    """One token from softmax(logits / T) after top-k / top-p truncation; greedy when T = 0."""
    if temperature <= 0:
        logp = torch.log_softmax(logits, -1)
        token = int(torch.argmax(logits))
        return token, float(logp[token])
    logits = logits / temperature
    if 0 < top_k < logits.numel():
        kth = torch.topk(logits, top_k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=True)
        cumulative = torch.softmax(sorted_logits, -1).cumsum(-1)
        drop = cumulative - torch.softmax(sorted_logits, -1) > top_p
        logits = logits.index_fill(0, order[drop], float("-inf"))
    logp = torch.log_softmax(logits, -1)
    token = int(torch.multinomial(logp.exp(), 1, generator=generator))
    return token, float(logp[token])


def _rollout_base() -> type:
    from verl.workers.rollout.base import BaseRollout

    return BaseRollout


def _replica_base() -> type:
    from verl.workers.rollout.replica import RolloutReplica

    return RolloutReplica


class HFCPUServerAdapter(_rollout_base()):  # type: ignore[misc]
    """The rollout object inside each FSDP worker: forwards the actor's weights to its server.

    verl's ``naive`` weight sync calls ``update_weights`` on every rank with a generator of full
    tensors (gathering is collective, so every rank consumes it); the replica's leader rank
    (tensor/pipeline rank 0) sends them to ``gdro_hf_cpu_server_<replica>``.
    """

    def __init__(self, config: Any, model_config: Any, device_mesh: Any, *args: Any, **kwargs: Any):
        super().__init__(config, model_config, device_mesh, *args, **kwargs)
        self.replica_rank = int(device_mesh["dp"].get_local_rank())
        self.leader = device_mesh["infer_tp"].get_local_rank() == 0 and device_mesh["infer_pp"].get_local_rank() == 0

    async def update_weights(self, weights: Iterable[tuple[str, torch.Tensor]], wire_format: str = "named_tensors",
                             **kwargs: Any) -> None:
        import ray

        if wire_format != "named_tensors":
            raise ValueError(f"the hf_cpu rollout takes full named tensors, not {wire_format!r}")
        state = {name: tensor.detach().to("cpu", torch.float32).clone() for name, tensor in weights}
        if self.leader:
            server = ray.get_actor(f"{SERVER_PREFIX}{self.replica_rank}")
            await server.update_weights.remote(state, kwargs.get("global_steps"))

    async def resume(self, tags: list[str]) -> None:
        return None

    async def release(self) -> None:
        return None


class HFCPUReplica(_replica_base()):  # type: ignore[misc]
    """A rollout replica served by one :class:`HFCPUServer` actor (hybrid mode, like vLLM's)."""

    async def launch_servers(self) -> None:
        import ray

        name = f"{SERVER_PREFIX}{self.replica_rank}"
        server = ray.remote(HFCPUServer).options(name=name, num_cpus=0, max_concurrency=64).remote(
            self.config, self.model_config, self.replica_rank)
        await server.stats.remote()  # the model is loaded
        self.servers = [server]
        self._server_handle = server
        self._server_address = name

    def rollout_worker_use_gpu(self) -> bool:
        return False
