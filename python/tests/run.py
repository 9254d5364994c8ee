"""CTest's entry to the Python tests: runs pytest on this folder, or exits
77 (CTest's skip) when pytest, numpy or scipy cannot be imported."""
import os
import sys

try:
    import numpy  # noqa: F401
    import pytest
    import scipy  # noqa: F401
except ImportError as e:
    print("SKIP: %s (install python3-pytest python3-numpy python3-scipy)" % e)
    sys.exit(77)

sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", os.path.dirname(os.path.abspath(__file__))]))
