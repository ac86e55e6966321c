"""How a metric's values are written, from its label and direction."""

import pytest

from fastcore_ops.training.tradeoff.metric import TOP1, Metric

LOSS = Metric("eval_loss", higher_is_better=False, label="validation loss (nats/token)")
PERPLEXITY = Metric("perplexity", higher_is_better=False, label="perplexity")


def test_the_label_splits_into_quantity_and_unit():
    assert (TOP1.quantity, TOP1.unit, TOP1.percent) == ("top-1", "%", True)
    assert (LOSS.quantity, LOSS.unit, LOSS.percent) == ("validation loss", "nats/token", False)
    assert (PERPLEXITY.quantity, PERPLEXITY.unit) == ("perplexity", "")


@pytest.mark.parametrize("metric, value, short, precise", [
    (TOP1, 0.85, "85.0%", "85.00%"),
    (LOSS, 1.2345, "1.23 nats/token", "1.234 nats/token"),
    (PERPLEXITY, 3.4172, "3.42", "3.417"),
])
def test_values_are_percent_only_for_a_percent_metric(metric, value, short, precise):
    assert metric.format(value) == short and metric.format(value, precise=True) == precise


@pytest.mark.parametrize("metric, gain, text", [
    (TOP1, 0.15, "+15.00"), (TOP1, -0.015, "-1.50"), (TOP1, 0.0, "+0.00"),
    (LOSS, 0.05, "lower by 0.050"), (LOSS, -0.2, "higher by 0.200"), (LOSS, 0.0, "unchanged"),
])
def test_a_gain_is_a_signed_number_when_higher_is_better_and_words_when_lower_is(metric, gain, text):
    assert metric.describe_gain(gain) == text


def test_gain_units_and_axis_labels():
    assert (TOP1.gain_unit, LOSS.gain_unit, PERPLEXITY.gain_unit) == ("pp", "nats/token", "")
    assert TOP1.axis_label == "top-1 (%)"
    assert LOSS.axis_label == "validation loss (nats/token), lower is better"


def test_a_direction_that_is_not_a_bool_is_refused():
    with pytest.raises(TypeError, match="higher_is_better must be True or False, got 0"):
        Metric("eval_loss", 0, "loss")
