import pytest
import torch

import minigems

from . import base, consts


@pytest.mark.relu
def test_relu():
    bench = base.UnaryPointwiseBenchmark(
        op_name="relu", torch_op=torch.relu, gems_op=minigems.relu, dtypes=consts.FLOAT_DTYPES
    )
    bench.run()
