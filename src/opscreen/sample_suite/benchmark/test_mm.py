import pytest
import torch

import minigems

from . import base, consts


def mm_input_fn(b, m, n, k, dtype, device, b_column_major):
    a = torch.randn([m, k], dtype=dtype, device=device)
    if b_column_major:
        yield a, torch.randn([n, k], dtype=dtype, device=device).t()
    else:
        yield a, torch.randn([k, n], dtype=dtype, device=device)


@pytest.mark.mm
def test_mm():
    bench = base.BlasBenchmark(
        op_name="mm",
        input_fn=mm_input_fn,
        torch_op=torch.Tensor.mm,
        gems_op=minigems.mm,
        dtypes=consts.FLOAT_DTYPES,
    )
    bench.run()
