"""The one wall-clock limit the suite sets: how long a child process or a wait may take before the test calls it
hung. No test's pass depends on how fast the machine is (a slow CPU, a busy box); this only ends a real hang
before pytest-timeout's own guard (pytest.ini) does, with the test's own message.

    >>> HANG_GUARD_S >= 10 * 60
    True
"""

# Some ten times the slowest child the suite starts on an idle AVX2 CPU (a recipe fingerprint, 1-2 minutes).
HANG_GUARD_S = 900
