import pytest
import torch

import minigems

from . import base, consts


class CopyBenchmark(base.GenericBenchmark):
    """A memory-bound op: measures GB/s (read + write) at every level."""

    DEFAULT_METRICS = consts.DEFAULT_METRICS + ["gbps"]

    def get_gbps(self, args, latency=None):
        inp = args[0]
        return 2 * inp.numel() * inp.element_size() * 1e-9 / (latency * 1e-3)


@pytest.mark.clone
def test_clone():
    bench = CopyBenchmark(
        op_name="clone",
        input_fn=base.unary_input_fn,
        torch_op=torch.clone,
        gems_op=minigems.clone,
        dtypes=consts.FLOAT_DTYPES,
    )
    bench.run()
