"""Small text corpora written into tmp_path: the token data's tests never read the standard library."""

import random

import pytest

WORDS = ("the", "cat", "sat", "on", "a", "mat", "def", "return", "value", "token", "window", "batch", "naïve",
         "café", "über", "日本", "🙂", "(x)", "[1, 2]", "\n", "    ", "\t")


def write_tree(root, files: dict[str, bytes]):
    """Write ``{relative path: bytes}`` under ``root`` and return ``root``."""
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return root


def sample_text(seed: int, words: int) -> str:
    """Words of several scripts (multi-byte UTF-8 included), the same for the same seed."""
    draw = random.Random(seed)
    return " ".join(draw.choice(WORDS) for _ in range(words))


@pytest.fixture
def text_folder(tmp_path):
    """12 UTF-8 text files in two folders (.txt, .md, .py), a few hundred bytes to 2 KB each."""
    files = {f"{'docs' if i % 2 else 'src'}/part{i:02d}{('.txt', '.md', '.py')[i % 3]}":
             sample_text(i, 60 + 25 * i).encode() for i in range(12)}
    return write_tree(tmp_path / "corpus", files)
