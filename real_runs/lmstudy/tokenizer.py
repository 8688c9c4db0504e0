"""A character-level tokenizer for the arithmetic suite, built locally (no hub download).

One token per character of :data:`ALPHABET` plus ``<pad>``, ``<eos>`` and ``<unk>``, as a transformers
``PreTrainedTokenizerFast``; no BOS or EOS added on encode. Its chat template renders a user turn as the
bare expression (up to and including the first ``=``). Why: docs/lm-study-notes.md#real_runs-lmstudy-tokenizer.
"""

from __future__ import annotations

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

SPECIALS = ("<pad>", "<eos>", "<unk>")
ALPHABET = "0123456789+-*%=()\\boxed{} \n"
CHAT_TEMPLATE = "{{ messages[-1]['content'].split('=')[0] }}="


def build_tokenizer() -> PreTrainedTokenizerFast:
    """The char tokenizer: ids 0..2 are ``<pad>``, ``<eos>``, ``<unk>``; then ALPHABET in order."""
    vocab = {tok: i for i, tok in enumerate(SPECIALS)}
    for ch in ALPHABET:
        vocab.setdefault(ch, len(vocab))
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("[\\s\\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<eos>",
                                  unk_token="<unk>", padding_side="left", model_max_length=64)
    tok.chat_template = CHAT_TEMPLATE
    return tok
