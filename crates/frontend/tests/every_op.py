# A script that uses every op and every kind of input, for the tests.
#  an indented header line
import torch
from nvfuser_direct import FusionDefinition, DataType
def nvfuser_fusion(fd : FusionDefinition) -> None :
    tv0 = fd.define_tensor(shape=[4, 8], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    tv1 = fd.define_tensor(shape=[8, 4], contiguity=[True, True], dtype=DataType.Float, is_cpu=False, stride_order=[0, 1])
    tv2 = fd.define_tensor(shape=[3], contiguity=[True], dtype=DataType.Int, is_cpu=False)
    tv3 = fd.define_tensor(shape=[1, 8], contiguity=[None, True], dtype=DataType.Bool, is_cpu=False)
    s0 = fd.define_scalar(dtype=DataType.Double)
    s1 = fd.define_scalar(2.5, dtype=DataType.Float)  # a comment after code
    tv4 = fd.ops.neg(tv0)
    tv5 = fd.ops.abs(tv4)
    tv6 = fd.ops.exp(tv5)
    tv7 = fd.ops.log(tv6)
    tv8 = fd.ops.sqrt(tv7)

    # a comment between statements
    tv9 = fd.ops.rsqrt(tv8)
    tv10 = fd.ops.reciprocal(tv9)
    tv11 = fd.ops.tanh(tv10)
    tv12 = fd.ops.erf(tv11)
    tv13 = fd.ops.sigmoid(tv12)
    tv14 = fd.ops.add(tv13, s0)
    tv15 = fd.ops.sub(tv14, -1.5)
    tv16 = fd.ops.mul(2, tv15)
    tv17 = fd.ops.div(tv16, s1)
    tv18 = fd.ops.pow(tv17, 2.00000)
    tv19 = fd.ops.maximum(tv18, float("-inf"))
    tv20 = fd.ops.minimum(tv19, float('inf'))
    tv21 = fd.ops.eq(tv20, 0)
    tv22 = fd.ops.ne(tv20, 1.00000e-05)
    tv23 = fd.ops.lt(tv20, tv0)
    tv24 = fd.ops.le(tv20, tv0)
    tv25 = fd.ops.gt(tv20, tv0)
    tv26 = fd.ops.ge(tv20, tv0)
    tv27 = fd.ops.where(tv3, tv20, float("nan"))
    c0 = fd.ops.where(True, 2.00000, 3.00000)
    tv28 = fd.ops.cast(tv27, dtype=DataType.BFloat16)
    tv29 = fd.ops.sum(tv28, dims=[1], keepdim=True, dtype=DataType.Float)
    tv30 = fd.ops.max(tv0, dims=[0])
    tv31 = fd.ops.amin(tv0, axes=[-1])
    tv32, tv33, tv34 = fd.ops.welford(tv0, dims=[1])
    tv35, tv36 = fd.ops.var_mean(tv0, dims=[1], correction=0, keepdim=False)
    tv37 = fd.ops.broadcast(tv30, is_broadcast_dim=[True, False])
    tv38 = fd.ops.broadcast_in_dim(tv31, shape=[4, 8], broadcast_dims=[0])
    tv39 = fd.ops.expand(tv37, shape=[4, 8])
    tv40 = fd.ops.reshape(tv1, new_shape=[2, 16])
    tv41 = fd.ops.permute(tv1, dims=[1, 0])
    tv42 = fd.ops.squeeze(tv29, dims=[1])
    tv43 = fd.ops.slice(tv0, start_indices=[0, 2], end_indices=[4, 6])
    c1 = fd.ops.add(0, 2)
    tv44 = fd.ops.pad(tv43, [c1, 2], value=0.0)
    tv45 = fd.ops.pad(tv43, pad_widths=[0, 4, 0, 0])
    tv46 = fd.ops.cat([tv44, tv45], dim=1)
    tv47 = fd.ops.full(shape=[2, 3], fill_value=c0, dtype=DataType.Half)
    tv48 = fd.ops.index_select(tv0, tv2, dim=0)
    fd.add_output(tv21)
    fd.add_output(tv22)
    fd.add_output(tv23)
    fd.add_output(tv24)
    fd.add_output(tv25)
    fd.add_output(tv26)
    fd.add_output(tv28)
    fd.add_output(tv32)
    fd.add_output(tv33)
    fd.add_output(tv34)
    fd.add_output(tv35)
    fd.add_output(tv36)
    fd.add_output(tv38)
    fd.add_output(tv39)
    fd.add_output(tv40)
    fd.add_output(tv41)
    fd.add_output(tv42)
    fd.add_output(tv46)
    fd.add_output(tv47)
    fd.add_output(tv48)
    t = fd.ops.neg(tv0)
    fd.add_output(t)
    t = fd.ops.abs(t)
    fd.add_output(t)
    tvc = fd.ops.complex(tv0, tv0)
    tvc2 = fd.ops.imag(tvc)
    tvc3 = fd.ops.real(tvc)
    tvc4 = fd.ops.add(tvc2, tvc3)
    fd.add_output(tvc4)

with FusionDefinition() as fd:
    nvfuser_fusion(fd)

inputs = [
    torch.testing.make_tensor((4, 8), dtype=torch.float32, device='cuda:0', low=-1, high=1.5),
    torch.randn(32, dtype=torch.float32, device='cuda:0').as_strided((8, 4), (1, 8)),
    # a comment inside the list
    torch.randint(0, 4, (3,), dtype=torch.int64, device='cuda:0'),
    torch.testing.make_tensor(1, 8, dtype=torch.bool, device='cuda:0'),
    0.5,
]
fd.execute(inputs)
