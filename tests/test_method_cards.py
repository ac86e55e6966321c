"""docs/methods/ is what tools/method_cards.py writes from the code and the committed ablation."""

import csv

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


def test_a_card_lists_every_ablation_that_measured_it_and_its_change_with_tta_where_the_table_has_it(
        tmp_path, monkeypatch):
    """The record's ablation (with its column of the change with TTA) joins the older ResNet-20 one, not replaces it."""
    quality, tta = "top-1 change (points, + is better)", "top-1 change with test-time augmentation (points, + is better)"
    old_header = ["machine", "variant", "budget", quality, "per seed", "time per step change (%)",
                  "speedup at the base's top-1", "runs left out"]
    new_header = [*old_header[:5], tta, *old_header[5:]]
    ablations = []
    for folder, header, row in (("record-20261204", new_header, ["vm/cpu", "rec+ema", "x1", "-0.61", "-0.61", "-0.84",
                                                                 "+1.0", "", ""]),
                                ("flips-20261124", old_header, ["vm/cpu", "base+ema", "x0.5", "+0.20", "+0.10, +0.30",
                                                                "+2.0", "", ""])):
        table = tmp_path / folder / "ablation.csv"
        table.parent.mkdir()
        with open(table, "w", newline="") as file:
            csv.writer(file).writerows([header, row])
        ablations.append(method_cards.Ablation(table, folder))
    monkeypatch.setattr(method_cards, "committed_ablations", lambda: ablations)
    monkeypatch.setattr(method_cards, "ROOT", tmp_path)
    text = method_cards._measured_text("ema")
    assert text.index("record-20261204") < text.index("flips-20261124")
    assert ("rec+ema at x1 on vm/cpu: top-1 change (points, + is better) -0.61 (per seed -0.61); top-1 change with "
            "test-time augmentation (points, + is better) -0.84; time per step +1.0%") in text
    assert "base+ema at x0.5 on vm/cpu: top-1 change (points, + is better) +0.20 (per seed +0.10, +0.30); time per step +2.0%" in text
