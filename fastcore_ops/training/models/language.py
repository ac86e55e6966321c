"""Language models a recipe can name: the project's GPT, or Hugging Face GPT-2 built from a config.

Nothing is downloaded: GPT-2 is built from a ``GPT2Config`` with random weights. Both take
``(batch, length)`` token ids and return the logits first (our GPT a tuple, GPT-2 a model
output), which :func:`logits_of` reads alike; both accept the ``alibi`` surgery.

    >>> model = build_language_model("gpt", vocab_size=256, sequence_length=64,
    ...                              options={"n_layer": 1, "n_head": 2, "n_embd": 32})
    >>> logits_of(model(torch.zeros(2, 64, dtype=torch.long))).shape
    torch.Size([2, 64, 256])
    >>> position_limit(model)
    64
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from fastcore_ops.training.models.gpt import GPT, GPTConfig
from fastcore_ops.training.models.registry import CAUSAL_LM, get, names, register_model

# GPT-2's config defaults dropout to 0.1 for fine-tuning; pretraining small models on plenty
# of text does better without, and our GPT's default is 0 too. Options can still set them.
_GPT2_DEFAULTS = {"resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}


def build_language_model(name: str, *, vocab_size: int, sequence_length: int, options: dict) -> nn.Module:
    """A randomly initialized causal language model over ``vocab_size`` tokens.

    sequence_length: the training length L; learned position tables get exactly L rows.
    options: the model's own fields (``GPTConfig``'s for "gpt", ``GPT2Config``'s for "hf_gpt2").
    """
    model = get(name)
    if model is None or model.family != CAUSAL_LM:
        raise ValueError(f"model.name must be one of {', '.join(language_model_names())} for a language model, "
                         f"got {name!r}")
    return model.build(vocab_size=vocab_size, sequence_length=sequence_length, options=options)


def language_model_names() -> list[str]:
    """The language models a recipe can name.

        >>> language_model_names()
        ['gpt', 'hf_gpt2']
    """
    return names(CAUSAL_LM)


@register_model(CAUSAL_LM, "gpt")
def _gpt(*, vocab_size: int, sequence_length: int, options: dict) -> GPT:
    known = {f.name for f in dataclasses.fields(GPTConfig)} - {"vocab_size", "max_sequence_length"}
    _check_options("gpt", options, known)
    return GPT(GPTConfig(vocab_size=vocab_size, max_sequence_length=sequence_length, **options))


@register_model(CAUSAL_LM, "hf_gpt2")
def _hf_gpt2(*, vocab_size: int, sequence_length: int, options: dict) -> nn.Module:
    import transformers  # here: only runs that name GPT-2 need transformers installed

    settings = {**_GPT2_DEFAULTS, **options, "vocab_size": vocab_size, "n_positions": sequence_length,
                "bos_token_id": None, "eos_token_id": None}
    known = set(transformers.GPT2Config().to_dict()) - {"vocab_size", "n_positions"}
    _check_options("hf_gpt2", options, known)
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(**settings))


def _check_options(name: str, options: dict, known: set[str]) -> None:
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(f"model.options for {name!r}: unknown option(s) {unknown}; the vocabulary size and the "
                         f"sequence length come from the text section; options: {', '.join(sorted(known))}")


def logits_of(output) -> torch.Tensor:
    """The (batch, length, vocab) logits of a language model's output (a tuple or a transformers output)."""
    return output[0] if isinstance(output, tuple) else output.logits


def position_limit(model: nn.Module) -> int | None:
    """The longest input ``model`` accepts: the rows of its learned position table ``wpe``; None: no limit.

    Our GPT and GPT-2 both call the table ``wpe``; after the ``alibi`` surgery neither holds one
    (GPT-2 keeps a parameter-free stand-in that is not an ``nn.Embedding``).
    """
    limits = [module.num_embeddings for name, module in model.named_modules()
              if name.rsplit(".", 1)[-1] == "wpe" and isinstance(module, nn.Embedding)]
    return min(limits) if limits else None
