"""Causal language modelling: next-token logits, cross-entropy, validation loss at several lengths.

Validation is scored in nats per token, in bits per byte (independent of the tokenizer: a
BPE token stands for several bytes) and as perplexity, at the training length L, and at
each longer length the model can run (2L, 4L for ALiBi models): a name's suffix says the
length, ``eval_loss@2L``; the unsuffixed metrics are at L.

    >>> windows = [(torch.zeros(2, 8, dtype=torch.long), torch.ones(2, 8, dtype=torch.long))]
    >>> task = CausalLanguageModeling(eval_loaders={1: windows}, token_bytes=torch.ones(256),
    ...                               device=torch.device("cpu"))
    >>> model = lambda tokens: (torch.zeros(*tokens.shape, 256), None)   # uniform over 256 bytes
    >>> metrics = task.metrics(task.evaluation_sums(model, contextlib.nullcontext))
    >>> round(metrics["bits_per_byte"], 4), round(metrics["perplexity"], 2)
    (8.0, 256.0)
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import shutil
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional as F

from fastcore_ops.training.config import TrainConfig
from fastcore_ops.training.data_identity import text_fingerprint
from fastcore_ops.training.methods.library import apply_surgery_methods
from fastcore_ops.training.methods.registry import TEXT, MethodPlan
from fastcore_ops.training.models.language import build_language_model, language_model_names, logits_of, position_limit
from fastcore_ops.training.tasks.base import Task
from fastcore_ops.training.tasks.registry import register_task
from fastcore_ops.training.text.loader import TokenEvaluation, TokenWindows
from fastcore_ops.training.text.tokens import (META_FILE, SPLITS, PreparedTokens, bin_file, load_prepared,
                                                prepared_tokens, token_cache)
from fastcore_ops.training.text.tokenizers import BPE_FILE

log = logging.getLogger("fastcore_ops.training")
RUN_TOKENS_NAME = "tokens.json"  # in a run's folder: which tokenizer the run was trained with


def metric_suffix(multiple: int) -> str:
    """The metric-name suffix of an evaluation at ``multiple`` times the training length.

    >>> metric_suffix(1), metric_suffix(4)
    ('', '@4L')
    """
    return "" if multiple == 1 else f"@{multiple}L"


@register_task("language_model")
class CausalLanguageModeling(Task):
    """Token windows to next-token logits; evaluated by validation loss at each length.

    eval_loaders: {length multiple: batches of (inputs, targets) int64 (B, T) on the device},
        this process's share of the validation windows; multiple 1 (the training length) first.
    token_bytes: (vocab_size,) how many bytes of text each token stands for (bits per byte).
    """

    metric = "eval_loss"
    higher_is_better = False
    metric_label = "validation loss (nats/token)"
    sample_unit = "tokens"
    model_size_name = "vocab_size"
    traits = TEXT
    shards_model = True

    @classmethod
    def model_names(cls) -> list[str]:
        return language_model_names()

    @classmethod
    def check_data(cls, config, data, *, subset, world_size, progress=True):
        """The prepared token folder (text is tokenized here, once: later runs reuse it), checked, and its
        :func:`tokens_record` (which tokenizer made the tokens), for :meth:`keep_run_files`."""
        cls.check_inputs(data, subset)
        folder = prepare_text_data(config, data, progress=progress)
        prepared = load_prepared(folder)
        check_text_size(config, prepared, world_size)
        return folder, tokens_record(prepared.meta)

    @classmethod
    def data_fingerprint(cls, config, data, found):
        return text_fingerprint(data, [f"{split}.bin" for split in SPLITS])

    @classmethod
    def build(cls, config, plan, *, data, device, subset=None, found=None, strategy="ddp"):
        # A sharded model's forward passes are collective: every process evaluates all the validation text.
        return build_language_modeling(config, plan, data=data, device=device, shard_evaluation=strategy != "fsdp")

    @classmethod
    def build_model(cls, config, size, surgeries):
        model = build_language_model(config.model.name, vocab_size=size, sequence_length=config.text.sequence_length,
                                     options=config.model.options)
        apply_surgery_methods(model, surgeries)
        return model

    @classmethod
    def keep_run_files(cls, out, data, found, *, resume, write=True):
        keep_run_tokenizer(out, data, found, resume=resume, write=write)

    def __init__(self, *, eval_loaders: dict[int, Iterable], token_bytes: torch.Tensor, device: torch.device):
        if 1 not in eval_loaders:
            raise ValueError(f"eval_loaders must include multiple 1 (the training length), got {sorted(eval_loaders)}")
        self.eval_loaders, self.device = dict(sorted(eval_loaders.items())), device
        self.token_bytes = token_bytes.to(device=device, dtype=torch.float64)

    def forward(self, model: torch.nn.Module, inputs: torch.Tensor) -> torch.Tensor:
        return logits_of(model(inputs))

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(outputs.flatten(0, 1).float(), targets.flatten())

    def sample_losses(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        per_token = F.cross_entropy(outputs.flatten(0, 1).float(), targets.flatten(), reduction="none")
        return per_token.view(targets.shape).mean(dim=1)  # each sequence's mean over its tokens

    def samples(self, targets: torch.Tensor) -> int:
        return targets.numel()

    def evaluation_sums(self, model: torch.nn.Module, autocast: Callable[[], contextlib.AbstractContextManager],
                        batches: Callable[[Iterable, str], Iterable] = lambda loader, name: loader):
        sums = torch.zeros(len(self.eval_loaders), 3, dtype=torch.float64, device=self.device)
        for row, (multiple, loader) in enumerate(self.eval_loaders.items()):
            for inputs, targets in batches(loader, f"evaluation at {multiple}x the length"):
                with autocast():
                    logits = logits_of(model(inputs))
                sums[row, 0] += F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), reduction="sum")
                sums[row, 1] += targets.numel()
                sums[row, 2] += self.token_bytes[targets].sum()
        return sums.flatten()

    def metrics(self, sums: torch.Tensor) -> dict[str, float]:
        metrics = {}
        for multiple, (loss_sum, tokens, text_bytes) in zip(self.eval_loaders, sums.view(-1, 3).tolist()):
            loss = loss_sum / max(tokens, 1)
            suffix = metric_suffix(multiple)
            metrics[f"eval_loss{suffix}"] = loss
            metrics[f"bits_per_byte{suffix}"] = loss_sum / max(text_bytes, 1) / math.log(2)
            metrics[f"perplexity{suffix}"] = math.exp(min(loss, 700.0))  # exp overflows a float past ~709
        return metrics

    def close(self) -> None:
        for loader in self.eval_loaders.values():
            close = getattr(loader, "close", None)
            if close is not None:
                close()


# ----------------------------------------------------------------------------------------
# From a configuration to the model, the training batches and the task
# ----------------------------------------------------------------------------------------


def prepare_text_data(config: TrainConfig, data: Path | None, *, progress: bool = True) -> Path:
    """The prepared token folder a run reads: ``data`` itself if prepared, else ``data``'s text (None: the
    standard library's) tokenized once into :func:`token_cache`, reused by later runs.

    The cache setting is checked either way, as every text command checks it (see :func:`token_cache`).
    """
    text, cache = config.text, token_cache()
    if data is not None and (data / META_FILE).is_file():
        meta = load_prepared(data).meta
        if meta["tokenizer"] != text.tokenizer or (text.tokenizer == "bpe" and meta["vocab_size"] != text.vocab_size):
            raise ValueError(f"--data {data} holds {meta['tokenizer']} tokens (vocabulary {meta['vocab_size']}), but "
                             f"the run asks for text.tokenizer={text.tokenizer!r} (text.vocab_size={text.vocab_size}); "
                             f"set those to match, or pass the text folder to tokenize it anew")
        return data
    vocab_size = text.vocab_size if text.tokenizer == "bpe" else None
    return prepared_tokens(data, cache, text.tokenizer, vocab_size, text.validation_every, progress=progress)


def check_text_size(config: TrainConfig, prepared: PreparedTokens, world_size: int) -> None:
    """Refuse, before any process starts work, prepared text a run cannot use: training text too short for a
    batch per process, or what :func:`check_evaluation_text` refuses."""
    TokenWindows(prepared.train, sequence_length=config.text.sequence_length, batch_size=config.data.batch_size,
                 seed=config.seed, world_size=world_size, name=_token_file(prepared, "train"))
    check_evaluation_text(config, prepared)


def check_evaluation_text(config: TrainConfig, prepared: PreparedTokens) -> None:
    """Refuse evaluation lengths without L (the run's metric is measured at L), and validation text
    shorter than one window of the longest length asked.

    >>> import numpy as np
    >>> from fastcore_ops.training.config import TextConfig
    >>> from fastcore_ops.training.text.tokenizers import ByteTokenizer
    >>> tokens = PreparedTokens(Path("tokens"), {}, np.zeros(0, np.uint16), np.zeros(40, np.uint16), ByteTokenizer())
    >>> check_evaluation_text(TrainConfig(text=TextConfig(sequence_length=16)), tokens)
    Traceback (most recent call last):
    ...
    ValueError: tokens/validation.bin holds 40 tokens, too few to evaluate one window of the longest length ...
    """
    text = config.text
    multiples = text.eval_length_multiples
    if 1 not in multiples:
        raise ValueError(f"text.eval_length_multiples={multiples} leaves out 1, the training length L, where the "
                         f"run's metric (eval_loss) is measured; add it: text.eval_length_multiples={(1, *multiples)}")
    longest = multiples[-1] * text.sequence_length
    count = prepared.validation.size
    if count <= longest:
        raise ValueError(f"{_token_file(prepared, 'validation')} holds {count} tokens, too few to evaluate one window "
                         f"of the longest length asked ({multiples[-1]}L = {longest} tokens, and the token after it): "
                         f"add validation text (more or longer files, or a smaller text.validation_every), or lower "
                         f"text.sequence_length or the largest of text.eval_length_multiples")


def _token_file(prepared: PreparedTokens, split: str) -> str:
    return str(prepared.folder / bin_file(split))


def tokens_record(meta: dict) -> dict:
    """What a run keeps in ``tokens.json`` of the prepared folder's checked ``meta``: which tokenizer made its tokens.

        >>> tokens_record({"tokenizer": "bytes", "vocab_size": 256, "tokenizer_fingerprint": "ab12", "dtype": "uint16"})
        {'tokenizer': 'bytes', 'vocab_size': 256, 'tokenizer_fingerprint': 'ab12'}
    """
    return {"tokenizer": meta["tokenizer"], "vocab_size": meta["vocab_size"],
            "tokenizer_fingerprint": meta["tokenizer_fingerprint"]}


def keep_run_tokenizer(out: Path, data: Path, record: dict, *, resume: bool, write: bool = True) -> None:
    """Save the tokenizer with a new run (``tokens.json``, and ``tokenizer.json`` for BPE); on resume,
    refuse tokens made by another tokenizer than the one the run was trained with.

    data: the prepared folder; record: its :func:`tokens_record`, as the data's check read it.
    write: whether this process writes (one of several torchrun processes does).
    """
    path = out / RUN_TOKENS_NAME
    if resume and path.is_file():
        saved = json.loads(path.read_text())
        if saved != record:
            raise ValueError(f"--resume: the run in {out} was trained with {saved['tokenizer']} tokens (vocabulary "
                             f"{saved['vocab_size']}, tokenizer {saved['tokenizer_fingerprint'][:12]}), but the data "
                             f"now gives {record['tokenizer']} tokens (vocabulary {record['vocab_size']}, tokenizer "
                             f"{record['tokenizer_fingerprint'][:12]}); resume with the same --data and text settings")
        return
    if not write:
        return
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n")
    if (data / BPE_FILE).is_file():
        shutil.copyfile(data / BPE_FILE, out / BPE_FILE)


def build_language_modeling(config: TrainConfig, plan: MethodPlan, *, data: Path, device: torch.device,
                            shard_evaluation: bool = True) -> tuple[nn.Module, TokenWindows, CausalLanguageModeling]:
    """(model with its surgeries, training batches, task) for a language-model ``config`` on prepared ``data``.

    plan: the run's methods (:func:`fastcore_ops.training.methods.registry.plan_methods`): its surgeries apply here.
    shard_evaluation: split the validation windows between processes (False: every process
    evaluates all of them, as a sharded model's collective forward passes need).
    """
    prepared: PreparedTokens = load_prepared(data)
    check_evaluation_text(config, prepared)
    text = config.text
    model = CausalLanguageModeling.build_model(config, prepared.vocab_size, plan.surgeries).to(device)
    rank, world_size = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
    train = TokenWindows(prepared.train, sequence_length=text.sequence_length, batch_size=config.data.batch_size,
                         seed=config.seed, rank=rank, world_size=world_size, device=device,
                         name=_token_file(prepared, "train"))
    # Validation runs at each length asked for that the model can run (learned positions stop at their table's end).
    limit = position_limit(model)
    runnable = [m for m in text.eval_length_multiples if limit is None or m * text.sequence_length <= limit]
    skipped = [m for m in text.eval_length_multiples if m not in runnable]
    if skipped:
        warnings.warn(f"text.eval_length_multiples {skipped} ask for {[m * text.sequence_length for m in skipped]} "
                      f"tokens, more than the model's learned positions cover ({limit}): not evaluated; the alibi "
                      f"surgery (methods.alibi={{}}) makes a model run any length", stacklevel=2)
    eval_rank, eval_world = (rank, world_size) if shard_evaluation else (0, 1)
    loaders = {}
    for multiple in runnable:
        length = multiple * text.sequence_length
        loaders[multiple] = TokenEvaluation(prepared.validation, sequence_length=length,
                                            batch_size=max(1, text.eval_batch_tokens // length), rank=eval_rank,
                                            world_size=eval_world, device=device)
    token_bytes = torch.as_tensor(prepared.tokenizer.token_byte_lengths())
    return model, train, CausalLanguageModeling(eval_loaders=loaders, token_bytes=token_bytes, device=device)
