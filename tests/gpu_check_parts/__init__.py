"""Stand-in parts of the GPU check, for its tests: one reports, one raises, one never ends."""
