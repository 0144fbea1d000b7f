# q k^T scaled: a batched matmul with the key read transposed; the scale is the product's alpha
import torch
from nvfuser_direct import FusionDefinition, DataType

def nvfuser_fusion(fd : FusionDefinition) -> None :
    q = fd.define_tensor(shape=[32, 1024, 128], contiguity=[True, True, True], dtype=DataType.BFloat16, is_cpu=False)
    k = fd.define_tensor(shape=[32, 1024, 128], contiguity=[True, True, True], dtype=DataType.BFloat16, is_cpu=False)
    kt = fd.ops.permute(k, dims=[0, 2, 1])
    s = fd.ops.matmul(q, kt)
    sf = fd.ops.cast(s, dtype=DataType.Float)
    sc = fd.ops.mul(sf, 0.08838834764831845)
    o = fd.ops.cast(sc, dtype=DataType.BFloat16)
    fd.add_output(o)

with FusionDefinition() as fd:
    nvfuser_fusion(fd)

inputs = [
    torch.testing.make_tensor((32, 1024, 128), dtype=torch.bfloat16, device="cuda:0", low=-1, high=1),
    torch.testing.make_tensor((32, 1024, 128), dtype=torch.bfloat16, device="cuda:0", low=-1, high=1),
]
fd.execute(inputs)
