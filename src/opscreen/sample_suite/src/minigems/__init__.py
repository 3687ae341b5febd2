"""minigems: the "library under test" of opscreen's bundled sample suite.

It plays the part that ``flag_gems`` plays for FlagGems' benchmark suite: each op
below is an alternative implementation of a torch operator, written with other
torch CPU ops, so that a screen does real work and the speedups differ from 1.

Importing this module reads only the environment variable ``GEMS_VENDOR`` (the
vendor name, default ``"cpu"``). Like flag_gems it then works on that vendor's torch
device (:data:`VENDOR_DEVICES`: ``musa`` for mthreads, ``npu`` for ascend, ...), after
importing the vendor's torch extension where it has one, when torch has that device
and it is available; else on the CPU. It runs no vendor CLI.
"""

from __future__ import annotations

import math
import os

import torch

__version__ = "0.1.0"

#: vendor -> (torch device type, torch extension to import first), as flag_gems'
#: runtime/backend/_<vendor> packages declare them.
VENDOR_DEVICES = {
    "nvidia": ("cuda", None),
    "amd": ("cuda", None),
    "hygon": ("cuda", None),
    "mthreads": ("musa", "torch_musa"),
    "ascend": ("npu", "torch_npu"),
    "cambricon": ("mlu", "torch_mlu"),
}


def _vendor_device(vendor: str) -> str:
    """The torch device type ``vendor``'s devices have here; ``cpu`` when torch has none."""
    dtype, extension = VENDOR_DEVICES.get(vendor, ("cpu", None))
    if dtype == "cpu":
        return "cpu"
    if extension:
        try:
            __import__(extension)
        except ImportError:
            return "cpu"
    module = getattr(torch, dtype, None)
    try:
        return dtype if module is not None and module.is_available() else "cpu"
    except Exception:  # a device runtime that fails to initialise: stay on the CPU
        return "cpu"


vendor_name = os.environ.get("GEMS_VENDOR") or "cpu"
device = _vendor_device(vendor_name)

__all__ = [
    "__version__",
    "VENDOR_DEVICES",
    "device",
    "vendor_name",
    "OPS",
    "get_op",
    "abs",
    "abs_",
    "exp",
    "relu",
    "gelu",
    "add",
    "mul",
    "where",
    "sum",
    "mean",
    "softmax",
    "layer_norm",
    "clone",
    "mm",
    "bmm",
]

_LOG2_E = 1.0 / math.log(2.0)
_INV_SQRT2 = 1.0 / math.sqrt(2.0)


# -- unary pointwise -----------------------------------------------------------


def _abs(x):
    return torch.maximum(x, torch.neg(x))


def _abs_(x):
    # Exact aliasing of input and output is allowed for elementwise ops.
    return torch.maximum(x, torch.neg(x), out=x)


def _exp(x):
    # exp(x) == 2 ** (x * log2(e))
    return torch.exp2(x * _LOG2_E)


def _relu(x):
    return torch.clamp_min(x, 0)


def _gelu(x, approximate="none"):
    if approximate == "tanh":
        inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
        return 0.5 * x * (1.0 + torch.tanh(inner))
    return 0.5 * x * (1.0 + torch.erf(x * _INV_SQRT2))


# -- binary pointwise ----------------------------------------------------------


def _add(a, b, *, alpha=1):
    return torch.sub(a, b, alpha=-alpha)


def _mul(a, b):
    return torch.addcmul(torch.zeros_like(a), a, b)


def _where(condition, a, b, *, out=None):
    res = b.clone()
    res[condition] = a[condition]
    if out is None:
        return res
    return out.copy_(res)


# -- reductions and normalisations ---------------------------------------------


def _sum(x, dim=None, keepdim=False, *, dtype=None):
    # Accumulate in float32, like a library that upcasts its accumulator.
    acc = x.to(torch.float32)
    if dim is None:
        res = acc.reshape(-1).sum()
    else:
        res = acc.sum(dim=dim, keepdim=keepdim)
    return res.to(dtype or x.dtype)


def _mean(x, dim=None, keepdim=False, *, dtype=None):
    if dim is None:
        count = x.numel()
    else:
        dims = dim if isinstance(dim, (list, tuple)) else (dim,)
        count = math.prod(x.shape[d] for d in dims)
    acc = _sum(x, dim=dim, keepdim=keepdim, dtype=torch.float32)
    return (acc / max(count, 1)).to(dtype or x.dtype)


def _softmax(x, dim=-1, dtype=None):
    xf = x.to(torch.float32)
    shifted = xf - xf.amax(dim=dim, keepdim=True)
    e = torch.exp(shifted)
    return (e / e.sum(dim=dim, keepdim=True)).to(dtype or x.dtype)


def _layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5, *args):
    dims = tuple(range(x.dim() - len(normalized_shape), x.dim()))
    xf = x.to(torch.float32)
    mean = xf.mean(dim=dims, keepdim=True)
    centered = xf - mean
    var = (centered * centered).mean(dim=dims, keepdim=True)
    out = centered * torch.rsqrt(var + eps)
    if weight is not None:
        out = out * weight.to(torch.float32)
    if bias is not None:
        out = out + bias.to(torch.float32)
    return out.to(x.dtype)


def _clone(x, *, memory_format=None):
    out = torch.empty_like(x)
    out.copy_(x)
    return out


# -- BLAS ----------------------------------------------------------------------


def _mm(a, b):
    # (A @ B) == (B^T @ A^T)^T
    return torch.matmul(b.mT, a.mT).mT.contiguous()


def _bmm(a, b):
    return torch.einsum("bmk,bkn->bmn", a, b)


abs = _abs  # noqa: A001 - the library's op names follow torch's
abs_ = _abs_
exp = _exp
relu = _relu
gelu = _gelu
add = _add
mul = _mul
where = _where
sum = _sum  # noqa: A001
mean = _mean
softmax = _softmax
layer_norm = _layer_norm
clone = _clone
mm = _mm
bmm = _bmm

#: op name -> implementation; the benchmark base falls back to it when a test
#: gives no ``gems_op``.
OPS = {
    "abs": _abs,
    "abs_": _abs_,
    "exp": _exp,
    "relu": _relu,
    "gelu": _gelu,
    "add": _add,
    "mul": _mul,
    "where_self": _where,
    "where_self_out": _where,
    "sum": _sum,
    "mean": _mean,
    "softmax": _softmax,
    "layer_norm": _layer_norm,
    "clone": _clone,
    "mm": _mm,
    "bmm": _bmm,
}


def get_op(name):
    """Return minigems' implementation of ``name`` (KeyError when it has none)."""
    try:
        return OPS[name]
    except KeyError:
        raise KeyError(f"minigems has no implementation of op '{name}'") from None
