"""The one rule of fastcore_ops.checks: TypeError for a wrong type, ValueError for a wrong value."""

import pytest
import torch

from fastcore_ops import checks


@pytest.mark.parametrize("check, value", [
    (lambda v: checks.check_int("n", v, low=1), True),
    (lambda v: checks.check_int("n", v, low=1), 2.0),
    (lambda v: checks.check_int("n", v, low=1), "2"),
    (lambda v: checks.check_number("p", v, low=0, high=1), None),
    (lambda v: checks.check_number("p", v, low=0, high=1), False),
    (lambda v: checks.check_bool("flag", v), 1),
    (lambda v: checks.check_interval("scale", v, high=1.0), 0.5),
    (lambda v: checks.check_interval("scale", v, high=1.0), ("a", 1.0)),
    (lambda v: checks.check_tensor("x", v), [1.0]),
    (lambda v: checks.check_tensor("x", v), torch.zeros(2, dtype=torch.int64)),
])
def test_a_wrong_type_is_a_type_error_naming_the_argument(check, value):
    with pytest.raises(TypeError, match=r"^(n|p|flag|scale|x) must be"):
        check(value)


@pytest.mark.parametrize("check, value", [
    (lambda v: checks.check_int("n", v, low=1), 0),
    (lambda v: checks.check_int("n", v, low=1, high=3), 4),
    (lambda v: checks.check_number("p", v, low=0, high=1), 1.5),
    (lambda v: checks.check_number("p", v, low=0, low_open=True), 0),
    (lambda v: checks.check_number("p", v, low=0, high=1, high_open=True), 1.0),
    (lambda v: checks.check_choice("backend", v, ("pil", "dali")), "opencv"),
    (lambda v: checks.check_interval("scale", v, high=1.0), (0.9, 0.1)),
    (lambda v: checks.check_interval("scale", v, high=1.0), (0.0, 0.5)),
    (lambda v: checks.check_interval("scale", v, high=1.0), (0.5, 1.5)),
    (lambda v: checks.check_tensor("x", v, ndim=4), torch.zeros(2, 3)),
])
def test_a_wrong_value_is_a_value_error_showing_the_value_and_what_is_accepted(check, value):
    with pytest.raises(ValueError, match=r"must (be|have) .*got"):
        check(value)


def test_accepted_values_come_back_normalized():
    assert checks.check_int("n", 3, low=1, high=3) == 3
    assert checks.check_number("p", 1, low=0, high=1) == 1.0
    assert isinstance(checks.check_number("p", 1, low=0, high=1), float)
    assert checks.check_interval("scale", [0.08, 1], high=1.0) == (0.08, 1.0)
    assert checks.check_bool("flag", None, allow_none=True) is None


def test_tensors_on_two_devices_are_named():
    with pytest.raises(ValueError, match="x on cpu, y on meta"):
        checks.check_same_device(x=torch.zeros(1), y=torch.zeros(1, device="meta"))
