"""tools/ab_cold.py's DIR@NAME=VALUE: the variable is set while that build's module initialises, and only then."""
import glob
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))


def test_ab_cold_build_setting_does_not_leak():
    import ab_cold

    runtime = os.path.join(ROOT, "fstok", "runtime")
    if not glob.glob(os.path.join(runtime, "_bpe*.so")):
        pytest.skip("no _bpe build in fstok/runtime")
    name = "FSTOK_TEST_AB_COLD_SETTING"
    os.environ.pop(name, None)
    m = ab_cold.load_build(f"{runtime}@{name}=1")
    assert hasattr(m, "Model")
    assert name not in os.environ  # a later build, or a setting read after import, must not see it
    os.environ[name] = "kept"
    try:
        ab_cold.load_build(f"{runtime}@{name}=2")
        assert os.environ[name] == "kept"
    finally:
        del os.environ[name]
