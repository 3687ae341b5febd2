import pytest
import torch

import minigems

from . import base, consts


@pytest.mark.exp
def test_exp():
    bench = base.UnaryPointwiseBenchmark(
        op_name="exp", torch_op=torch.exp, gems_op=minigems.exp, dtypes=consts.FLOAT_DTYPES
    )
    bench.run()
