# fusebench fuzz: seed 33, fusion 404
# redo: fusebench fuzz --seed 33 --start 404 --count 1 --device gpu
# failed: output 0 (tv7, Float [1, 3, 13]) with outputs poisoned 0xFF: 2 of 39 elements outside their bounds; first at [0, 0, 1]: NaN vs 3.6767237186431885 (bound 2.831e0)
import torch
from nvfuser import FusionDefinition, DataType

def nvfuser_fusion_id0(fd : FusionDefinition) -> None :
    tv0 = fd.define_tensor(shape=[1, 3, 13], contiguity=[None, True, True], dtype=DataType.ComplexDouble, is_cpu=False)
    tv1 = fd.define_tensor(shape=[1, 3, 13], contiguity=[None, True, True], dtype=DataType.Float, is_cpu=False)
    tv2 = fd.define_tensor(shape=[1, 3, 1], contiguity=[None, True, None], dtype=DataType.Float, is_cpu=False)
    tv4 = fd.ops.pow(tv1, 7)
    tv5 = fd.ops.round(tv4)
    tv6 = fd.ops.log10(tv1)
    tv7 = fd.ops.acosh(tv5)
    fd.add_output(tv7)

with FusionDefinition() as fd:
    nvfuser_fusion_id0(fd)

inputs = [
    torch.testing.make_tensor((1, 3, 13), dtype=torch.complex128, device='cuda:0'),
    torch.testing.make_tensor((1, 3, 13), dtype=torch.float32, device='cuda:0'),
    torch.testing.make_tensor((1, 3, 1), dtype=torch.float32, device='cuda:0'),
]
fd.execute(inputs)
