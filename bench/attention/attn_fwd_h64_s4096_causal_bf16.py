# flash-attention forward (sdpfa_fwd), causal, scale 1/sqrt(64) (default): q, k, v [4, 32, 4096, 64] bf16; outputs the attention and its log-sum-exp
import torch
from nvfuser_direct import FusionDefinition, DataType

def nvfuser_fusion(fd : FusionDefinition) -> None :
    q = fd.define_tensor(shape=[4, 32, 4096, 64], contiguity=[True, True, True, True], dtype=DataType.BFloat16, is_cpu=False)
    k = fd.define_tensor(shape=[4, 32, 4096, 64], contiguity=[True, True, True, True], dtype=DataType.BFloat16, is_cpu=False)
    v = fd.define_tensor(shape=[4, 32, 4096, 64], contiguity=[True, True, True, True], dtype=DataType.BFloat16, is_cpu=False)
    o, lse, seed, offset = fd.ops.sdpfa_fwd(q, k, v, dropout_p=0.0, is_causal=True)
    fd.add_output(o)
    fd.add_output(lse)

with FusionDefinition() as fd:
    nvfuser_fusion(fd)

inputs = [
    torch.testing.make_tensor((4, 32, 4096, 64), dtype=torch.bfloat16, device="cuda:0", low=-1, high=1),
    torch.testing.make_tensor((4, 32, 4096, 64), dtype=torch.bfloat16, device="cuda:0", low=-1, high=1),
    torch.testing.make_tensor((4, 32, 4096, 64), dtype=torch.bfloat16, device="cuda:0", low=-1, high=1),
]
fd.execute(inputs)
