"""Low-precision LayerNorm and GroupNorm: the autocast dtype in and out, fp32 untouched, and a run that uses it."""

import copy

import torch
from torch import nn

from fastcore_ops.training.ablate.catalog import METHODS
from fastcore_ops.training.assemble import build_trainer
from fastcore_ops.training.config import override
from fastcore_ops.training.methods import low_precision_norms_
from fastcore_ops.training.methods.low_precision_norm import LowPrecisionGroupNorm, LowPrecisionLayerNorm
from fastcore_ops.training.recipes import get_recipe
from fastcore_ops.training.tasks.language import prepare_text_data
from tests.training.recipe_fingerprint import fingerprint


def _norms():
    return nn.Sequential(nn.Linear(16, 16), nn.LayerNorm(16), nn.Unflatten(1, (4, 4)), nn.GroupNorm(2, 4))


def test_the_norms_compute_in_bf16_under_autocast_within_bf16_of_fp32():
    # (CUDA's autocast runs both norms in fp32; the method is for it. A CPU's leaves them in the input's dtype.)
    torch.manual_seed(0)
    reference, inputs = _norms(), torch.randn(8, 16)
    for norm in (reference[1], reference[3]):
        nn.init.normal_(norm.weight), nn.init.normal_(norm.bias)
    low = copy.deepcopy(reference)
    assert low_precision_norms_(low) == 2
    assert (type(low[1]), type(low[3])) == (LowPrecisionLayerNorm, LowPrecisionGroupNorm)
    expected = reference(inputs)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = low(inputs)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), expected, atol=0.1, rtol=0.05)
    # Outside autocast nothing changes, bit for bit.
    assert torch.equal(low(inputs), reference(inputs))


def test_gradients_reach_the_same_parameters_and_the_state_dict_keeps_its_keys():
    model = _norms()
    parameters, keys = list(model.parameters()), list(model.state_dict())
    low_precision_norms_(model)
    assert list(model.parameters()) == parameters and list(model.state_dict()) == keys
    with torch.autocast("cpu", dtype=torch.bfloat16):
        model(torch.randn(4, 16)).float().square().sum().backward()
    assert all(parameter.grad is not None and parameter.grad.dtype == torch.float32 for parameter in parameters)


def test_subclasses_of_the_norms_are_left_alone():
    class OwnNorm(nn.LayerNorm):
        pass

    assert low_precision_norms_(nn.Sequential(OwnNorm(4))) == 0


def test_the_ablation_adds_it_to_a_gpt():
    assert METHODS["low_precision_norm"].toggle(get_recipe("gpt_baseline")) == (
        "added", ("methods.low_precision_norm={}",))


def test_a_bf16_gpt_run_trains_with_its_norms_in_bf16(micro_text):
    config = override(get_recipe("gpt_baseline"), [
        "methods.low_precision_norm={}", "precision=amp_bf16", "model.options={'n_layer': 1, 'n_head': 2, 'n_embd': 32}",
        "text.sequence_length=16", "text.eval_batch_tokens=256", "data.batch_size=8", "schedule.epochs=0.2"])
    data = prepare_text_data(config, micro_text, progress=False)
    trainer = build_trainer(config, data=data, out=None, device=torch.device("cpu"), progress=False)
    result = trainer.fit()
    norms = [module for module in trainer.model.modules() if isinstance(module, nn.LayerNorm)]
    assert norms and all(type(module) is LowPrecisionLayerNorm for module in norms)
    assert 0 < result.metrics["eval_loss"] < 6  # log(256) = 5.5 nats per byte is guessing


def test_in_fp32_a_run_with_it_trains_to_the_same_weights_as_without(micro_cifar, micro_text):
    # In fp32 autocast is off, so the method changes nothing: the whole run says so, bit for bit.
    assert fingerprint("gpt_baseline", micro_cifar, micro_text) == fingerprint(
        "gpt_baseline", micro_cifar, micro_text, extra=("methods.low_precision_norm={}",))
