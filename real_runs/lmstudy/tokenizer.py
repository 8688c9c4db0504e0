"""A character-level tokenizer for the arithmetic suite, built locally (no hub download).

One token per character of :data:`ALPHABET` (digits, the operators of :mod:`.tasks`, the
characters of ``\\boxed{}``, space and newline) plus ``<pad>``, ``<eos>`` and ``<unk>``. It is a
``tokenizers.Tokenizer`` (WordLevel model over single characters, a ``Fuse`` decoder so decoded
text has no spaces between tokens) wrapped as a transformers ``PreTrainedTokenizerFast``, so the
engine, trainer and reward use it exactly like a hub tokenizer. It adds no BOS and no EOS on
encode; the model learns to emit ``<eos>`` after ``}``.

Its chat template renders a user turn as the bare expression (everything up to the first
``=``, then ``=``): the project's prompt formatter (:func:`real_runs.data.format_prompt`) appends
a natural-language instruction that this 30-symbol model neither reads nor needs, and a model's
chat template is exactly where a prompt format belongs. So the trainer's prompt for
``"12+3="`` is ``"12+3="``, the same text the warm start trained on.
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
