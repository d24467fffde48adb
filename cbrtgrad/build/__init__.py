"""How every kernel is compiled and kept: numba's compile policy, the SIMD shape, the
kernel cache and its key, the C++ builds of the bridges."""
