"""What a surgery did, as data and as a readable table."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Change:
    path: str
    old: str  # class names
    new: str


@dataclass
class SurgeryRecord:
    """One surgery's changes: modules swapped, model-wide steps, parameters added and removed, places skipped."""

    name: str
    changes: list[Change] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    parameters_added: int = 0  # elements, not tensors
    parameters_removed: int = 0
    note: str = ""
    skipped: list[str] = field(default_factory=list)  # paths found but left as they are; the note says why

    @property
    def nothing_found(self) -> bool:
        return not self.changes and not self.steps and not self.skipped and "already applied" not in self.note

    @classmethod
    def from_plan(cls, surgery, done, plan, removed, added) -> "SurgeryRecord":
        """The record of ``surgery`` (its name and description) having applied ``done`` of ``plan``."""
        record = cls(
            surgery.name,
            [Change(r.site.path, _class_name(r.site.module), type(r.new).__name__) for r in done],
            [step.description for step in plan.steps],
            sum(p.numel() for p, _ in added),
            sum(p.numel() for p in removed),
            skipped=[site.path for site in plan.skipped],
        )
        if plan.skipped:
            record.note = f"skipped {len(plan.skipped)} places: {plan.skip_reason}"
        elif not done and not plan.steps:
            record.note = (
                f"already applied: nothing left to change ({plan.already_applied} places operated earlier)"
                if plan.already_applied else
                f"found nothing to change in this model, which holds none of what it operates on: it would "
                f"{surgery.description}"
            )
        return record


def _class_name(module) -> str:
    return "None" if module is None else type(module).__name__  # None: an empty slot filled


@dataclass
class SurgeryReport:
    records: list[SurgeryRecord]

    def __getitem__(self, name: str) -> SurgeryRecord:
        for record in self.records:
            if record.name == name:
                return record
        raise KeyError(f"no surgery {name!r} in this report; it holds {[r.name for r in self.records]}")

    def __str__(self) -> str:
        lines = []
        for record in self.records:
            lines.append(
                f"{record.name}: {len(record.changes)} modules replaced, "
                f"+{record.parameters_added:,} / -{record.parameters_removed:,} parameters"
                + (f" ({record.note})" if record.note else "")
            )
            if record.changes:
                width = max(len(c.path) for c in record.changes)
                lines += [f"  {c.path.ljust(width)}  {c.old} -> {c.new}" for c in record.changes]
            lines += [f"  {step}" for step in record.steps]
            lines += [f"  {path}  skipped" for path in record.skipped]
        return "\n".join(lines)
