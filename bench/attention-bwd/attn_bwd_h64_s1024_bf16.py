# flash-attention backward (sdpfa_bwd) alone, non-causal, scale 1/sqrt(64) (default): g, q, k, v, o [16, 32, 1024, 64] bf16, the forward's log-sum-exp lse [16, 32, 1024] f32, philox seed and offset as inputs; outputs dq, dk, dv
import torch
from nvfuser_direct import FusionDefinition, DataType

def nvfuser_fusion(fd : FusionDefinition) -> None :
    g = fd.define_tensor(shape=[16, 32, 1024, 64], contiguity=[True, True, True, True], dtype=DataType.BFloat16, is_cpu=False)
    q = fd.define_tensor(shape=[16, 32, 1024, 64], contiguity=[True, True, True, True], dtype=DataType.BFloat16, is_cpu=False)
    k = fd.define_tensor(shape=[16, 32, 1024, 64], contiguity=[True, True, True, True], dtype=DataType.BFloat16, is_cpu=False)
    v = fd.define_tensor(shape=[16, 32, 1024, 64], contiguity=[True, True, True, True], dtype=DataType.BFloat16, is_cpu=False)
    o = fd.define_tensor(shape=[16, 32, 1024, 64], contiguity=[True, True, True, True], dtype=DataType.BFloat16, is_cpu=False)
    lse = fd.define_tensor(shape=[16, 32, 1024], contiguity=[True, True, True], dtype=DataType.Float, is_cpu=False)
    seed = fd.define_tensor(shape=[2], contiguity=[True], dtype=DataType.UInt64, is_cpu=False)
    off = fd.define_tensor(shape=[], contiguity=[], dtype=DataType.UInt64, is_cpu=False)
    dq, dk, dv = fd.ops.sdpfa_bwd(g, q, k, v, o, lse, dropout_p=0.0, is_causal=False, philox_seed=seed, philox_offset=off, scale=None)
    fd.add_output(dq)
    fd.add_output(dk)
    fd.add_output(dv)

with FusionDefinition() as fd:
    nvfuser_fusion(fd)

inputs = [
    torch.testing.make_tensor((16, 32, 1024, 64), dtype=torch.bfloat16, device="cuda:0", low=-1, high=1),
    torch.testing.make_tensor((16, 32, 1024, 64), dtype=torch.bfloat16, device="cuda:0", low=-1, high=1),
    torch.testing.make_tensor((16, 32, 1024, 64), dtype=torch.bfloat16, device="cuda:0", low=-1, high=1),
    torch.testing.make_tensor((16, 32, 1024, 64), dtype=torch.bfloat16, device="cuda:0", low=-1, high=1),
    torch.testing.make_tensor((16, 32, 1024, 64), dtype=torch.bfloat16, device="cuda:0", low=-1, high=1),
    torch.testing.make_tensor((16, 32, 1024), dtype=torch.float32, device="cuda:0", low=2, high=4),
    torch.testing.make_tensor((2,), dtype=torch.uint64, device="cuda:0", low=0, high=10),
    torch.testing.make_tensor((), dtype=torch.uint64, device="cuda:0", low=0, high=10),
]
fd.execute(inputs)
