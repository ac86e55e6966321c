"""The alibi surgery on transformers GPT-2 (built from a config) and on the project's GPT.

Tests about the attention's numbers run the Triton kernel through the interpreter; the
others use the ``reference_kernels`` fixture (the kernel's PyTorch reference) for speed.
"""

import copy
import io
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn
from transformers import GPT2Config, GPT2LMHeadModel

from fastcore_ops import apply_surgery
from fastcore_ops.kernels.alibi import alibi_attention_reference, alibi_slopes
from fastcore_ops.surgery import alibi as alibi_surgery
from fastcore_ops.surgery import apply_alibi
from fastcore_ops.surgery.alibi import ATTENTION_NAME, ZeroPositionEmbedding
from fastcore_ops.training.models.gpt import GPT, ALiBiSelfAttention, CausalSelfAttention, GPTConfig
from tests.hang_guard import HANG_GUARD_S

N_POSITIONS = 32  # what the models are built for; tests run longer sequences after surgery
VOCAB = 256


def tiny_gpt2(seed: int = 0, **overrides) -> GPT2LMHeadModel:
    torch.manual_seed(seed)
    settings = dict(
        n_layer=2, n_head=4, n_embd=64, n_positions=N_POSITIONS, vocab_size=VOCAB,
        bos_token_id=None, eos_token_id=None,  # GPT-2's 50256 is outside this small vocabulary
        attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0,  # deterministic training steps
    ) | overrides
    return GPT2LMHeadModel(GPT2Config(**settings))


def tiny_gpt(seed: int = 0, **overrides) -> GPT:
    torch.manual_seed(seed)
    return GPT(GPTConfig(**(dict(n_layer=2, n_head=4, n_embd=64, max_sequence_length=N_POSITIONS) | overrides)))


def logits_of(model, idx):
    """The (B, T, vocab) logits of either kind of model."""
    if isinstance(model, GPT):
        return model(idx)[0]
    return model(idx, use_cache=False).logits


def loss_of(model, idx):
    if isinstance(model, GPT):
        return model(idx[:, :-1], targets=idx[:, 1:])[1]
    return model(idx, labels=idx, use_cache=False).loss


def tokens(batch: int = 2, length: int = 48, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


BUILDERS = {"gpt2": tiny_gpt2, "gpt": tiny_gpt}


def _config_values(model) -> dict:
    if isinstance(model, GPT):
        return {"position": model.config.position, "max_sequence_length": model.config.max_sequence_length}
    return {"attn": model.config._attn_implementation, "n_positions": model.config.n_positions}


def _snapshot(model, optimizer=None):
    structure = [(name, type(m)) for name, m in model.named_modules()]
    state = {k: v.clone() for k, v in model.state_dict().items()}
    configs = [_config_values(m) for m in model.modules() if isinstance(m, (GPT, GPT2LMHeadModel))]
    groups = None
    if optimizer is not None:
        groups = [[id(p) for p in g["params"]] for g in optimizer.param_groups], set(map(id, optimizer.state))
    return structure, state, configs, groups


def _assert_unchanged(before, model, optimizer=None):
    structure, state, configs, groups = before
    assert [(name, type(m)) for name, m in model.named_modules()] == structure
    after = model.state_dict()
    assert after.keys() == state.keys()
    for key in state:
        torch.testing.assert_close(after[key], state[key])
    assert [_config_values(m) for m in model.modules() if isinstance(m, (GPT, GPT2LMHeadModel))] == configs
    if optimizer is not None:
        assert ([[id(p) for p in g["params"]] for g in optimizer.param_groups], set(map(id, optimizer.state))) == groups


def _alibi_bias_mask(batch: int, heads: int, length: int) -> torch.Tensor:
    """The additive (B, H, T, T) ALiBi bias with the causal mask, for transformers' eager attention."""
    distance = torch.arange(length)[:, None] - torch.arange(length)[None, :]
    bias = -alibi_slopes(heads)[:, None, None] * distance.float()
    bias = bias.masked_fill(distance < 0, float("-inf"))
    return bias.expand(batch, heads, length, length)


# ----------------------------------------------------------------------------------------
# What the surgery does
# ----------------------------------------------------------------------------------------


def test_gpt2_report_counts_and_configuration(reference_kernels):
    model = tiny_gpt2()
    wpe = model.transformer.wpe
    report = apply_alibi(model)
    record = report["alibi"]
    assert [(c.path, c.old, c.new) for c in record.changes] == [
        ("transformer.wpe", "Embedding", "ZeroPositionEmbedding")]
    assert record.parameters_removed == wpe.weight.numel() == N_POSITIONS * 64
    assert record.parameters_added == 0
    assert record.steps == [
        "transformer.config: attention implementation 'sdpa' -> 'fastcore_alibi'",
        "transformer.config: n_positions 32 -> 8192",
    ]
    assert model.config._attn_implementation == ATTENTION_NAME and model.config.n_positions == 8192
    assert isinstance(model.transformer.wpe, ZeroPositionEmbedding)
    assert list(model.transformer.wpe.parameters()) == []
    assert not any("wpe" in name for name in model.state_dict())
    # Zeros of the right shape and dtype for any position ids, past the old table too.
    zeros = model.transformer.wpe(torch.arange(100).expand(3, -1))
    assert zeros.shape == (3, 100, 64) and zeros.dtype == torch.float32 and not zeros.any()
    assert model.half().transformer.wpe(torch.arange(4)).dtype == torch.float16
    assert "1 modules replaced" in str(report)


def test_gpt_report_counts_and_configuration(reference_kernels):
    model = tiny_gpt()
    wpe_elements = model.wpe.weight.numel()
    attention_layers = [b.attn for b in model.blocks]
    report = apply_alibi(model, max_sequence_length=4096)
    record = report["alibi"]
    assert [(c.path, c.old, c.new) for c in record.changes] == [
        (f"blocks.{i}.attn", "CausalSelfAttention", "ALiBiSelfAttention") for i in range(2)]
    assert record.parameters_removed == wpe_elements == N_POSITIONS * 64
    assert record.parameters_added == 0  # the ALiBi layers hold the very same Linear layers
    assert record.steps == [
        "wpe: removed (learned positions)",
        "config: position 'learned' -> 'alibi'",
        "config: max_sequence_length 32 -> 4096",
    ]
    for old, block in zip(attention_layers, model.blocks):
        assert type(block.attn) is ALiBiSelfAttention
        assert block.attn.c_attn is old.c_attn and block.attn.c_proj is old.c_proj
    assert model.wpe is None and model.config.position == "alibi" and model.config.max_sequence_length == 4096
    # The operated model is what GPTConfig(position="alibi") builds: same state_dict keys.
    native = tiny_gpt(position="alibi")
    assert model.state_dict().keys() == native.state_dict().keys()


@pytest.mark.parametrize("kind", BUILDERS)
def test_output_shape_unchanged_and_longer_sequences_run(kind, reference_kernels):
    model = BUILDERS[kind]().eval()
    idx = tokens(length=N_POSITIONS)
    before = logits_of(model, idx).shape
    with pytest.raises((ValueError, IndexError)):  # learned positions end at N_POSITIONS
        logits_of(model, tokens(length=N_POSITIONS + 16))
    apply_alibi(model)
    assert logits_of(model, idx).shape == before == (2, N_POSITIONS, VOCAB)
    longer = logits_of(model, tokens(length=3 * N_POSITIONS))
    assert longer.shape == (2, 3 * N_POSITIONS, VOCAB) and torch.isfinite(longer).all()


def test_gpt2_output_equals_eager_attention_with_the_alibi_bias():
    """Through the Triton kernel (interpreted), against transformers' own eager attention
    given the ALiBi bias as an additive 4-D mask, on a copy whose position table is zero."""
    model = tiny_gpt2().eval()
    reference = copy.deepcopy(model)
    with torch.no_grad():
        reference.transformer.wpe.weight.zero_()
    reference.set_attn_implementation("eager")
    apply_alibi(model)
    idx = tokens(length=N_POSITIONS + 16)  # longer than the table: the reference reads its (zero) row 0
    expected = reference(idx, attention_mask=_alibi_bias_mask(2, 4, idx.shape[1]),
                         position_ids=torch.zeros_like(idx), use_cache=False).logits
    torch.testing.assert_close(logits_of(model, idx), expected, atol=1e-4, rtol=1e-4)


def _manual_gpt_forward(model: GPT, idx: torch.Tensor) -> torch.Tensor:
    """The operated GPT's logits, written out with the ALiBi reference attention."""
    x = model.wte(idx)
    B, T, C = x.shape
    for block in model.blocks:
        q, k, v = block.attn.c_attn(block.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, 4, C // 4).transpose(1, 2) for t in (q, k, v))
        y = alibi_attention_reference(q, k, v, is_causal=True, slopes=alibi_slopes(4))
        x = x + block.attn.c_proj(y.transpose(1, 2).reshape(B, T, C))
        x = x + block.mlp(block.ln_2(x))
    return model.lm_head(model.ln_f(x))


def test_gpt_output_equals_a_manual_alibi_computation():
    """Through the Triton kernel (interpreted): one layer and the whole model."""
    model = tiny_gpt().eval()
    apply_alibi(model)
    idx = tokens(length=N_POSITIONS + 16)
    q, k, v = (torch.randn(2, 4, 40, 16, generator=torch.Generator().manual_seed(i)) for i in range(3))
    torch.testing.assert_close(model.blocks[0].attn.attend(q, k, v), alibi_attention_reference(q, k, v, is_causal=True),
                               atol=1e-5, rtol=1e-5)
    with torch.no_grad():
        torch.testing.assert_close(logits_of(model, idx), _manual_gpt_forward(model, idx), atol=1e-4, rtol=1e-4)


def test_gpt2_decoding_with_a_cache_matches_the_full_sequence(reference_kernels):
    """Queries are aligned to the end of the cached keys, as the kernel assumes."""
    model = tiny_gpt2().eval()
    apply_alibi(model)
    idx = tokens(length=N_POSITIONS + 8)
    full = model(idx, use_cache=False).logits
    prefix = model(idx[:, :-1], use_cache=True)
    step = model(idx[:, -1:], past_key_values=prefix.past_key_values, use_cache=True).logits
    torch.testing.assert_close(step[:, -1], full[:, -1], atol=1e-5, rtol=1e-5)


# ----------------------------------------------------------------------------------------
# Training, optimizers, checkpoints, compile and export
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", BUILDERS)
def test_optimizer_loses_wpe_and_training_lowers_the_loss(kind, reference_kernels):
    model = BUILDERS[kind]().train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    idx = tokens(length=24)
    loss_of(model, idx).backward()
    optimizer.step()  # wpe now has AdamW state, which must go with it
    wpe = model.transformer.wpe.weight if kind == "gpt2" else model.wpe.weight
    assert wpe in optimizer.state

    apply_alibi(model, optimizer)

    held = sorted(id(p) for group in optimizer.param_groups for p in group["params"])
    assert held == sorted(id(p) for p in model.parameters() if p.requires_grad)
    assert id(wpe) not in held and wpe not in optimizer.state
    idx = tokens(length=2 * N_POSITIONS)  # longer than the model was built for
    losses = []
    for _ in range(3):
        optimizer.zero_grad()
        loss = loss_of(model, idx)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0], losses


@pytest.mark.parametrize("kind", BUILDERS)
def test_state_dict_round_trips_into_a_model_with_the_same_surgery(kind, reference_kernels):
    model = BUILDERS[kind]().eval()
    apply_alibi(model)
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    fresh = BUILDERS[kind](seed=1).eval()
    apply_alibi(fresh)
    fresh.load_state_dict(torch.load(io.BytesIO(buffer.getvalue())))  # strict: same keys on both sides
    idx = tokens(length=N_POSITIONS + 8)
    torch.testing.assert_close(logits_of(fresh, idx), logits_of(model, idx))


def test_compile_and_export_run_on_the_operated_gpt():
    """Through the Triton kernel's custom op (interpreted), which compile and export keep opaque."""
    model = tiny_gpt().eval()
    apply_alibi(model)
    idx = tokens(length=N_POSITIONS + 8)
    expected = logits_of(model, idx)
    torch.testing.assert_close(torch.compile(model, backend="aot_eager")(idx)[0], expected)
    exported = torch.export.export(model, (idx,))
    graph = str(exported.graph)
    assert "fastcore_ops.alibi_attention" in graph
    torch.testing.assert_close(exported.module()(idx)[0], expected)


def test_compile_and_export_run_on_the_operated_gpt2(reference_kernels):
    """transformers allows exporting GPT-2 without a cache: with use_cache=True (its default)
    the output holds a DynamicCache, which torch.export cannot return (no pytree for it), with
    or without this surgery, so the export is of use_cache=False, as training runs."""
    model = tiny_gpt2().eval()
    apply_alibi(model)
    idx = tokens(length=N_POSITIONS + 8)
    expected = logits_of(model, idx)
    compiled = torch.compile(model, backend="aot_eager")
    torch.testing.assert_close(compiled(idx, use_cache=False).logits, expected)
    exported = torch.export.export(model, (idx,), kwargs={"use_cache": False})
    torch.testing.assert_close(exported.module()(idx, use_cache=False).logits, expected)
    # The mask check compiled into the graph still refuses padding at run time.
    padded = torch.ones_like(idx)
    padded[:, :3] = 0
    with pytest.raises(RuntimeError, match="plain causal attention only"):
        compiled(idx, attention_mask=padded, use_cache=False)


# ----------------------------------------------------------------------------------------
# Masks, dropout, idempotence, rollback, validation
# ----------------------------------------------------------------------------------------


def test_gpt2_refuses_padding_and_custom_masks_but_accepts_all_ones(reference_kernels):
    model = tiny_gpt2().eval()
    apply_alibi(model)
    idx = tokens(length=N_POSITIONS)
    padded = torch.ones_like(idx)
    padded[0, :5] = 0
    with pytest.raises(ValueError, match=r"plain causal attention only.*attention mask of shape \(2, 1, 32, 32\)"):
        model(idx, attention_mask=padded, use_cache=False)
    with pytest.raises(ValueError, match="plain causal attention only"):
        model(idx, attention_mask=_alibi_bias_mask(2, 4, N_POSITIONS), use_cache=False)
    packed = torch.cat([torch.arange(16), torch.arange(16)]).expand(2, -1)  # two sequences in each row
    with pytest.raises(ValueError, match="plain causal attention only"):
        model(idx, position_ids=packed, use_cache=False)
    torch.testing.assert_close(model(idx, attention_mask=torch.ones_like(idx), use_cache=False).logits,
                               logits_of(model, idx))


def test_gpt2_attention_dropout_warns_once_in_training(reference_kernels, monkeypatch):
    monkeypatch.setattr(alibi_surgery, "_warned_about_dropout", False)
    model = tiny_gpt2(attn_pdrop=0.1)
    apply_alibi(model)
    idx = tokens(length=16)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.eval()(idx, use_cache=False)  # no dropout in eval: nothing to say
        assert not caught
        model.train()
        model(idx, use_cache=False)
        model(idx, use_cache=False)
    assert [str(w.message) for w in caught] == [
        "ALiBi attention does not apply attention dropout (attn_pdrop=0.1): the kernel never stores the attention "
        "probabilities; residual and embedding dropout still apply"]


@pytest.mark.parametrize("kind", BUILDERS)
def test_second_application_changes_nothing_and_says_so(kind, reference_kernels):
    model = BUILDERS[kind]()
    apply_alibi(model)
    before = _snapshot(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # having nothing left to do is not something to warn about
        record = apply_alibi(model)["alibi"]
    _assert_unchanged(before, model)
    assert not record.changes and not record.steps and "already applied" in record.note


def test_failure_midway_puts_everything_back(failing_surgery):
    """Both kinds of GPT in one model, operated by alibi, then a surgery that fails: all undone."""
    model = nn.ModuleDict({"hf": tiny_gpt2(), "own": tiny_gpt()})
    optimizer = torch.optim.AdamW(model.parameters())
    idx = tokens(length=16)
    (loss_of(model["hf"], idx) + loss_of(model["own"], idx)).backward()
    optimizer.step()  # AdamW state exists (for both wpe tables too) and must survive
    before = _snapshot(model, optimizer)
    with pytest.raises(RuntimeError, match="planned failure"):
        apply_surgery(model, ["alibi", failing_surgery], optimizer)
    _assert_unchanged(before, model, optimizer)
    assert model["hf"].config._attn_implementation == "sdpa" and model["hf"].config.n_positions == N_POSITIONS
    assert type(model["own"].blocks[0].attn) is CausalSelfAttention and model["own"].wpe is not None

    # And the same model operated for real: both GPTs in one call.
    record = apply_surgery(model, ["alibi"], optimizer)["alibi"]
    assert len(record.changes) == 3 and len(record.steps) == 5


def test_nothing_gpt_like_warns_and_reports():
    model = nn.Sequential(nn.Embedding(10, 8), nn.Linear(8, 8))
    with pytest.warns(UserWarning, match="'alibi': found nothing to change"):
        report = apply_alibi(model)
    assert "found nothing to change" in str(report)


def test_bad_options_and_unsupported_models_are_refused_before_anything_changes():
    with pytest.raises(ValueError, match="max_sequence_length must be an int >= 1, got 0"):
        apply_alibi(tiny_gpt(), max_sequence_length=0)
    with pytest.raises(TypeError, match="option 'max_sequence_length' of surgery 'alibi' must be an int, got float"):
        apply_alibi(tiny_gpt(), max_sequence_length=8192.0)
    for model, match in [
        (tiny_gpt(n_embd=32, n_head=4), "cannot operate on the model: the Triton kernel takes a head dim D .* got 8"),
        (tiny_gpt2(n_embd=32, n_head=4), "cannot operate on transformer: the Triton kernel takes a head dim D .* got 8"),
        (tiny_gpt2(add_cross_attention=True), "transformer has add_cross_attention=True"),
    ]:
        before = _snapshot(model)
        with pytest.raises(ValueError, match=match):
            apply_alibi(model)
        _assert_unchanged(before, model)


def _run_python(script: str) -> str:
    """What ``script`` prints, run in a fresh interpreter from the project's root."""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=HANG_GUARD_S,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_library_does_not_import_transformers():
    """The surgery on the project's GPT runs, and fastcore_ops imports, without transformers."""
    script = (
        "import sys; sys.modules['transformers'] = None\n"  # any import of transformers now fails
        "import fastcore_ops\n"
        "from fastcore_ops.training.models.gpt import GPT, GPTConfig\n"
        "model = GPT(GPTConfig(n_layer=1, n_head=2, n_embd=32))\n"
        "print(len(fastcore_ops.apply_surgery(model, ['alibi'])['alibi'].changes))\n"
    )
    assert _run_python(script).strip() == "1"


def test_the_library_never_imports_training_and_operates_a_gpt_only_once_it_registered_itself():
    """fastcore_ops reaches the project's GPT through register_alibi_model, not through sys.modules."""
    script = (
        "import sys, fastcore_ops, torch\n"
        "from fastcore_ops.surgery import alibi\n"
        "assert not any(name.startswith('fastcore_ops.training') for name in sys.modules)\n"
        "from fastcore_ops.training.models.gpt import GPT, GPTConfig\n"
        "assert GPT in alibi._REGISTERED\n"
        "model = GPT(GPTConfig(n_layer=1, n_head=2, n_embd=32))\n"
        "print(model.wpe is not None, len(fastcore_ops.apply_surgery(model, ['alibi'])['alibi'].changes), model.wpe)\n"
    )
    assert _run_python(script).split() == ["True", "1", "None"]
    library = Path(alibi_surgery.__file__).parent.parent
    sources = [path for path in library.rglob("*.py") if not path.is_relative_to(library / "training")]
    assert not [path for path in sources if "fastcore_ops.training.models" in path.read_text()]


def test_registering_something_that_is_not_a_module_class_is_refused():
    with pytest.raises(TypeError, match="model_class must be an nn.Module subclass"):
        alibi_surgery.register_alibi_model(GPTConfig, lambda *args: None)
    with pytest.raises(TypeError, match="planner must be callable"):
        alibi_surgery.register_alibi_model(GPT, "plan")
