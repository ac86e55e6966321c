"""A part that records a row, then never ends."""

import time


def run(mode, record):
    record.row(checked="before it hangs")
    while True:
        time.sleep(1)
