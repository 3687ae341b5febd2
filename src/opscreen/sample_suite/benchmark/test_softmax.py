import pytest
import torch

import minigems

from . import base, consts


@pytest.mark.softmax
def test_softmax():
    bench = base.UnaryReductionBenchmark(
        op_name="softmax",
        torch_op=torch.nn.functional.softmax,
        gems_op=minigems.softmax,
        dtypes=consts.FLOAT_DTYPES,
    )
    bench.run()
