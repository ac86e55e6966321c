"""toy_task.py registers a task and a recipe as it loads, toy_method.py a method: only the commands the toy task's
tests start import them.

Collecting its docstrings (``--doctest-modules``) would import it into the test session, whose
registries would then hold the toy task, recipe and method beside the project's own.
"""

collect_ignore = ["toy_task.py", "toy_method.py"]
