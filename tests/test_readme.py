"""The README's Python example runs as written, and its citations of docs/model.md resolve."""

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


MODEL_DOC = ROOT / "docs" / "model.md"
CITATION = re.compile(r"docs/model\.md((?:(?:,| and)? ?§\d+(?:\.\d+)?)+)")  # "docs/model.md §2.4, §2.5 and §3"
# where the project cites its model document: the README, the package, and the tests, tools, benchmarks,
# sweeps and data notes that name a section
CITING = ("README.md", "RELIABILITY.md", "specjax", "tests", "tools", "bench", "sweeps", "data", "docs")


def model_sections(text):
    """Section numbers of the model document: "## 7. ..." -> "7", "### 2.4 ..." -> "2.4"."""
    return set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", text, flags=re.M))


def cited_sections(text):
    """Every section number a text cites as "docs/model.md §N" (with further "§M" in the same list)."""
    return [n for group in CITATION.findall(text) for n in re.findall(r"§(\d+(?:\.\d+)?)", group)]


def citing_files():
    for name in CITING:
        path = ROOT / name
        files = [path] if path.is_file() else sorted(p for ext in ("py", "md", "toml") for p in path.rglob(f"*.{ext}"))
        yield from (f for f in files if ".venv" not in f.parts and f.name != "test_readme.py")


def test_the_citation_parser_finds_sections_and_lists():
    """The checks below are not vacuous: the parser reads lists of sections and a heading of either depth."""
    assert cited_sections("see docs/model.md §2.4, §2.5 and §11; not §3") == ["2.4", "2.5", "11"]
    assert cited_sections("(docs/model.md §99)") == ["99"]
    assert model_sections("## 2. One pass\n### 2.4 Layouts\ntext §5\n") == {"2", "2.4"}


def test_every_model_doc_citation_points_to_a_section_and_no_bare_spec_citation_remains():
    """Every "docs/model.md §N" in the README, the package and the other project files names a section
    docs/model.md has, every "§N" inside the document itself too, and nothing cites the shared MODEL.md,
    which is not in the repository (the document's list of differences names it; it is the only one)."""
    doc = MODEL_DOC.read_text()
    sections = model_sections(doc)
    assert {str(i) for i in range(1, 15)} <= sections, sorted(sections)
    missing, bare, cited = [], [], {}
    for f in citing_files():
        text = f.read_text(errors="replace")
        rel = str(f.relative_to(ROOT))
        refs = re.findall(r"§(\d+(?:\.\d+)?)", text) if f == MODEL_DOC else cited_sections(text)
        cited[rel] = len(refs)
        missing += [f"{rel}: §{n}" for n in refs if n not in sections]
        if f != MODEL_DOC and "MODEL.md" in text:
            bare += [f"{rel}:{i}" for i, line in enumerate(text.splitlines(), 1) if "MODEL.md" in line]
    assert not missing, missing
    assert not bare, bare
    assert cited["README.md"] >= 25 and sum(v for k, v in cited.items() if k.startswith("specjax")) >= 80, cited
