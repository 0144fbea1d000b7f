# probabilities times values: a batched matmul
import torch
from nvfuser_direct import FusionDefinition, DataType

def nvfuser_fusion(fd : FusionDefinition) -> None :
    p = fd.define_tensor(shape=[32, 1024, 1024], contiguity=[True, True, True], dtype=DataType.BFloat16, is_cpu=False)
    v = fd.define_tensor(shape=[32, 1024, 128], contiguity=[True, True, True], dtype=DataType.BFloat16, is_cpu=False)
    o = fd.ops.matmul(p, v)
    fd.add_output(o)

with FusionDefinition() as fd:
    nvfuser_fusion(fd)

inputs = [
    torch.testing.make_tensor((32, 1024, 1024), dtype=torch.bfloat16, device="cuda:0", low=-1, high=1),
    torch.testing.make_tensor((32, 1024, 128), dtype=torch.bfloat16, device="cuda:0", low=-1, high=1),
]
fd.execute(inputs)
