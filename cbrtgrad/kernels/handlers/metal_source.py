"""Source generated from :mod:`cbrtgrad.kernels.formulas.f32_fma`: Metal, and C++ to check it.

:class:`SourceOps` is the namespace of operations the float32-only formula
is written against; instead of computing, each operation appends one
statement to :attr:`SourceOps.lines` (``float v12 = metal::fma(v9, v10,
v11);``) and returns the new variable's name, so the formula's straight-line
code becomes source text, one rounding per statement, constants as bit
patterns (``as_type<float>(0x3EAAAAABu)``: exact). The same text is

* :func:`metal_body`: the body of an ``mx.fast.metal_kernel`` (input ``inp``,
  output ``out``, one thread per element);
* :func:`cpp_source`: a C++ translation unit with a small shim for the
  Metal names (``as_type`` by ``memcpy``, ``metal::fma`` as ``std::fma``),
  which the tests compile with the C++ compiler, no fast math and no
  contraction, and compare with cbrtgrad's float32 kernel bit for bit.

Nothing here imports mlx, and nothing here has run on a Metal GPU.
"""

from __future__ import annotations

import struct
from functools import lru_cache

from ..formulas.f32_fma import cube_root_f32_fma


class SourceOps:
    """The formula's operations, recorded as Metal/C++ statements.

    Examples
    --------
    >>> ops = SourceOps()
    >>> x = ops.input("x")
    >>> ops.fma(x, x, ops.f32(1.0))
    'v1'
    >>> ops.lines
    ['float v0 = as_type<float>(0x3F800000u);', 'float v1 = metal::fma(x, x, v0);']
    """

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._types: dict[str, str] = {}

    def _emit(self, type_: str, expression: str) -> str:
        name = f"v{len(self.lines)}"
        self.lines.append(f"{type_} {name} = {expression};")
        self._types[name] = type_
        return name

    def _type(self, value: str) -> str:
        if value.endswith("u") and value.startswith("0x"):
            return "uint"
        return self._types[value]

    def input(self, name: str) -> str:
        """A float32 input of the kernel, by its name in the source."""
        self._types[name] = "float"
        return name

    # constants
    def f32(self, value: float) -> str:
        (pattern,) = struct.unpack("<I", struct.pack("<f", value))
        return self._emit("float", f"as_type<float>({pattern:#010X}u)".replace("0X", "0x"))

    def u32(self, value: int) -> str:
        return f"{value & 0xFFFFFFFF:#010x}u"

    # float32 arithmetic, each rounded once (fma exact)
    def add(self, a: str, b: str) -> str:
        return self._emit("float", f"{a} + {b}")

    def sub(self, a: str, b: str) -> str:
        return self._emit("float", f"{a} - {b}")

    def mul(self, a: str, b: str) -> str:
        return self._emit("float", f"{a} * {b}")

    def fma(self, a: str, b: str, c: str) -> str:
        return self._emit("float", f"metal::fma({a}, {b}, {c})")

    def fabs(self, a: str) -> str:
        return self._emit("float", f"metal::fabs({a})")

    # bit casts and conversions
    def bits(self, a: str) -> str:
        return self._emit("uint", f"as_type<uint>({a})")

    def flt(self, a: str) -> str:
        return self._emit("float", f"as_type<float>({a})")

    def u2f(self, a: str) -> str:
        return self._emit("float", f"float({a})")

    # uint32 operations (wrapping)
    def band(self, a: str, b: str) -> str:
        return self._emit("uint", f"{a} & {b}")

    def bor(self, a: str, b: str) -> str:
        return self._emit("uint", f"{a} | {b}")

    def uadd(self, a: str, b: str) -> str:
        return self._emit("uint", f"{a} + {b}")

    def usub(self, a: str, b: str) -> str:
        return self._emit("uint", f"{a} - {b}")

    def shl(self, a: str, b: str) -> str:
        return self._emit("uint", f"{a} << {b}")

    def shr(self, a: str, b: str) -> str:
        return self._emit("uint", f"{a} >> {b}")

    def udiv(self, a: str, b: str) -> str:
        return self._emit("uint", f"{a} / {b}")

    # comparisons and selects
    def ult(self, a: str, b: str) -> str:
        return self._emit("bool", f"{a} < {b}")

    def ule(self, a: str, b: str) -> str:
        return self._emit("bool", f"{a} <= {b}")

    def ueq(self, a: str, b: str) -> str:
        return self._emit("bool", f"{a} == {b}")

    def flt_lt(self, a: str, b: str) -> str:
        return self._emit("bool", f"{a} < {b}")

    def fle(self, a: str, b: str) -> str:
        return self._emit("bool", f"{a} <= {b}")

    def bor_b(self, a: str, b: str) -> str:
        return self._emit("bool", f"{a} || {b}")

    def select(self, condition: str, a: str, b: str) -> str:
        return self._emit(self._type(a), f"{condition} ? {a} : {b}")


@lru_cache(maxsize=1)
def _statements() -> tuple[tuple[str, ...], str]:
    ops = SourceOps()
    result = cube_root_f32_fma(ops, ops.input("x"))
    return tuple(ops.lines), result


def metal_body() -> str:
    """The body of the ``mx.fast.metal_kernel`` (input ``inp``, output ``out``, float32).

    Examples
    --------
    >>> body = metal_body()
    >>> body.splitlines()[:2]
    ['uint elem = thread_position_in_grid.x;', 'float x = inp[elem];']
    >>> "double" in body
    False
    """
    lines, result = _statements()
    head = ["uint elem = thread_position_in_grid.x;", "float x = inp[elem];"]
    return "\n".join([*head, *lines, f"out[elem] = {result};"]) + "\n"


_SHIM = """// Generated by cbrtgrad/kernels/handlers/metal_source.py from formulas_f32_fma.py:
// the Metal kernel's body, with a shim for the Metal names, to check on the CPU.
#include <cmath>
#include <cstdint>
#include <cstring>

typedef uint32_t uint;

template <typename T, typename U>
static inline T as_type(U value) {
  static_assert(sizeof(T) == sizeof(U), "as_type needs equal sizes");
  T out;
  std::memcpy(&out, &value, sizeof out);
  return out;
}

namespace metal {
static inline float fma(float a, float b, float c) { return std::fma(a, b, c); }
static inline float fabs(float a) { return std::fabs(a); }
}  // namespace metal
"""


def cpp_source(function: str = "cbrtgrad_metal_cube_root") -> str:
    """A C++ translation unit: ``void function(const float* inp, float* out, int64_t n)``.

    Examples
    --------
    >>> 'extern "C" void cbrtgrad_metal_cube_root(' in cpp_source()
    True
    """
    lines, result = _statements()
    body = "\n".join("    " + line for line in lines)
    return (
        _SHIM
        + f'\nextern "C" void {function}(const float* inp, float* out, int64_t n) {{\n'
        + "  for (int64_t elem = 0; elem < n; ++elem) {\n"
        + "    float x = inp[elem];\n"
        + body
        + f"\n    out[elem] = {result};\n  }}\n}}\n"
    )
