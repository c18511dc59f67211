"""The README's "Use from Python" example runs as written."""

import os
import re

import sinkscope

import pytest

pytestmark = pytest.mark.skipif(not sinkscope.with_model_runtime,
                                reason="built without the model runtime (libtorch)")


def test_readme_python_example(capsys):
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "..", "README.md"), encoding="utf-8") as f:
        readme = f.read()
    section = readme.split("## Use from Python", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1, "the section has one Python example"
    exec(compile(blocks[0], "README.md (Use from Python)", "exec"), {})
    out = capsys.readouterr().out
    assert "mean sink mass" in out and "values in heads.csv" in out
