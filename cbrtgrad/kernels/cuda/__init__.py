"""The CUDA kernels, from the same formulas on CUDA's primitives."""
