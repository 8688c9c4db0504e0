"""Our data sets as verl parquet files: ``python -m real_runs.verl.convert DATASET OUT.parquet``.

verl's ``RLHFDataset`` reads rows ``{data_source, prompt, ability, reward_model, extra_info}``:

- ``prompt``: a chat list, one user turn with our one template (question + the boxed-answer
  instruction of :data:`real_runs.data.INSTRUCTION`); verl applies the model's chat template, as
  :func:`real_runs.data.format_prompt` does for our own engines;
- ``data_source``: the Problem's source (picks the reward kind in :mod:`real_runs.verl.reward`);
- ``reward_model.ground_truth``: the gold answer string;
- ``extra_info.index``: the stable ``source:split:row`` id the GDRO plugin keys its difficulty
  history on (verl's per-step ``uid`` is random); ``extra_info.group`` the worst-group label.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Iterable, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from real_runs.data import INSTRUCTION, DataError, load_dataset_records
from real_runs.types import Problem
from real_runs.verl import VerlPluginError


def verl_row(problem: Problem) -> dict:
    """One verl row for a Problem."""
    return {
        "data_source": problem.source,
        "prompt": [{"role": "user", "content": f"{problem.problem.strip()} {INSTRUCTION}"}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": problem.answer},
        "extra_info": {"index": problem.id, "group": problem.group},
    }


def write_parquet(problems: Iterable[Problem], path: str | Path) -> int:
    """Write the rows to ``path`` (refusing to overwrite an existing file); returns the row count."""
    target = Path(path)
    if target.exists():
        raise VerlPluginError(f"{target} already exists: choose another output file (nothing was overwritten)")
    rows = [verl_row(p) for p in problems]
    if not rows:
        raise VerlPluginError("no problems to write: check the data set name, split and --limit")
    ids = [r["extra_info"]["index"] for r in rows]
    if len(set(ids)) != len(ids):
        raise VerlPluginError("duplicate prompt ids: each Problem.id must be unique (source:split:row)")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    pq.write_table(pa.Table.from_pylist(rows), tmp)
    tmp.replace(target)
    return len(rows)


def word_level_tokenizer(words: Iterable[str], path: str | Path):
    """A word-level fast tokenizer with a chat template over ``words``, saved to ``path`` and loaded back.

    For offline checks of converted data (verl's ``RLHFDataset``, the smoke run): no download, a
    vocabulary of exactly the given words plus ``<unk> <pad> <eos> <user> <assistant>``.
    """
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    specials = ["<unk>", "<pad>", "<eos>", "<user>", "<assistant>"]
    vocab = {w: i for i, w in enumerate(dict.fromkeys(specials + list(words)))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    template = ("{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }} {% endfor %}"
                "{% if add_generation_prompt %}<assistant> {% endif %}")
    fast = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>", pad_token="<pad>",
                                   eos_token="<eos>", chat_template=template)
    fast.save_pretrained(path)
    return AutoTokenizer.from_pretrained(path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m real_runs.verl.convert", description=__doc__.splitlines()[0])
    parser.add_argument("dataset", help="a known data set (dapo_math_17k, math500, ...) or a .jsonl/.parquet file")
    parser.add_argument("output", help="the verl parquet to write (must not exist)")
    parser.add_argument("--split", default=None, help="split of the data set (default: its default split)")
    parser.add_argument("--limit", type=int, default=None, help="first N rows only")
    args = parser.parse_args(argv)
    try:
        count = write_parquet(load_dataset_records(args.dataset, args.split, args.limit), args.output)
    except (DataError, VerlPluginError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {count} prompts to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
