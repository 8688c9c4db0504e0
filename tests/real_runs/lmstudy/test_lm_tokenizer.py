"""The char tokenizer: round trip on every problem and response, specials, padding side."""

from __future__ import annotations

from real_runs.lmstudy import tasks
from real_runs.lmstudy.tokenizer import ALPHABET, build_tokenizer


def test_round_trip_every_problem_and_response():
    tok = build_tokenizer()
    cfg = tasks.TaskConfig(train_size=500, heldout_per_group=50)
    for p in tasks.train_split(cfg) + tasks.heldout_split(cfg):
        text = p.problem + tasks.boxed(p.answer)
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert len(ids) == len(text)  # one token per character
        assert tok.unk_token_id not in ids
        assert tok.decode(ids) == text
        assert tok.decode(ids + [tok.eos_token_id, tok.pad_token_id], skip_special_tokens=True) == text


def test_specials_and_alphabet():
    tok = build_tokenizer()
    assert (tok.pad_token_id, tok.eos_token_id, tok.unk_token_id) == (0, 1, 2)
    assert len(tok) == 3 + len(set(ALPHABET))
    assert tok("7a", add_special_tokens=False)["input_ids"][1] == tok.unk_token_id
    assert tok.decode(tok(" \n", add_special_tokens=False)["input_ids"]) == " \n"


def test_left_padding_for_generation():
    tok = build_tokenizer()
    enc = tok(["1+2=", "123+45="], padding=True, add_special_tokens=False)
    assert enc["input_ids"][0][:3] == [0, 0, 0] and enc["attention_mask"][0][:3] == [0, 0, 0]


def test_project_prompt_formatter_gives_the_bare_expression(tmp_path):
    from real_runs.data import format_prompt
    from transformers import PreTrainedTokenizerFast

    tok = build_tokenizer()
    tok.save_pretrained(tmp_path)
    reloaded = PreTrainedTokenizerFast.from_pretrained(tmp_path)
    for p in tasks.heldout_split(tasks.TaskConfig(heldout_per_group=20)):
        assert format_prompt(p, tok) == p.problem
        assert format_prompt(p, reloaded) == p.problem
