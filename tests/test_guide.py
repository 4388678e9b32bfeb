"""docs/writing-actions.md shows only code that the suite runs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "writing-actions.md"
SOURCES = [
    ROOT / "tests/guide/actions/archive_post.py",
    ROOT / "tests/guide/test_archive_post.py",
    ROOT / "app/actions/manage_files.py",
]


def test_every_python_block_of_the_guide_is_code_the_suite_runs():
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), flags=re.S)
    sources = "\n".join(path.read_text() for path in SOURCES)
    assert len(blocks) >= 4
    for block in blocks:
        assert block.strip("\n") in sources, f"this block of the guide is not in the tested files:\n{block}"
