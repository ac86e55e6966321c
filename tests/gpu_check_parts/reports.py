"""A part that records one row and one note."""


def run(mode, record):
    record.row(checked="a row", small=mode.small)
    record.note("A note under the table.")
