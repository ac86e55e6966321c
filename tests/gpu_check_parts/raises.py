"""A part that records a row, then fails."""


def run(mode, record):
    record.row(checked="before the failure")
    raise RuntimeError("this part broke on purpose")
