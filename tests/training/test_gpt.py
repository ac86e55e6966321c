"""The project's small GPT: shapes, loss, training, length limits, attention, compile and export.

ALiBi models run the Triton kernel through the interpreter (tests/conftest.py), so models
are tiny: 2 layers, 4 heads of 16, sequences of at most 48 tokens.
"""

import math

import pytest
import torch
from torch.nn import functional as F

from fastcore_ops.kernels import backend
from fastcore_ops.kernels.alibi import alibi_attention_reference
from fastcore_ops.training.models.gpt import GPT, ALiBiSelfAttention, CausalSelfAttention, GPTConfig

POSITIONS = ["learned", "alibi"]


@pytest.fixture
def reference_kernels(monkeypatch):
    """ALiBi through its PyTorch reference: for tests about the model, not the kernel."""
    monkeypatch.setattr(backend, "INTERPRETING", False)


def tiny(position: str = "learned", seed: int = 0, **overrides) -> GPT:
    torch.manual_seed(seed)
    settings = dict(n_layer=2, n_head=4, n_embd=64, max_sequence_length=32, position=position) | overrides
    return GPT(GPTConfig(**settings))


def tokens(batch: int = 2, length: int = 32, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 256, (batch, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("position", POSITIONS)
def test_forward_shapes_and_loss(position):
    model = tiny(position)
    idx = tokens()
    logits, loss = model(idx)
    assert logits.shape == (2, 32, 256) and loss is None
    targets = tokens(seed=1)  # not idx itself: tied embeddings favour predicting the input token
    logits, loss = model(idx, targets=targets)
    assert loss.shape == () and torch.isfinite(loss)
    # Small initial weights: predictions start near uniform over the 256 bytes.
    assert loss.item() == pytest.approx(math.log(256), abs=0.2)
    # Target -1 is ignored.
    targets[:, :16] = -1
    _, partial = model(idx, targets=targets)
    expected = F.cross_entropy(logits[:, 16:].flatten(0, 1), targets[:, 16:].flatten())
    torch.testing.assert_close(partial, expected)


def test_structure_tied_embeddings_and_parameter_count():
    learned, alibi = tiny("learned"), tiny("alibi")
    assert learned.lm_head.weight is learned.wte.weight
    assert all(type(b.attn) is CausalSelfAttention for b in learned.blocks)
    assert all(type(b.attn) is ALiBiSelfAttention for b in alibi.blocks)
    assert alibi.wpe is None and learned.wpe.weight.shape == (32, 64)
    unique = {id(p): p.numel() for p in learned.parameters()}
    assert learned.num_parameters() == sum(unique.values())
    assert learned.num_parameters(non_embedding=True) == learned.num_parameters() - 32 * 64
    # The ALiBi model is the same model without the position table.
    assert alibi.num_parameters() == learned.num_parameters() - 32 * 64 == alibi.num_parameters(non_embedding=True)
    assert "wpe.weight" not in alibi.state_dict()


@pytest.mark.parametrize(
    "settings,match",
    [
        (dict(position="rope"), "position must be 'learned' or 'alibi', got 'rope'"),
        (dict(n_embd=60, n_head=8), "n_embd must be divisible by n_head, got n_embd=60, n_head=8"),
        (dict(dropout=1.0), r"dropout must be in \[0, 1\), got 1.0"),
        (dict(n_layer=0), "n_layer must be an int >= 1, got 0"),
        (dict(vocab_size=256.0), "vocab_size must be an int >= 1, got float 256.0"),
    ],
)
def test_bad_configs_are_refused(settings, match):
    error = TypeError if "float" in match else ValueError
    with pytest.raises(error, match=match):
        GPTConfig(**settings)


def test_learned_positions_refuse_longer_sequences():
    model = tiny("learned")
    with pytest.raises(ValueError, match="sequences of 33 tokens.*max_sequence_length=32.*position='alibi'"):
        model(tokens(length=33))
    with pytest.raises(ValueError, match=r"idx must be a \(batch, sequence\) tensor"):
        model(tokens()[0])


def test_alibi_runs_beyond_its_build_length_and_stays_causal():
    model = tiny("alibi", max_sequence_length=16).eval()
    idx = tokens(length=48)
    logits, _ = model(idx)
    assert logits.shape == (2, 48, 256) and torch.isfinite(logits).all()
    # Changing the last tokens changes nothing before them.
    changed = idx.clone()
    changed[:, 40:] = (changed[:, 40:] + 1) % 256
    torch.testing.assert_close(model(changed)[0][:, :40], logits[:, :40])
    assert not torch.allclose(model(changed)[0][:, 40:], logits[:, 40:])


@pytest.mark.parametrize("position", POSITIONS)
def test_attention_matches_a_reference_computation(position):
    model = tiny(position).eval()
    attention = model.blocks[0].attn
    q, k, v = (torch.randn(2, 4, 40, 16, generator=torch.Generator().manual_seed(i)) for i in range(3))
    if position == "alibi":
        expected = alibi_attention_reference(q, k, v, is_causal=True)  # slopes alibi_slopes(4), scale 1/sqrt(16)
    else:
        scores = (q @ k.transpose(-1, -2)) / 4.0
        scores = scores.masked_fill(torch.ones(40, 40, dtype=torch.bool).triu(1), float("-inf"))
        expected = scores.softmax(-1) @ v
    torch.testing.assert_close(attention.attend(q, k, v), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("position", POSITIONS)
def test_adamw_steps_lower_the_loss(position):
    model = tiny(position).train()
    idx = tokens(length=24)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(4):
        optimizer.zero_grad()
        _, loss = model(idx[:, :-1], targets=idx[:, 1:])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 0.05, losses


@pytest.mark.parametrize("position", POSITIONS)
def test_compile_and_export(position):
    model = tiny(position).eval()
    idx = tokens(length=32)
    expected, _ = model(idx)
    compiled = torch.compile(model, backend="aot_eager")
    torch.testing.assert_close(compiled(idx)[0], expected)
    exported = torch.export.export(model, (idx,))
    torch.testing.assert_close(exported.module()(idx)[0], expected)


def test_alibi_training_with_dropout_warns_that_attention_dropout_is_skipped(reference_kernels):
    with pytest.warns(UserWarning, match="does not apply attention dropout"):
        model = tiny("alibi", dropout=0.1)
    model.train()
    torch.manual_seed(0)
    first, _ = model(tokens())
    second, _ = model(tokens())
    assert not torch.equal(first, second)  # residual and embedding dropout still apply
