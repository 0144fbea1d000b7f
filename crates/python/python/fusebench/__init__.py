"""fusebench: one trustworthy kernel time for any CUDA callable, and why two times differ.

    import fusebench
    m = fusebench.kernel_time(fd.execute, inputs)        # cold L2, CUPTI, median to +-1%
    print(m)                                             # median, interval, samples, kernels
    fusebench.explain(m_live, m_saved)                   # the causes of a difference, checked

Importing works without a GPU; measuring then raises fusebench.Unavailable with the reason.
"""

from ._native import (  # noqa: F401
    DeviceArray,
    Explanation,
    Fusion,
    Measurement,
    Unavailable,
    explain,
    fusion_json,
    gpu_status,
    kernel_time,
    load,
    resident,
    __version__,
    _dlpack_layout,
    _dlpack_reexport,
    _subject_of,
)
