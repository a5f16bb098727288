"""The README's Python example runs as written."""

import pathlib
import re

ROOT = pathlib.Path(__file__).parents[1]


def test_readme_python_blocks_run_and_the_first_equals_the_cli(capsys):
    """Every Python block of the README runs as written; the first says it prints what `specjax point
    --json` prints for the same inputs: one default engine for both (they used to differ, 2.134 against
    1.914)."""
    import contextlib
    import io
    import json

    import pytest

    from specjax import cli

    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    assert blocks, "README has a Python example"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for code in blocks:
            exec(compile(code, "README.md", "exec"), {})
    python_speedup = float(out.getvalue().split()[0])
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        cli.main(["point", "--target", "gpt-oss-120b", "--hardware", "h200", "--drafter", "eagle", "--draft",
                  "eagle3-gpt-oss-120b", "--batch", "64", "--k", "3", "--alpha", "0.7", "--kv-dtype", "fp8", "--json"])
    assert e.value.code in (0, None)
    assert python_speedup == json.loads(capsys.readouterr().out)["speedup"]
