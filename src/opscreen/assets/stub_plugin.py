"""pytest plugin for ``opscreen inventory --stub MODULE``: stand-in modules.

Runs INSIDE the suite's interpreter (copied next to the collection plugin), before
any conftest: it installs an import hook that answers every import of the modules
named in ``$OPSCREEN_STUB_MODULES`` (comma-separated top-level names, e.g.
``flag_gems``) with an empty module whose every attribute is a permissive stand-in
object (callable, a no-op decorator, falsy, equal to nothing). The real package,
even one on ``sys.path`` via ``pytest.ini``'s ``pythonpath``, is never imported.

Why: collecting FlagGems' benchmark files imports ``flag_gems``, which needs a
device. Marks are written in the test files, not computed by the library, so a
stand-in lets pytest show, on any machine, which tests and markers collection
sees. Module-level code that computes with the library (``a, b = lib.f()``) still
fails, and is reported as that file's collection error. Standard library only.
"""

import importlib.abc
import importlib.machinery
import os
import sys
import types


class _Stand:
    __slots__ = ("_name",)

    def __init__(self, name):
        self._name = name

    def __getattr__(self, key):
        if key.startswith("__") and key.endswith("__"):
            raise AttributeError(key)
        return _Stand(f"{self._name}.{key}")

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]  # used as a decorator: leave the function alone
        return _Stand(f"{self._name}()")

    def __repr__(self):
        return f"<stand-in {self._name}>"

    def __iter__(self):
        return iter(())

    def __bool__(self):
        return False

    def __eq__(self, other):
        return other is self

    def __hash__(self):
        return id(self)

    def __lt__(self, other):
        return False

    __gt__ = __le__ = __ge__ = __lt__

    def __len__(self):
        return 0

    def __int__(self):
        return 0

    __index__ = __int__

    def __float__(self):
        return 0.0

    def __getitem__(self, key):
        return _Stand(f"{self._name}[]")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __mro_entries__(self, bases):
        return (object,)


class _StandModule(types.ModuleType):
    def __getattr__(self, key):
        if key.startswith("__") and key.endswith("__"):
            raise AttributeError(key)
        return _Stand(f"{self.__name__}.{key}")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, roots):
        self.roots = frozenset(roots)

    def find_spec(self, name, path, target=None):
        if name.split(".", 1)[0] in self.roots:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        mod = _StandModule(spec.name)
        mod.__path__ = []
        return mod

    def exec_module(self, module):
        module.__opscreen_stand_in__ = True


_ROOTS = [r.strip() for r in os.environ.get("OPSCREEN_STUB_MODULES", "").split(",") if r.strip()]
if _ROOTS:
    for _name in list(sys.modules):
        if _name.split(".", 1)[0] in _ROOTS:
            del sys.modules[_name]
    sys.meta_path.insert(0, _Finder(_ROOTS))
