# Llama's MLP: two linears, silu of one times the other, a third linear: three products, one kernel between
import torch
from nvfuser_direct import FusionDefinition, DataType

def nvfuser_fusion(fd : FusionDefinition) -> None :
    x = fd.define_tensor(shape=[4096, 2048], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    w1 = fd.define_tensor(shape=[5632, 2048], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    w3 = fd.define_tensor(shape=[5632, 2048], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    w2 = fd.define_tensor(shape=[2048, 5632], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    a = fd.ops.linear(x, w1)
    b = fd.ops.linear(x, w3)
    af = fd.ops.cast(a, dtype=DataType.Float)
    bf = fd.ops.cast(b, dtype=DataType.Float)
    sg = fd.ops.sigmoid(af)
    si = fd.ops.mul(af, sg)
    h = fd.ops.mul(si, bf)
    hb = fd.ops.cast(h, dtype=DataType.BFloat16)
    y = fd.ops.linear(hb, w2)
    fd.add_output(y)

with FusionDefinition() as fd:
    nvfuser_fusion(fd)

inputs = [
    torch.testing.make_tensor((4096, 2048), dtype=torch.bfloat16, device="cuda:0", low=-1, high=1),
    torch.testing.make_tensor((5632, 2048), dtype=torch.bfloat16, device="cuda:0", low=-1, high=1),
    torch.testing.make_tensor((5632, 2048), dtype=torch.bfloat16, device="cuda:0", low=-1, high=1),
    torch.testing.make_tensor((2048, 5632), dtype=torch.bfloat16, device="cuda:0", low=-1, high=1),
]
fd.execute(inputs)
