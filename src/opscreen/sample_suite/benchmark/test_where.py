# Neither marker of this file is its stem (where), as in FlagGems:
# `pytest benchmark/test_where.py -m where` selects nothing (exit status 5).
import pytest
import torch

import minigems

from . import base, consts


def _input_fn(shape, dtype, device):
    a = base.generate_tensor_input(shape, dtype, device)
    b = base.generate_tensor_input(shape, dtype, device)
    yield a > 0, a, b


@pytest.mark.where_self
def test_where_self():
    bench = base.GenericBenchmark(
        op_name="where_self",
        input_fn=_input_fn,
        torch_op=torch.where,
        gems_op=minigems.where,
        dtypes=consts.FLOAT_DTYPES,
    )
    bench.run()


def _input_fn_out(shape, dtype, device):
    a = base.generate_tensor_input(shape, dtype, device)
    b = base.generate_tensor_input(shape, dtype, device)
    out = torch.empty(shape, dtype=dtype, device=device)
    yield a > 0, a, b, {"out": out}


@pytest.mark.where_self_out
def test_where_self_out():
    bench = base.GenericBenchmark(
        op_name="where_self_out",
        input_fn=_input_fn_out,
        torch_op=torch.where,
        gems_op=minigems.where,
        dtypes=consts.FLOAT_DTYPES,
    )
    bench.run()
