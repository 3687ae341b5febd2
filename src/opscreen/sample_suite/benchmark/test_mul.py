import pytest
import torch

import minigems

from . import base, consts


@pytest.mark.mul
def test_mul():
    bench = base.BinaryPointwiseBenchmark(
        op_name="mul", torch_op=torch.mul, gems_op=minigems.mul, dtypes=consts.FLOAT_DTYPES
    )
    bench.run()
