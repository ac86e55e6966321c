"""``python -m fastcore_ops.training.recipes show NAME``: a recipe as it trains, and what it changes from its parent.

    python -m fastcore_ops.training.recipes show cifar_hot

Prints the recipe's line of parents, its configuration with all their changes applied (as a run's
``config.json`` holds it), and each field it sets otherwise than its parent does (a root recipe:
otherwise than the defaults), as ``section.field: parent's value -> its value`` by the names
``--set`` takes. A name that is not a recipe is refused (exit 2) with the closest names.
"""

from __future__ import annotations

import json
import sys

from fastcore_ops import cli
from fastcore_ops.training.plugins import add_import_option, import_modules
from fastcore_ops.training.recipes import get_recipe, list_recipes, recipe_parent


def build_parser() -> cli.ArgumentParser:
    """The command line of ``python -m fastcore_ops.training.recipes``."""
    parser = cli.ArgumentParser(prog="python -m fastcore_ops.training.recipes", description=cli.description(__doc__))
    parser.add_argument("command", choices=["show"], help="show: print the recipe's configuration and its changes")
    parser.add_argument("name", metavar="NAME", help="the recipe, as --recipe names it (cifar_mild, ...)")
    add_import_option(parser)
    return parser


def show(name: str) -> str:
    """What ``show NAME`` prints: the line of parents, the resolved configuration and the changes (pytest does not
    run a ``__main__.py``'s examples: tests/training/test_recipe_show.py holds them)."""
    from fastcore_ops.training.config import TrainConfig, differences, to_dict  # torch: after parsing

    config, parent = get_recipe(name), recipe_parent(name)
    line = [name]
    while recipe_parent(line[0]) is not None:
        line.insert(0, recipe_parent(line[0]))
    base = get_recipe(parent) if parent else TrainConfig()
    changes = [f"  {field}: {old!r} -> {new!r}" for field, old, new in differences(base, config) if field != "name"]
    return "\n".join([f"recipe {' > '.join(line)}", json.dumps(to_dict(config), indent=2),
                      f"changes from {parent or 'the defaults (a root recipe)'}:", *changes])


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        import_modules(args.imports)
        cli.check_name(args.command, args.name, list_recipes(), "recipe")
        text = show(args.name)
    except cli.REFUSALS as error:
        return cli.refuse(error)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
