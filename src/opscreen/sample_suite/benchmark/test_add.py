import pytest
import torch

import minigems

from . import base, consts


@pytest.mark.add
def test_add():
    bench = base.BinaryPointwiseBenchmark(
        op_name="add", torch_op=torch.add, gems_op=minigems.add, dtypes=consts.FLOAT_DTYPES
    )
    bench.run()
