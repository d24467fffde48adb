"""Metal source for MLX's ``mx.fast.metal_kernel``, translated from the formula source.

The float32 cube root a Metal GPU can run (it has no float64) is
``cube_root_f32_single`` in :mod:`cbrtgrad.kernels.formulas_f32_single`, the
numba formula itself: this module parses that function's Python source with
:mod:`ast` and writes it out as Metal (C++) statements, so the GPU's kernel and
the CPU's formula cannot drift apart. The translation knows a small subset,
and refuses anything else with a ``ValueError`` naming the construct:

- statements: ``name = expression`` and one final ``return``;
- expressions: local names, the module's numpy constants (written as exact
  literals), ``a if c else b`` (a select), one comparison, the integer
  operators ``+ - * // & | ^ << >>`` on unsigned operands, float negation;
- calls: the casts ``np.float32``, ``np.int32``, ``np.uint32`` and
  ``np.uint64`` (``float``, ``int``, ``uint``, ``ulong``) and the primitives
  ``mul32`` (``a * b``), ``fma32`` (``fma``), ``f32_as_i32`` and
  ``i32_as_f32`` (``as_type``).

Every operation's operands must have one type, as the formula writes them, so
that C's rules of promotion never choose a type the formula did not. Float
arithmetic comes only from the primitives: each product is rounded on its
own or fused by an explicit ``fma``, never by a contraction the compiler may
or may not make.

NOTE: MLX compiles ``metal_kernel`` sources with ``MTLMathModeSafe`` unless
``compile_options`` say otherwise (mlx/backend/metal/device.cpp,
``set_compile_options``; ``setFastMathEnabled(false)`` before macOS 15, and
for every source before MLX's pull request 3728). The kernel needs that
mode for what is claimed: its decision is in integers, and its float steps
keep a margin, but they are checked only as written, which "relaxed" and
"fast" do not promise (docs/kernels.md, "The Metal kernel").
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass, field

import numpy as np

from . import formulas_f32_single

FUNCTION = "cube_root_f32_single"

_CASTS = {"float32": "float", "int32": "int", "uint32": "uint", "uint64": "ulong"}
_CONSTANT_TYPES = {np.float32: "float", np.int32: "int", np.uint32: "uint", np.uint64: "ulong"}
_INTEGER_OPERATORS = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.FloorDiv: "/",
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.LShift: "<<",
    ast.RShift: ">>",
}
_COMPARISONS = {
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
}
_UNSIGNED = ("uint", "ulong")
_PRIMITIVES = ("mul32", "fma32", "f32_as_i32", "i32_as_f32")
# Local names get this prefix: no clash with Metal's own names (sign, fma).
_PREFIX = "cr_"


def _literal(value: object) -> tuple[str, str]:
    """A numpy constant as an exact C literal, and its type."""
    kind = _CONSTANT_TYPES.get(type(value))
    if kind is None:
        raise ValueError(f"constant {value!r} is not a float32, int32, uint32 or uint64")
    if kind == "float":
        # The shortest decimal that reads back as this float32 (numpy's repr).
        text = str(value)
        return (text if ("." in text or "e" in text) else text + ".0") + "f", kind
    number = int(value)  # type: ignore[call-overload]
    # Bit patterns in hexadecimal, shifts and small counts in decimal.
    digits = f"0x{number:X}" if number > 255 else str(number)
    if kind == "uint":
        return digits + "u", kind
    if kind == "ulong":
        return f"ulong({digits})", kind
    return digits, kind


@dataclass
class _Translation:
    """The state of one function's translation: its parameter and its locals' types."""

    parameter: str
    input_expression: str
    prefix: str = "cr_"
    types: dict[str, str] = field(default_factory=dict)

    def expression(self, node: ast.expr) -> tuple[str, str]:
        """Translate one expression: its C text and its type."""
        if isinstance(node, ast.Name):
            return self._name(node.id)
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.BinOp):
            left, left_type = self.expression(node.left)
            right, right_type = self.expression(node.right)
            operator = _INTEGER_OPERATORS.get(type(node.op))
            if operator is None or left_type not in _UNSIGNED or left_type != right_type:
                raise ValueError(
                    f"line {node.lineno}: {type(node.op).__name__} of {left_type} and "
                    f"{right_type}: only unsigned operands of one type (float arithmetic "
                    "goes through mul32 and fma32)"
                )
            return f"({left} {operator} {right})", left_type
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            operand, kind = self.expression(node.operand)
            if kind != "float":
                raise ValueError(f"line {node.lineno}: negation of {kind}, not float")
            return f"(-{operand})", kind
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            left, left_type = self.expression(node.left)
            right, right_type = self.expression(node.comparators[0])
            operator = _COMPARISONS.get(type(node.ops[0]))
            if operator is None or left_type != right_type or left_type == "float":
                raise ValueError(
                    f"line {node.lineno}: comparison of {left_type} and {right_type}: "
                    "only integers of one type (a float comparison is what fast math "
                    "may fold)"
                )
            return f"({left} {operator} {right})", "bool"
        if isinstance(node, ast.IfExp):
            test, test_type = self.expression(node.test)
            then, then_type = self.expression(node.body)
            other, other_type = self.expression(node.orelse)
            if test_type != "bool" or then_type != other_type:
                raise ValueError(f"line {node.lineno}: a select needs a bool and one type")
            return f"({test} ? {then} : {other})", then_type
        raise ValueError(f"line {node.lineno}: {type(node).__name__} is not translated")

    def _name(self, name: str) -> tuple[str, str]:
        if name == self.parameter:
            return self.input_expression, "float"
        if name in self.types:
            return self.prefix + name, self.types[name]
        if hasattr(formulas_f32_single, name):
            return _literal(getattr(formulas_f32_single, name))
        raise ValueError(f"unknown name {name!r}")

    def _call(self, node: ast.Call) -> tuple[str, str]:
        function = node.func
        if _is_cast(node):
            assert isinstance(function, ast.Attribute)
            return self._cast(_CASTS[function.attr], node.args[0])
        if not isinstance(function, ast.Name):
            raise ValueError(f"line {node.lineno}: call of {ast.unparse(function)}")
        # NOTE: a bit view of a uint goes straight to the float (as_type<float>
        # of the uint), not through int: converting a uint above 2^31 to int
        # is implementation-defined in C++14, the Metal language's base.
        if function.id == "i32_as_f32" and len(node.args) == 1 and _is_cast(node.args[0], "int32"):
            inner = node.args[0]
            assert isinstance(inner, ast.Call)
            text, kind = self.expression(inner.args[0])
            if kind == "uint":
                return f"as_type<float>({text})", "float"
        args = [self.expression(a) for a in node.args]
        kinds = [k for _, k in args]
        texts = [t for t, _ in args]
        if function.id == "mul32" and kinds == ["float"] * 2:
            return f"({texts[0]} * {texts[1]})", "float"
        if function.id == "fma32" and kinds == ["float"] * 3:
            return f"fma({', '.join(texts)})", "float"
        if function.id == "f32_as_i32" and kinds == ["float"]:
            return f"as_type<int>({texts[0]})", "int"
        if function.id == "i32_as_f32" and kinds == ["int"]:
            return f"as_type<float>({texts[0]})", "float"
        raise ValueError(f"line {node.lineno}: {function.id}{tuple(kinds)} is not translated")

    def _cast(self, target: str, argument: ast.expr) -> tuple[str, str]:
        if isinstance(argument, ast.Constant) and type(argument.value) is int:
            if target == "float":
                raise ValueError("a float constant must be a module constant")
            numpy_type = {"int": np.int32, "uint": np.uint32, "ulong": np.uint64}[target]
            return _literal(numpy_type(argument.value))
        # As above, the uint view of a float is one as_type, not int's.
        if (
            target == "uint"
            and isinstance(argument, ast.Call)
            and isinstance(argument.func, ast.Name)
            and argument.func.id == "f32_as_i32"
            and len(argument.args) == 1
        ):
            text, kind = self.expression(argument.args[0])
            if kind == "float":
                return f"as_type<uint>({text})", "uint"
        text, kind = self.expression(argument)
        return (text, kind) if kind == target else (f"{target}({text})", target)

    def statements(self, body: list[ast.stmt], output: str) -> list[str]:
        """Translate a function's statements; its return becomes ``output = ...;``."""
        lines = []
        for number, statement in enumerate(body):
            if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
                continue  # a docstring
            if isinstance(statement, ast.Return) and statement.value is not None:
                if number != len(body) - 1:
                    raise ValueError(f"line {statement.lineno}: return before the end")
                text, kind = self.expression(statement.value)
                if kind != "float":
                    raise ValueError(f"line {statement.lineno}: returns {kind}, not float")
                lines.append(f"{output} = {text};")
                continue
            if not (
                isinstance(statement, ast.Assign)
                and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name)
            ):
                raise ValueError(f"line {statement.lineno}: only `name = expression` and return")
            name = statement.targets[0].id
            inlined = self._inlined_call(statement.value, name)
            if inlined is not None:
                lines += inlined
                continue
            text, kind = self.expression(statement.value)
            if name in self.types:
                if self.types[name] != kind:
                    raise ValueError(
                        f"line {statement.lineno}: {name} was {self.types[name]}, now {kind}"
                    )
                lines.append(f"{self.prefix}{name} = {text};")
            else:
                self.types[name] = kind
                lines.append(f"{kind} {self.prefix}{name} = {text};")
        if not lines or not lines[-1].startswith(output):
            raise ValueError("the function must end with a return")
        return lines

    def _inlined_call(self, value: ast.expr, name: str) -> list[str] | None:
        """``name = helper(local)`` for another formula of the module, inlined in a block."""
        if not (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id not in _PRIMITIVES
            and len(value.args) == 1
            and isinstance(value.args[0], ast.Name)
        ):
            return None
        callee = _function_node(value.func.id)
        argument, kind = self.expression(value.args[0])
        if kind != "float" or len(callee.args.args) != 1:
            raise ValueError(f"line {value.lineno}: a formula call takes one float")
        if name in self.types:
            raise ValueError(f"line {value.lineno}: {name} is assigned a call twice")
        self.types[name] = "float"
        # The block scopes the callee's locals; the last word of its name
        # keeps them apart from the caller's in a reader's eye.
        prefix = f"{self.prefix}{callee.name.rsplit('_', 1)[-1]}_"
        inner = _Translation(callee.args.args[0].arg, argument, prefix)
        body = inner.statements(callee.body, self.prefix + name)
        return [f"float {self.prefix}{name};", "{", *("    " + line for line in body), "}"]


def _is_cast(node: ast.expr, to: str | None = None) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "np"
        and node.func.attr in _CASTS
        and (to is None or node.func.attr == to)
        and len(node.args) == 1
    )


def _function_node(name: str) -> ast.FunctionDef:
    tree = ast.parse(inspect.getsource(formulas_f32_single))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise ValueError(f"no function {name!r} in {formulas_f32_single.__name__}")


def metal_statements(input_expression: str, output: str, name: str = FUNCTION) -> list[str]:
    """The Metal statements of one formula of :mod:`cbrtgrad.kernels.formulas_f32_single`.

    Parameters
    ----------
    input_expression : str
        Metal expression of the function's one float argument.
    output : str
        Metal lvalue that the returned float is assigned to.
    name : str
        The function's name in the formula module.

    Returns
    -------
    list of str
        One statement a line: the function's body, its locals declared
        with their types (named with the prefix ``cr_``).

    Raises
    ------
    ValueError
        When the function uses a construct the translation does not know.

    Examples
    --------
    >>> lines = metal_statements("x[i]", "y[i]")
    >>> lines[0]
    'uint cr_ix = as_type<uint>(x[i]);'
    >>> lines[-1]
    'y[i] = as_type<float>(cr_result);'
    """
    node = _function_node(name)
    if len(node.args.args) != 1:
        raise ValueError(f"{name} must take one argument")
    translation = _Translation(node.args.args[0].arg, input_expression)
    return translation.statements(node.body, output)


def metal_kernel_source(input_name: str = "x", output_name: str = "y") -> str:
    """The body of a Metal kernel: the correctly rounded float32 cube root of each element.

    For ``mx.fast.metal_kernel(name=..., input_names=[input_name],
    output_names=[output_name], source=metal_kernel_source())``: thread ``i``
    of the grid (``thread_position_in_grid.x``) writes ``cbrt(x[i])`` to
    ``y[i]``, with the bits of ``cbrtgrad.cbrt`` on float32 (zeros, infinities,
    nans and subnormals included), so the grid is the array's size and the
    arrays row contiguous (metal_kernel's default copies them so). It is
    generated from ``cube_root_f32_single`` (float32 arithmetic, ``fma`` and
    integers only: Metal has no float64). Compile it with MLX's default
    ``compile_options={"math_mode": "safe"}``: under ``"relaxed"`` or
    ``"fast"`` the compiler may rewrite its float steps, and correct rounding
    is not claimed there.

    NOTE: checked here compiled as C++ by g++ (tests/test_metal_source.py,
    all 2^32 inputs under ``-m slow``); it has not run on an Apple GPU.

    Parameters
    ----------
    input_name, output_name : str
        The names given to ``metal_kernel`` for the float32 input and output.

    Returns
    -------
    str
        Metal statements, one a line.

    Examples
    --------
    >>> source = metal_kernel_source()
    >>> print(source.splitlines()[0])
    uint cr_index = thread_position_in_grid.x;
    >>> "fma(" in source and "double" not in source
    True

    On a Mac with MLX (not run here)::

        kernel = mx.fast.metal_kernel(
            name="cbrtgrad_cbrt_f32", input_names=["x"], output_names=["y"],
            source=metal_kernel_source())
        (y,) = kernel(inputs=[x], output_shapes=[x.shape], output_dtypes=[mx.float32],
                      grid=(x.size, 1, 1), threadgroup=(256, 1, 1))
    """
    index = _PREFIX + "index"
    lines = [f"uint {index} = thread_position_in_grid.x;"]
    lines += metal_statements(f"{input_name}[{index}]", f"{output_name}[{index}]")
    return "\n".join(lines) + "\n"
