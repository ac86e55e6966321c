"""toy_task.py registers a task and a recipe as it loads: only the commands the toy task's tests start import it.

Collecting its docstrings (``--doctest-modules``) would import it into the test session, whose
registries would then hold the toy task and recipe beside the project's own.
"""

collect_ignore = ["toy_task.py"]
