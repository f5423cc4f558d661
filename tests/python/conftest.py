import os
import sys

# The package from the build tree (ctest sets PYTHONPATH=BUILD/python).
SOURCE = os.environ.get("MESHSIM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
CLI = os.environ.get("MESHSIM_CLI", os.path.join(SOURCE, "build", "release", "tools", "meshsim",
                                                 "meshsim"))
if "PYTHONPATH" not in os.environ:
    sys.path.insert(0, os.path.join(SOURCE, "build", "release", "python"))
