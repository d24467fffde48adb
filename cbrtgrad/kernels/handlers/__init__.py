"""The C entries other frameworks call: XLA FFI handlers, the loops MLX's and
PyTorch's C++ call on buffers, the Metal source."""
