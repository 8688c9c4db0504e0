"""Our data and reward inside verl: converter parquet -> RLHFDataset, compute_score -> reward manager."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("verl.protocol", reason="verl is not installed (the plugin's own venv runs these)")
import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn  # noqa: E402

from real_runs.data import INSTRUCTION, data_root, load_dataset_records  # noqa: E402
from real_runs.types import Problem  # noqa: E402
from real_runs.verl import VerlPluginError  # noqa: E402
from real_runs.verl import batch as vb  # noqa: E402
from real_runs.verl import convert  # noqa: E402
from real_runs.verl import reward as verl_reward  # noqa: E402
from verl_helpers import tiny_tokenizer  # noqa: E402

PROBLEMS = [Problem("math500:test:0", "What is 1 + 1 ?", "2", "math500", "algebra:L1-2"),
            Problem("math500:test:1", "What is 2 + 3 ?", "5", "math500", "algebra:L3"),
            Problem("gpqa_diamond:test:4", "Pick one .", "B) the second", "gpqa_diamond", "gpqa_diamond")]


def _words(problems, extra=()):
    text = " ".join(f"{p.problem} {INSTRUCTION}" for p in problems) + " " + " ".join(extra)
    return text.split()


def _dataset(path, tokenizer):
    config = OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": 256, "filter_overlong_prompts": True,
                               "filter_overlong_prompts_workers": 1, "truncation": "error",
                               "return_raw_chat": True, "cache_dir": str(path.parent / "cache")})
    return RLHFDataset(data_files=[str(path)], tokenizer=tokenizer, config=config)


def test_converted_parquet_loads_in_rlhf_dataset(tmp_path):
    out = tmp_path / "train.parquet"
    assert convert.write_parquet(PROBLEMS, out) == 3
    tokenizer = tiny_tokenizer(_words(PROBLEMS), tmp_path / "tok")
    dataset = _dataset(out, tokenizer)
    assert len(dataset) == 3
    batch = DataProto.from_single_dict(collate_fn([dataset[i] for i in range(3)]))
    assert vb.prompt_ids(batch) == [p.id for p in PROBLEMS]  # stable ids survive verl's dataset
    assert list(batch.non_tensor_batch["data_source"]) == ["math500", "math500", "gpqa_diamond"]
    assert [r["ground_truth"] for r in batch.non_tensor_batch["reward_model"]] == ["2", "5", "B) the second"]
    first = batch.non_tensor_batch["raw_prompt"][0]
    assert first == [{"role": "user", "content": f"What is 1 + 1 ? {INSTRUCTION}"}]
    templated = tokenizer.apply_chat_template(list(first), add_generation_prompt=True, tokenize=False)
    assert templated.startswith("<user> What is 1 + 1 ?") and templated.endswith("<assistant> ")


def test_real_data_converts_with_its_ids(tmp_path):
    if not (data_root() / "math500" / "test.jsonl").exists():
        pytest.skip("shared data folder not found: set GDRO_DATA")
    problems = load_dataset_records("math500", limit=16)
    out = tmp_path / "math500.parquet"
    assert convert.main(["math500", str(out), "--limit", "16"]) == 0
    tokenizer = tiny_tokenizer(_words(problems), tmp_path / "tok")
    dataset = _dataset(out, tokenizer)
    rows = [dataset[i] for i in range(len(dataset))]
    assert [r["extra_info"]["index"] for r in rows] == [p.id for p in problems]
    assert [r["extra_info"]["group"] for r in rows] == [p.group for p in problems]


def test_converter_refuses_to_overwrite_and_reports_one_line(tmp_path, capsys):
    out = tmp_path / "x.parquet"
    convert.write_parquet(PROBLEMS, out)
    before = out.read_bytes()
    with pytest.raises(VerlPluginError, match="already exists"):
        convert.write_parquet(PROBLEMS[:1], out)
    assert out.read_bytes() == before
    with pytest.raises(VerlPluginError, match="duplicate prompt ids"):
        convert.write_parquet(PROBLEMS[:1] * 2, tmp_path / "dup.parquet")
    assert convert.main(["no_such_set", str(tmp_path / "y.parquet")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: unknown data set") and "\n" not in err


@pytest.mark.parametrize("form", ["--out", "single file"])
def test_an_output_under_a_regular_file_is_one_line_and_writes_nothing(tmp_path, capsys, form):
    """`--out FILE/sub` (or FILE/x.parquet) used to end in NotADirectoryError's traceback."""
    blocker = tmp_path / "file"
    blocker.write_text("keep me")
    fixtures = str(Path(__file__).resolve().parents[2] / "fixtures" / "data")
    argv = (["--data-dir", fixtures, "--out", str(blocker / "sub"), "math500"] if form == "--out"
            else ["--data-dir", fixtures, "math500", str(blocker / "x.parquet")])
    assert convert.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("error: ") and f"{blocker} is a file, not a folder" in err
    assert blocker.read_text() == "keep me" and sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def _reward_manager(tmp_path, tokenizer):
    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager
    from verl.trainer.ppo.reward import get_custom_reward_fn

    config = OmegaConf.create({"reward": {"custom_reward_function": {
        "path": verl_reward.__file__, "name": "compute_score", "reward_kwargs": {"timeout_s": 6.0}}}})
    return NaiveRewardManager(config, tokenizer, get_custom_reward_fn(config))


def test_compute_score_plugs_into_verls_reward_manager(tmp_path):
    responses = ["so \\boxed{2}", "it is \\boxed{4}", "no box here", "\\boxed{\\frac{10}{2}}", "answer \\boxed{B}"]
    golds = ["2", "2", "5", "5", "B) the second"]
    sources = ["math500"] * 4 + ["gpqa_diamond"]
    tokenizer = tiny_tokenizer(_words(PROBLEMS, responses), tmp_path / "tok")
    manager = _reward_manager(tmp_path, tokenizer)
    ids = [tokenizer(r, add_special_tokens=False)["input_ids"] for r in responses]
    width = max(map(len, ids))
    prompt_len = 2
    responses_t = torch.full((len(ids), width), tokenizer.pad_token_id)
    attention = torch.zeros(len(ids), prompt_len + width, dtype=torch.long)
    attention[:, :prompt_len] = 1
    for row, tokens in enumerate(ids):
        responses_t[row, :len(tokens)] = torch.tensor(tokens)
        attention[row, prompt_len:prompt_len + len(tokens)] = 1
    data = DataProto.from_single_dict({
        "responses": responses_t, "attention_mask": attention, "prompts": torch.zeros(len(ids), prompt_len),
        "data_source": np.array(sources, dtype=object),
        "reward_model": np.array([{"ground_truth": g} for g in golds], dtype=object),
        "extra_info": np.array([{"index": f"x:{i}"} for i in range(len(ids))], dtype=object)})

    async def score_all():
        return [await manager.run_single(data[i:i + 1]) for i in range(len(data))]

    try:
        results = manager.loop.run_until_complete(score_all())  # the loop verl bound it to
    finally:
        verl_reward.close()
    assert [r["reward_score"] for r in results] == [1.0, -1.0, -1.0, 1.0, 1.0]
    assert [r["reward_extra_info"]["acc"] for r in results] == [True, False, False, True, True]
    scores = manager.assemble_rm_scores(data, [r["reward_score"] for r in results])
    assert scores.sum(-1).tolist() == [1.0, -1.0, -1.0, 1.0, 1.0]
