import pytest
import torch

import minigems

from . import base, consts


@pytest.mark.mean
def test_mean():
    bench = base.UnaryReductionBenchmark(
        op_name="mean", torch_op=torch.mean, gems_op=minigems.mean, dtypes=consts.FLOAT_DTYPES
    )
    bench.run()
