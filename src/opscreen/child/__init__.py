"""pytest plugins loaded INSIDE the per-op child (``-p opscreen.child.<name>``).

They import only the standard library, pytest, and the suite environment's own
torch/triton; never anything from opscreen outside this package. Settings come
from the JSON file named by ``OPSCREEN_CHILD_CONFIG`` (see ``config.py``).
"""
