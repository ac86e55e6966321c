"""A small GPT, nanoGPT-style: the whole model in one readable file.

Pre-norm decoder blocks, tied input/output embeddings, and one of two ways to tell the
model where tokens are: a learned position table (``position="learned"``, GPT-2's way,
limited to ``max_sequence_length`` tokens) or ALiBi biases inside attention
(``position="alibi"``, no table, any length). The ``alibi`` surgery turns a learned
model into an ALiBi one in place: this file registers how (``register_alibi_model``, the
library's hook for model classes it does not know).

    >>> model = GPT(GPTConfig(n_layer=2, n_head=4, n_embd=64, max_sequence_length=128))
    >>> idx = torch.randint(0, 256, (2, 32))
    >>> logits, loss = model(idx, targets=idx)
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from fastcore_ops.checks import check_int
from fastcore_ops.kernels.alibi import alibi_attention
from fastcore_ops.surgery.alibi import ALiBiPlanning, register_alibi_model

POSITIONS = ("learned", "alibi")


@dataclass
class GPTConfig:
    vocab_size: int = 256  # byte-level text: every byte is a token, so no tokenizer is needed
    # Learned positions: the number of rows of the position table, the longest input accepted.
    # ALiBi: not a limit (any length runs), only the length the model expects to see.
    max_sequence_length: int = 256
    # nanoGPT's character-level Shakespeare size (about 10M parameters): minutes on one GPU.
    n_layer: int = 6
    n_head: int = 6
    n_embd: int = 384
    dropout: float = 0.0  # small models on plenty of data rarely need it; try 0.1 when fine-tuning
    bias: bool = True  # biases in Linear and LayerNorm layers; False is a little faster and as good
    position: str = "learned"  # "learned" (a wpe table) or "alibi" (biases in attention, no table)

    def __post_init__(self):
        self.validate()

    def validate(self) -> None:
        for name in ("vocab_size", "max_sequence_length", "n_layer", "n_head", "n_embd"):
            check_int(f"GPTConfig.{name}", getattr(self, name), low=1)
        if self.n_embd % self.n_head:
            raise ValueError(
                f"GPTConfig.n_embd must be divisible by n_head, got n_embd={self.n_embd}, n_head={self.n_head}"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"GPTConfig.dropout must be in [0, 1), got {self.dropout!r}")
        if self.position not in POSITIONS:
            raise ValueError(f"GPTConfig.position must be 'learned' or 'alibi', got {self.position!r}")


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention through PyTorch's fused ``scaled_dot_product_attention``."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.n_head = config.n_head
        self.dropout = config.dropout
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)  # q, k, v in one matmul
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.resid_dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = (
            t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in self.c_attn(x).split(C, dim=2)
        )
        y = self.attend(q, k, v).transpose(1, 2).reshape(B, T, C)
        return self.resid_dropout(self.c_proj(y))

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """(B, H, T, D) queries, keys and values to the (B, H, T, D) attention output."""
        dropout = self.dropout if self.training else 0.0
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=True)


class ALiBiSelfAttention(CausalSelfAttention):
    """Causal self-attention with ALiBi biases (Press et al.), through the fastcore_ops kernel.

    The kernel never stores attention probabilities, so it has no attention dropout; the
    residual dropout after ``c_proj`` still applies.
    """

    def __init__(self, config: GPTConfig):
        super().__init__(config)
        if config.dropout > 0:
            warnings.warn(
                f"ALiBi attention does not apply attention dropout (dropout={config.dropout}): the kernel never "
                f"stores the probabilities; residual and embedding dropout still apply",
                stacklevel=2,
            )

    @classmethod
    def from_attention(cls, attention: CausalSelfAttention) -> "ALiBiSelfAttention":
        """The ALiBi form of ``attention``, holding its very Linear layers (no new parameters)."""
        config = GPTConfig(n_embd=attention.c_proj.in_features, n_head=attention.n_head, dropout=attention.dropout)
        with torch.device("meta"):  # throwaway layers, replaced just below: they cost nothing
            new = cls(config)
        new.c_attn, new.c_proj, new.resid_dropout = attention.c_attn, attention.c_proj, attention.resid_dropout
        new.training = attention.training
        return new

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        # The default slopes (alibi_slopes(n_head)): the kernel computes them in fp32 from the head index, so
        # model.half() cannot round them and no step copies them from the host.
        return alibi_attention(q, k, v, is_causal=True)


class MLP(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    """Pre-norm: x + attn(ln(x)), then x + mlp(ln(x)); the residual stream itself is never normalized."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
        attention = ALiBiSelfAttention if config.position == "alibi" else CausalSelfAttention
        self.attn = attention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """A decoder-only transformer language model.

    Example:
        >>> model = GPT(GPTConfig(n_layer=1, n_head=2, n_embd=32, max_sequence_length=16, position="alibi"))
        >>> tokens = torch.randint(0, 256, (1, 64))   # ALiBi runs past max_sequence_length
        >>> logits, loss = model(tokens, targets=tokens)
        >>> logits.shape
        torch.Size([1, 64, 256])
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        config.validate()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.max_sequence_length, config.n_embd) if config.position == "learned" else None
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        # Tied: the input embedding is the output projection (fewer parameters, better small models).
        self.lm_head.weight = self.wte.weight
        self.apply(self._init_weights)
        # GPT-2's scheme: the projections writing into the residual stream start smaller,
        # by 1/sqrt(2 * n_layer), so the stream's variance does not grow with depth.
        for name, parameter in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(parameter, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        """Logits (B, T, vocab_size) for token ids ``idx`` (B, T), and the mean cross-entropy
        against ``targets`` (B, T) if given (target -1 is ignored), else None."""
        if idx.dim() != 2:
            raise ValueError(f"idx must be a (batch, sequence) tensor of token ids, got shape {tuple(idx.shape)}")
        T = idx.shape[1]
        x = self.wte(idx)
        if self.wpe is not None:
            if T > self.wpe.num_embeddings:
                raise ValueError(
                    f"idx holds sequences of {T} tokens, but this model's learned positions cover at most "
                    f"max_sequence_length={self.wpe.num_embeddings}; pass shorter sequences, or use "
                    f"position='alibi' (or the 'alibi' surgery) to accept any length"
                )
            x = x + self.wpe(torch.arange(T, device=idx.device))
        x = self.drop(x)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-1)
        return logits, loss

    def num_parameters(self, non_embedding: bool = False) -> int:
        """Number of parameters (tied ones once); ``non_embedding`` leaves out the position table,
        as is customary, while the token embedding counts because it is also the output layer."""
        total = sum(p.numel() for p in self.parameters())
        if non_embedding and self.wpe is not None:
            total -= self.wpe.weight.numel()
        return total


def _plan_alibi(gpt: GPT, path: str, planning: ALiBiPlanning) -> None:
    """The ``alibi`` surgery on a GPT: what ``GPT(GPTConfig(position="alibi"))`` would have built.

    Each CausalSelfAttention becomes an ALiBiSelfAttention holding the same Linear layers, the
    position table goes, and the config says ``position="alibi"`` with a raised length.
    """
    config, options = gpt.config, planning.options
    prefix = f"{path}." if path else ""
    planning.check_heads(path, config.n_embd // config.n_head, gpt.wte.weight.dtype)
    # type() rather than isinstance: ALiBiSelfAttention is a CausalSelfAttention too.
    planning.replace_modules(gpt, path, lambda m: type(m) is CausalSelfAttention, ALiBiSelfAttention.from_attention,
                             skip=(ALiBiSelfAttention,))
    if gpt.wpe is not None:
        planning.remove_module(f"{prefix}wpe: removed (learned positions)", gpt, "wpe")
    if not planning.first_visit(config):
        return
    if config.position != "alibi":
        planning.set_attribute(f"{prefix}config: position {config.position!r} -> 'alibi'", config, "position", "alibi")
    if config.max_sequence_length < options.max_sequence_length:
        planning.set_attribute(
            f"{prefix}config: max_sequence_length {config.max_sequence_length} -> {options.max_sequence_length}",
            config, "max_sequence_length", options.max_sequence_length)


register_alibi_model(GPT, _plan_alibi, made=(ALiBiSelfAttention,))
