"""`gdro export`: a run's checkpoint as a Hugging Face folder that transformers (and so vLLM and
`gdro eval`) load with identical logits; `gdro eval --model` takes a checkpoint directly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from gdro_cli.main import main as gdro  # noqa: E402
from real_runs import checkpoint as ckpt  # noqa: E402
from real_runs import export  # noqa: E402
from real_runs.models import load_policy  # noqa: E402

PROMPT = "Let's think step by step and output the final answer within \\boxed{}."


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny run of 2 steps (checkpoints at 1 and 2), its model moved away from the initial one."""
    from real_runs import train
    from real_runs.config import load_config
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("export")
    cfg = load_config("tiny-cpu", ["train.steps=2", "train.save_every=1", "eval.every=0", "train.progress=false",
                                   "optim.lr=1e-2", f"train.out={json.dumps(str(out))}", "train.run_name=run"])
    return train.main(cfg)


def _logits(model, tokenizer) -> torch.Tensor:
    ids = torch.tensor([tokenizer(PROMPT)["input_ids"]])
    with torch.no_grad():
        return model.eval()(ids).logits


def test_export_loads_with_transformers_with_identical_logits(trained_run: Path, tmp_path: Path, capsys):
    assert gdro(["export", str(trained_run), str(tmp_path / "hf")]) == 0
    assert "wrote" in capsys.readouterr().out
    files = {p.name for p in (tmp_path / "hf").iterdir()}
    assert {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= files
    assert not files & set(ckpt.TRAINING_FILES)                  # no optimizer, trainer or controller state
    # the checkpoint's weights, restored into the run's own architecture, are the reference
    reference, tokenizer = load_policy("tiny", seed=0)
    initial = _logits(reference, tokenizer)
    ckpt.restore_model(reference, ckpt.step_folder(trained_run, 2))
    want = _logits(reference, tokenizer)
    assert not torch.equal(want, initial)                        # training moved the model
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "hf")
    loaded_tokenizer = AutoTokenizer.from_pretrained(tmp_path / "hf")
    assert loaded_tokenizer(PROMPT)["input_ids"] == tokenizer(PROMPT)["input_ids"]
    assert loaded_tokenizer.apply_chat_template([{"role": "user", "content": "1+1?"}], tokenize=False,
                                                add_generation_prompt=True).endswith("<|im_start|>assistant\n")
    assert torch.equal(_logits(model, loaded_tokenizer), want)
    assert model.generation_config.eos_token_id == reference.generation_config.eos_token_id


def test_export_of_a_step_in_bfloat16_and_eval_takes_a_checkpoint(trained_run: Path, tmp_path: Path):
    step1 = ckpt.step_folder(trained_run, 1)
    export.export(step1, tmp_path / "bf16", dtype="bfloat16")
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "bf16")
    assert model.dtype == torch.bfloat16
    full = (step1 / "model.safetensors").stat().st_size
    assert (tmp_path / "bf16" / "model.safetensors").stat().st_size < 0.6 * full
    # gdro eval --model accepts a checkpoint folder and a run directory (its newest checkpoint)
    from_step, _ = load_policy(str(step1))
    from_run, tokenizer = load_policy(str(trained_run))
    expected, _ = load_policy("tiny", seed=0)
    ckpt.restore_model(expected, ckpt.step_folder(trained_run, 2))
    assert torch.equal(_logits(from_run, tokenizer), _logits(expected, tokenizer))
    assert not torch.equal(_logits(from_step, tokenizer), _logits(from_run, tokenizer))


def test_export_refuses_bad_input_in_one_line(trained_run: Path, tmp_path: Path, capsys):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "mine.txt").write_text("x")
    for args, needle in (([str(trained_run), str(tmp_path / "taken")], "is a folder that is not empty"),
                         ([str(tmp_path), str(tmp_path / "o")], "neither a gdro train run"),
                         ([str(tmp_path / "nope"), str(tmp_path / "o")], "does not exist"),
                         ([str(trained_run), str(tmp_path / "o"), "--dtype", "int8"], "--dtype int8")):
        assert gdro(["export", *args]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("gdro export: ") and needle in err and "\n" not in err, err
    assert (tmp_path / "taken" / "mine.txt").read_text() == "x" and not (tmp_path / "o").exists()


def test_an_older_model_pt_checkpoint_is_rebuilt_from_the_run(trained_run: Path, tmp_path: Path):
    """Checkpoints written before this version hold model.pt only: export rebuilds the run's model."""
    import shutil
    old_run = tmp_path / "old"
    shutil.copytree(trained_run, old_run)
    folder = ckpt.step_folder(old_run, 2)
    state = ckpt.read_model_state(folder)
    model, tokenizer = load_policy("tiny", seed=0)
    model.load_state_dict(state, strict=False)
    torch.save(model.state_dict(), folder / "model.pt")
    for name in list(folder.iterdir()):
        if name.name not in ckpt.TRAINING_FILES:
            name.unlink()
    export.export(old_run, tmp_path / "hf")
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "hf")
    assert torch.equal(_logits(loaded, tokenizer), _logits(model, tokenizer))


def test_gdro_eval_runs_on_a_checkpoint_folder(trained_run: Path, tmp_path: Path, data_dir):
    from gdro_lab.runformat.runlog import read_run
    step = ckpt.step_folder(trained_run, 2)
    assert gdro(["eval", "--model", str(step), "--benchmarks", "aime24", "--limit", "2", "--k", "1",
                 "--max-new-tokens", "4", "--num-boot", "10", "--reward-workers", "1", "--out", str(tmp_path / "ev")]) == 0
    metrics = read_run(tmp_path / "ev").evals[0]["metrics"]
    assert metrics["aime24/num_prompts"] == 2 and metrics["eval/samples"] == 2
