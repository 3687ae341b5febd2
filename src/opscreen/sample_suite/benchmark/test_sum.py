import pytest
import torch

import minigems

from . import base, consts


@pytest.mark.sum
def test_sum():
    bench = base.UnaryReductionBenchmark(
        op_name="sum", torch_op=torch.sum, gems_op=minigems.sum, dtypes=consts.FLOAT_DTYPES
    )
    bench.run()
