"""opscreen: screen an operator library's performance suite, one op per process.

This module must stay importable with the standard library alone: the child
plugins (``opscreen.child``) are imported inside the suite's own interpreter,
which may have nothing of opscreen's dependencies.
"""

# The one place the version is declared: pyproject.toml reads it ([tool.setuptools.dynamic]).
__version__ = "0.1.0"
