"""docs/methods/ is what tools/method_cards.py writes from the code and the committed ablation."""

from fastcore_ops.training.ablate.catalog import METHODS
from tests.tool_module import load_tool

method_cards = load_tool("method_cards")


def test_every_card_is_what_its_sources_give():
    assert method_cards.main(["--check"]) == 0


def test_every_method_the_ablation_knows_has_a_card_with_what_when_and_cost():
    assert set(METHODS) <= set(method_cards.sources())
    for name, source in method_cards.sources().items():
        title, fields = method_cards.card_section(source)
        labels = [label.split(" ")[0] for label, _ in fields]
        assert title and "What" in labels and "When" in labels, name
        assert "Cost" in labels or any("cost" in text.lower() for _, text in fields), name
