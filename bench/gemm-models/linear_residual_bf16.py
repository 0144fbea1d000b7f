# an output projection with bias plus the residual: the product, then one add kernel
import torch
from nvfuser_direct import FusionDefinition, DataType

def nvfuser_fusion(fd : FusionDefinition) -> None :
    x = fd.define_tensor(shape=[4096, 2048], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    w = fd.define_tensor(shape=[2048, 2048], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    b = fd.define_tensor(shape=[2048], contiguity=[True], dtype=DataType.BFloat16, is_cpu=False)
    r = fd.define_tensor(shape=[4096, 2048], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    l = fd.ops.linear(x, w, b)
    lf = fd.ops.cast(l, dtype=DataType.Float)
    rf = fd.ops.cast(r, dtype=DataType.Float)
    y = fd.ops.add(lf, rf)
    o = fd.ops.cast(y, dtype=DataType.BFloat16)
    fd.add_output(o)

with FusionDefinition() as fd:
    nvfuser_fusion(fd)

inputs = [
    torch.testing.make_tensor((4096, 2048), dtype=torch.bfloat16, device="cuda:0", low=-1, high=1),
    torch.testing.make_tensor((2048, 2048), dtype=torch.bfloat16, device="cuda:0", low=-1, high=1),
    torch.testing.make_tensor((2048,), dtype=torch.bfloat16, device="cuda:0", low=-1, high=1),
    torch.testing.make_tensor((4096, 2048), dtype=torch.bfloat16, device="cuda:0", low=-1, high=1),
]
fd.execute(inputs)
