// cbrtgrad's two MLX primitives, CubeRoot and CubeRootGrad: the graph nodes of
// cbrtgrad.mlx, evaluated on the CPU by cbrtgrad's numba kernels.
//
// A primitive holds the addresses of two numba cfuncs (cbrtgrad/kernels/
// buffer_loops.py), one running on the calling thread and one on numba's
// threads (0: none), and the element count from which the threaded one is
// taken. Its CPU evaluation allocates the output and dispatches one call,
//     void loop(int64 n, int64 a, int64 a_constant, int64 b, int64 out),
// onto the stream's command encoder, as MLX's own CPU primitives do. The
// loops take contiguous buffers: an operand that is not row-contiguous is
// gathered into a temporary buffer first, but a cotangent broadcast from one
// element (the gradient of a sum) is passed as that one element.
//
// vmap is element-wise (the batch axis stays where it is, or both operands'
// move to the front). cbrtgrad.mlx wraps each primitive in an
// mx.custom_function whose vjp and jvp are cbrtgrad's correctly rounded
// gradient; the gradient primitive's own vjp and jvp are the same rules, the
// forward primitive's are g / (3 y^2) in MLX's ops (it holds no gradient loop).
//
// Built once per machine by cbrtgrad/mlx/_build.py (CMake, nanobind, the
// MLX wheel's headers and libmlx); nothing here is compiled at install time.

#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/vector.h>

#include "mlx/allocator.h"
#include "mlx/backend/cpu/encoder.h"
#include "mlx/ops.h"
#include "mlx/primitives.h"

namespace nb = nanobind;
namespace mx = mlx::core;

namespace cbrtgrad_mlx {

using Loop = void (*)(int64_t, int64_t, int64_t, int64_t, int64_t);

struct Loops {
  std::uintptr_t serial = 0;
  std::uintptr_t threads = 0; // 0: no threaded loop
  int64_t threads_from = 0; // element count from which `threads` runs
};

mx::array cube_root(const mx::array& x, const Loops& loops);
mx::array cube_root_grad(const mx::array& g, const mx::array& y, const Loops& loops);

// An operand as the loops take it: a contiguous buffer (or one element).
struct Operand {
  const char* data = nullptr;
  bool constant = false;
  bool gather = false;
  mx::Shape shape;
  mx::Strides strides;
};

Operand operand(const mx::array& a, bool may_be_constant) {
  Operand op;
  op.data = a.data<char>();
  if (a.flags().row_contiguous) {
    return op;
  }
  bool all_zero = true;
  for (auto s : a.strides()) {
    all_zero = all_zero && s == 0;
  }
  if (may_be_constant && all_zero) {
    op.constant = true;
    return op;
  }
  op.gather = true;
  op.shape = a.shape();
  op.strides = a.strides();
  return op;
}

// Copies the operand's elements in row-major order into `buffer`.
void gather(const Operand& op, size_t itemsize, int64_t n, std::vector<char>& buffer) {
  buffer.resize(static_cast<size_t>(n) * itemsize);
  int ndim = static_cast<int>(op.shape.size());
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i, offset = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      offset += (rest % op.shape[d]) * op.strides[d];
      rest /= op.shape[d];
    }
    std::memcpy(buffer.data() + i * itemsize, op.data + offset * itemsize, itemsize);
  }
}

class CubeRootPrimitive : public mx::Primitive {
 public:
  CubeRootPrimitive(mx::Stream stream, bool grad, Loops loops)
      : mx::Primitive(stream), grad_(grad), loops_(loops) {}

  void eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override {
    auto& out = outputs[0];
    out.set_data(mx::allocator::malloc(out.nbytes()));
    auto& encoder = mx::cpu::get_command_encoder(stream());
    for (auto& a : inputs) {
      encoder.set_input_array(a);
    }
    encoder.set_output_array(out);
    int64_t n = static_cast<int64_t>(out.size());
    std::uintptr_t chosen =
        (loops_.threads != 0 && n >= loops_.threads_from) ? loops_.threads : loops_.serial;
    Operand a = operand(inputs[0], grad_);
    Operand b = grad_ ? operand(inputs[1], false) : Operand{};
    encoder.dispatch([a = std::move(a), b = std::move(b), grad = grad_, n, chosen,
                      itemsize = out.itemsize(), out_data = out.data<char>()]() {
      if (n == 0) {
        return;
      }
      std::vector<char> a_buffer, b_buffer;
      const char* a_data = a.data;
      const char* b_data = b.data;
      if (a.gather) {
        gather(a, itemsize, n, a_buffer);
        a_data = a_buffer.data();
      }
      if (grad && b.gather) {
        gather(b, itemsize, n, b_buffer);
        b_data = b_buffer.data();
      }
      reinterpret_cast<Loop>(chosen)(
          n, reinterpret_cast<int64_t>(a_data), a.constant ? 1 : 0,
          reinterpret_cast<int64_t>(grad ? b_data : a_data), reinterpret_cast<int64_t>(out_data));
    });
  }

  void eval_gpu(const std::vector<mx::array>&, std::vector<mx::array>&) override {
    throw std::runtime_error(
        "cbrtgrad.mlx: the cube root primitives run on MLX's CPU device only (no GPU kernel is "
        "built here); evaluate them on mx.cpu");
  }

  // The rules of the custom functions in cbrtgrad/mlx/_functions.py, the
  // same ops in the same order: MLX's jvp also walks the nodes inside a
  // custom function (their results are dropped, and never evaluated).
  std::vector<mx::array> jvp(
      const std::vector<mx::array>& primals, const std::vector<mx::array>& tangents,
      const std::vector<int>& argnums) override {
    if (!grad_) {
      return {gradient_by_ops(tangents[0], cube_root(primals[0], loops_))};
    }
    auto out = cube_root_grad(primals[0], primals[1], loops_);
    std::vector<mx::array> parts;
    for (size_t i = 0; i < argnums.size(); ++i) {
      parts.push_back(argnums[i] == 0 ? cube_root_grad(tangents[i], primals[1], loops_)
                                      : d_dy(tangents[i], out, primals[1]));
    }
    return {parts.size() == 1 ? parts[0] : mx::add(parts[0], parts[1], stream())};
  }

  std::vector<mx::array> vjp(
      const std::vector<mx::array>& primals, const std::vector<mx::array>& cotangents,
      const std::vector<int>& argnums, const std::vector<mx::array>& outputs) override {
    if (!grad_) {
      return {gradient_by_ops(cotangents[0], outputs[0])};
    }
    std::vector<mx::array> result;
    for (int arg : argnums) {
      result.push_back(arg == 0 ? cube_root_grad(cotangents[0], primals[1], loops_)
                                : d_dy(cotangents[0], outputs[0], primals[1]));
    }
    return result;
  }

  std::pair<std::vector<mx::array>, std::vector<int>> vmap(
      const std::vector<mx::array>& inputs, const std::vector<int>& axes) override {
    if (!grad_) {
      return {{cube_root(inputs[0], loops_)}, {axes[0]}};
    }
    if (axes[0] == axes[1]) {
      return {{cube_root_grad(inputs[0], inputs[1], loops_)}, {axes[0]}};
    }
    // The batch axis first in both; an unbatched operand gets a leading axis
    // of one, which cube_root_grad broadcasts.
    std::vector<mx::array> front;
    for (size_t i = 0; i < 2; ++i) {
      front.push_back(axes[i] < 0 ? mx::expand_dims(inputs[i], 0, stream())
                                  : mx::moveaxis(inputs[i], axes[i], 0, stream()));
    }
    return {{cube_root_grad(front[0], front[1], loops_)}, {0}};
  }

  std::vector<mx::Shape> output_shapes(const std::vector<mx::array>& inputs) override {
    return {inputs[0].shape()};
  }

  const char* name() const override {
    return grad_ ? "CubeRootGrad" : "CubeRoot";
  }

  bool is_equivalent(const mx::Primitive& other) const override {
    auto& o = static_cast<const CubeRootPrimitive&>(other);
    return grad_ == o.grad_ && loops_.serial == o.loops_.serial &&
        loops_.threads == o.loops_.threads && loops_.threads_from == o.loops_.threads_from;
  }

 private:
  // The forward primitive holds the forward's loops only, so its own rules
  // are g / (3 y^2) in MLX's ops: used only where the primitive is
  // differentiated outside its custom function (MLX's jvp walks the nodes
  // inside one and drops their results); cbrtgrad.mlx's functions carry
  // the correctly rounded rules.
  mx::array gradient_by_ops(const mx::array& g, const mx::array& y) {
    auto three = mx::array(3.0, y.dtype());
    return mx::divide(
        g, mx::multiply(three, mx::multiply(y, y, stream()), stream()), stream());
  }

  // t d/dy (g / (3 y^2)) = t (-2 out / y), out = g / (3 y^2).
  mx::array d_dy(const mx::array& t, const mx::array& out, const mx::array& y) {
    auto minus_two = mx::array(-2.0, y.dtype());
    return mx::multiply(
        t, mx::divide(mx::multiply(minus_two, out, stream()), y, stream()), stream());
  }

  bool grad_;
  Loops loops_;
};

mx::array cube_root(const mx::array& x, const Loops& loops) {
  auto s = mx::to_stream(mx::Device::cpu);
  return mx::array(x.shape(), x.dtype(), std::make_shared<CubeRootPrimitive>(s, false, loops), {x});
}

mx::array cube_root_grad(const mx::array& g, const mx::array& y, const Loops& loops) {
  auto s = mx::to_stream(mx::Device::cpu);
  auto both = mx::broadcast_arrays({g, y}, s);
  return mx::array(
      both[0].shape(), y.dtype(), std::make_shared<CubeRootPrimitive>(s, true, loops), both);
}

Loops loops_of(std::uintptr_t serial, std::uintptr_t threads, int64_t threads_from) {
  if (serial == 0) {
    throw std::invalid_argument("cbrtgrad.mlx: a primitive needs its loop's address");
  }
  return Loops{serial, threads, threads_from};
}

} // namespace cbrtgrad_mlx

NB_MODULE(_cbrtgrad_mlx, m) {
  using namespace cbrtgrad_mlx;
  m.doc() = "cbrtgrad's MLX primitives (cbrtgrad/mlx/_primitive.cpp)";
  m.def(
      "cube_root",
      [](const mx::array& x, std::uintptr_t serial, std::uintptr_t threads, int64_t threads_from) {
        return cube_root(x, loops_of(serial, threads, threads_from));
      },
      nb::arg("x"), nb::arg("serial"), nb::arg("threads"), nb::arg("threads_from"));
  m.def(
      "cube_root_grad",
      [](const mx::array& g, const mx::array& y, std::uintptr_t serial, std::uintptr_t threads,
         int64_t threads_from) {
        return cube_root_grad(g, y, loops_of(serial, threads, threads_from));
      },
      nb::arg("g"), nb::arg("y"), nb::arg("serial"), nb::arg("threads"), nb::arg("threads_from"));
}
