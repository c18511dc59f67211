"""`cmake --install` puts a working package (extension, Python files, default model) into the
interpreter's site-packages; checked in a staging root (DESTDIR) so nothing on the machine
changes."""

import os
import subprocess
import sys

import pytest

import sinkscope

pytestmark = pytest.mark.skipif(not sinkscope.with_model_runtime,
                                reason="built without the model runtime (libtorch)")


def test_install_into_site_packages(tmp_path):
    build = os.environ.get("SINKSCOPE_BUILD_DIR")
    site = os.environ.get("SINKSCOPE_PYTHON_INSTALL_DIR")
    if not build or not site:
        pytest.skip("SINKSCOPE_BUILD_DIR / SINKSCOPE_PYTHON_INSTALL_DIR not set (run by ctest)")
    env = dict(os.environ, DESTDIR=str(tmp_path))
    subprocess.run(["cmake", "--install", build], check=True, env=env, capture_output=True)
    installed = str(tmp_path) + site
    assert os.path.exists(os.path.join(installed, "sinkscope", "models", "default",
                                       "config.json"))
    code = ("import sinkscope, os; "
            "assert sinkscope.__file__.startswith(os.environ['PYTHONPATH']), sinkscope.__file__; "
            "m = sinkscope.Model.load(); "
            "assert m.path.startswith(os.environ['PYTHONPATH']), m.path; "
            "print(m.cfg['n_layers'])")
    env = {k: v for k, v in os.environ.items() if k not in ("SINKSCOPE_DEFAULT_MODEL",)}
    env["PYTHONPATH"] = installed
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.strip()) > 0
