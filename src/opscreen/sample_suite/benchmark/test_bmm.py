import pytest
import torch

import minigems

from . import base, consts


def bmm_input_fn(b, m, n, k, dtype, device, b_column_major):
    a = torch.randn([b, m, k], dtype=dtype, device=device)
    if b_column_major:
        yield a, torch.randn([b, n, k], dtype=dtype, device=device).transpose(1, 2)
    else:
        yield a, torch.randn([b, k, n], dtype=dtype, device=device)


@pytest.mark.bmm
def test_bmm():
    bench = base.BlasBenchmark(
        op_name="bmm",
        input_fn=bmm_input_fn,
        torch_op=torch.bmm,
        gems_op=minigems.bmm,
        dtypes=consts.FLOAT_DTYPES,
    )
    bench.run()
