"""The README's Python example runs as written."""

import pathlib
import re

ROOT = pathlib.Path(__file__).parents[1]


def test_readme_python_blocks_run():
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "README has a Python example"
    for code in blocks:
        exec(compile(code, "README.md", "exec"), {})
