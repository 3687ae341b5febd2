"""pytest plugin for ``opscreen inventory``: report what collection found.

This file runs INSIDE the suite's interpreter (``pytest --collect-only -p ...``),
copied to a temporary directory under a private module name, so it imports only
the standard library and pytest. For every collected item it prints one line

    OPSCREEN-ITEM {"nodeid": ..., "file": ..., "function": ..., "cls": ..., "marks": [...]}

(``marks`` in ``item.iter_markers()`` order, builtin marks included; the harness
filters them), and for every collector that failed one line

    OPSCREEN-COLLECT-ERROR {"nodeid": ..., "error": "<last line of the error>"}

Failures before plugins run (a conftest that cannot be imported) never reach
these hooks; the harness reads them from pytest's own output.
"""

import json

ITEM_PREFIX = "OPSCREEN-ITEM "
ERROR_PREFIX = "OPSCREEN-COLLECT-ERROR "


def _emit(prefix, obj):
    print(prefix + json.dumps(obj, separators=(",", ":"), default=str), flush=True)


def _one_line(longrepr):
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None and getattr(crash, "message", None):
        text = crash.message
    else:
        text = str(longrepr)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    # pytest's collect errors end with "E   SomeError: message" lines.
    e_lines = [ln[1:].strip() for ln in lines if ln.startswith("E ")]
    if e_lines:
        return e_lines[-1]
    return lines[-1] if lines else "collection failed"


def pytest_collectreport(report):
    if report.failed:
        _emit(ERROR_PREFIX, {"nodeid": report.nodeid, "error": _one_line(report.longrepr)})


def pytest_collection_finish(session):
    for item in session.items:
        cls = getattr(item, "cls", None)
        names = []
        node = item.parent
        while node is not None and cls is not None and type(node).__name__ == "Class":
            names.append(node.name)
            node = node.parent
        _emit(
            ITEM_PREFIX,
            {
                "nodeid": item.nodeid,
                "file": item.location[0] if getattr(item, "location", None) else None,
                "function": getattr(item, "originalname", None) or item.name,
                "cls": "::".join(reversed(names)) or None,
                "marks": [m.name for m in item.iter_markers()],
            },
        )
