# GPT-2's MLP: a linear with bias and tanh GELU, a second linear with bias (the GELU stays a kernel: a second product reads it)
import torch
from nvfuser_direct import FusionDefinition, DataType

def nvfuser_fusion(fd : FusionDefinition) -> None :
    x = fd.define_tensor(shape=[4096, 2048], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    w1 = fd.define_tensor(shape=[8192, 2048], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    b1 = fd.define_tensor(shape=[8192], contiguity=[True], dtype=DataType.BFloat16, is_cpu=False)
    w2 = fd.define_tensor(shape=[2048, 8192], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    b2 = fd.define_tensor(shape=[2048], contiguity=[True], dtype=DataType.BFloat16, is_cpu=False)
    l = fd.ops.linear(x, w1, b1)
    lf = fd.ops.cast(l, dtype=DataType.Float)
    c = fd.ops.mul(lf, lf)
    c = fd.ops.mul(c, lf)
    c = fd.ops.mul(c, 0.044715)
    c = fd.ops.add(lf, c)
    c = fd.ops.mul(c, 0.7978845608)
    c = fd.ops.tanh(c)
    c = fd.ops.add(c, 1.0)
    h = fd.ops.mul(lf, 0.5)
    g = fd.ops.mul(h, c)
    gb = fd.ops.cast(g, dtype=DataType.BFloat16)
    y = fd.ops.linear(gb, w2, b2)
    fd.add_output(y)

with FusionDefinition() as fd:
    nvfuser_fusion(fd)

inputs = [
    torch.testing.make_tensor((4096, 2048), dtype=torch.bfloat16, device="cuda:0", low=-1, high=1),
    torch.testing.make_tensor((8192, 2048), dtype=torch.bfloat16, device="cuda:0", low=-1, high=1),
    torch.testing.make_tensor((8192,), dtype=torch.bfloat16, device="cuda:0", low=-1, high=1),
    torch.testing.make_tensor((2048, 8192), dtype=torch.bfloat16, device="cuda:0", low=-1, high=1),
    torch.testing.make_tensor((2048,), dtype=torch.bfloat16, device="cuda:0", low=-1, high=1),
]
fd.execute(inputs)
