import pytest
import torch

import minigems

from . import base, consts


@pytest.mark.gelu
def test_gelu():
    bench = base.UnaryPointwiseBenchmark(
        op_name="gelu",
        torch_op=torch.nn.functional.gelu,
        gems_op=minigems.gelu,
        dtypes=consts.FLOAT_DTYPES,
    )
    bench.run()
