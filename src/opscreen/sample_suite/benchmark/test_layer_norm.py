import pytest
import torch

import minigems

from . import base, consts


class NormBenchmark(base.GenericBenchmark):
    """Shapes from the `NormBenchmark` key of the shape file (a class defined in a test file)."""

    def set_more_shapes(self):
        return [(16, 16, 64), (1, 8, 4, 4), (4096, 256), (1024, 2048)]


def _input_fn(shape, dtype, device):
    inp = torch.randn(shape, dtype=dtype, device=device)
    layer_shape = shape[1:]
    weight = torch.randn(layer_shape, dtype=dtype, device=device)
    bias = torch.randn(layer_shape, dtype=dtype, device=device)
    yield inp, layer_shape, weight, bias


@pytest.mark.layer_norm
def test_layer_norm():
    bench = NormBenchmark(
        op_name="layer_norm",
        input_fn=_input_fn,
        torch_op=torch.layer_norm,
        gems_op=minigems.layer_norm,
        dtypes=consts.FLOAT_DTYPES,
    )
    bench.run()
