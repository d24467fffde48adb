// cbrtgrad.torch's entry for small calls: the calls that no autograd records
// and that PyTorch's dispatcher would only hand to the CPU kernel, run in C++.
//
// From Python such a call costs several times torch.exp's (docs/pytorch.md): a
// numpy view of the tensor, numpy's ufunc call, torch.from_numpy of its
// result, and a dozen tests of PyTorch's state, each a call of 50 to 100 ns.
// Here the same tests are a few loads, the result is PyTorch's at::empty, and
// the kernel is one of the numba loops of cbrtgrad/kernels/handlers/buffer_loops.py,
//     void loop(int64 n, int64 a, int64 a_constant, int64 b, int64 out),
// whose addresses cbrtgrad/torch/_native.py sets (set_loop), so the bits are
// the ufuncs' (the loops run the ufuncs' block entries).
//
// Each function answers None where the call must go another way (the Python
// route of cbrtgrad/torch/_functions.py, which handles everything), and
// NotImplemented where it would run but the loop for its dtype is not set
// yet. None for anything but plain CPU tensors of float32 or float64 (no
// subclass, no negative or conjugate bit, no functorch wrapper, no fake
// tensor: the tensor's dispatch keys are the plain ones), for a tensor that
// requires grad while grad mode is on, and while anything would act between
// the call and the kernel: a torch.func transform, a dispatch mode or a jit
// trace (keys in the thread's included set), a torch function mode. The
// caller tests the rest in Python: dynamo (torch.compile), forward-mode AD,
// cbrtgrad's use_backend, and the size limit it passes.
//
// Built once per machine by cbrtgrad/torch/_native.py against the installed
// PyTorch (its headers and libraries), with the Python C API alone (no
// pybind11): nothing here is compiled at install time.

#include <Python.h>

#include <cstdint>
#include <exception>

#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/csrc/autograd/python_variable.h>

namespace {

using Loop = void (*)(int64_t, int64_t, int64_t, int64_t, int64_t);

// set_loop's kernel index: 0 the cube root, 1 its gradient; then float32, float64.
Loop loops[2][2] = {{nullptr, nullptr}, {nullptr, nullptr}};

// The thread's included keys outside every transform, mode and trace.
const c10::DispatchKeySet kQuietThread(
    {c10::DispatchKey::BackendSelect, c10::DispatchKey::ADInplaceOrView});
// A plain dense CPU tensor's keys (an inference tensor has fewer).
const c10::DispatchKeySet kPlainTensor(
    {c10::DispatchKey::CPU, c10::DispatchKey::ADInplaceOrView, c10::DispatchKey::AutogradCPU,
     c10::DispatchKey::AutocastCPU});

bool quiet_thread() {
  return kQuietThread.isSupersetOf(c10::impl::tls_local_dispatch_key_set().included_) &&
      c10::impl::TorchDispatchModeTLS::stack_len() == 0 &&
      !at::impl::torch_function_mode_enabled();
}

// The tensor if `object` is a plain CPU tensor of float32 or float64 that
// reverse mode would not record; else nullptr. `column` is 0 or 1 by dtype.
const at::Tensor* plain(PyObject* object, int* column) {
  if (!THPVariable_CheckExact(object)) {
    return nullptr;
  }
  const at::Tensor& t = THPVariable_Unpack(object);
  if (!kPlainTensor.isSupersetOf(t.key_set()) ||
      (t.requires_grad() && c10::GradMode::is_enabled())) {
    return nullptr;
  }
  const auto dtype = t.scalar_type();
  if (dtype == at::kFloat) {
    *column = 0;
  } else if (dtype == at::kDouble) {
    *column = 1;
  } else {
    return nullptr;
  }
  return &t;
}

// A size limit from Python: the number of elements from which the caller's
// route takes another backend (0: none go here).
bool read_limit(PyObject* object, int64_t* limit) {
  *limit = PyLong_AsLongLong(object);
  return !(*limit == -1 && PyErr_Occurred());
}

// From how many elements a loop runs without the GIL, as numpy's ufunc loops
// do (another Python thread may run meanwhile); below it, releasing and taking
// the GIL back would cost more than the loop (some 0.1 us).
constexpr int64_t kWithoutGilFrom = 4096;

void run(Loop loop, int64_t n, int64_t a, int64_t a_constant, int64_t b, int64_t out) {
  if (n < kWithoutGilFrom) {
    loop(n, a, a_constant, b, out);
    return;
  }
  Py_BEGIN_ALLOW_THREADS
  loop(n, a, a_constant, b, out);
  Py_END_ALLOW_THREADS
}

int64_t address(const at::Tensor& t) {
  return static_cast<int64_t>(reinterpret_cast<std::uintptr_t>(t.const_data_ptr()));
}

int64_t address_out(at::Tensor& t) {
  return static_cast<int64_t>(reinterpret_cast<std::uintptr_t>(t.mutable_data_ptr()));
}

PyObject* none() {
  Py_RETURN_NONE;
}

PyObject* not_implemented() {
  Py_RETURN_NOTIMPLEMENTED;
}

// cube_root(x, limit): cbrt(x) in a new contiguous tensor, or None/NotImplemented.
PyObject* cube_root(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "cube_root(x, limit) takes 2 arguments");
    return nullptr;
  }
  int64_t limit = 0;
  if (!read_limit(args[1], &limit)) {
    return nullptr;
  }
  int column = 0;
  const at::Tensor* x = plain(args[0], &column);
  if (x == nullptr || !quiet_thread() || x->numel() >= limit || !x->is_contiguous()) {
    return none();
  }
  const Loop loop = loops[0][column];
  if (loop == nullptr) {
    return not_implemented();
  }
  try {
    at::Tensor y = at::empty(x->sizes(), x->options());
    run(loop, x->numel(), address(*x), 0, 0, address_out(y));
    return THPVariable_Wrap(std::move(y));
  } catch (const std::exception& error) {
    PyErr_SetString(PyExc_RuntimeError, error.what());
    return nullptr;
  }
}

// Whether g and y go to the gradient loop as they are: one dtype and shape,
// y contiguous, g contiguous or one value broadcast (every stride 0).
bool gradient_operands(const at::Tensor& g, const at::Tensor& y, bool* constant) {
  if (g.scalar_type() != y.scalar_type() || !g.sizes().equals(y.sizes()) ||
      !y.is_contiguous()) {
    return false;
  }
  *constant = false;
  if (g.is_contiguous()) {
    return true;
  }
  for (const auto stride : g.strides()) {
    if (stride != 0) {
      return false;
    }
  }
  *constant = true;
  return true;
}

// What the checks of a call's arguments say: run it, answer None, or raise
// (the Python error set).
enum class Answer { run, none, error };

// The operands of the two-operand calls, read from (a, b, limit): the
// gradient's input g is args[g_at], the other (y, or x) args[1 - g_at]; both
// plain tensors of one dtype and shape, the other contiguous and g contiguous
// or constant, fewer elements than the limit, and a quiet thread.
struct Operands {
  const at::Tensor* g = nullptr;
  const at::Tensor* other = nullptr;
  int column = 0;
  bool constant = false;
};

Answer read_operands(PyObject* const* args, Py_ssize_t nargs, const char* usage, int g_at,
                     Operands* operands) {
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, usage);
    return Answer::error;
  }
  int64_t limit = 0;
  if (!read_limit(args[2], &limit)) {
    return Answer::error;
  }
  int g_column = 0;
  operands->g = plain(args[g_at], &g_column);
  operands->other = plain(args[1 - g_at], &operands->column);
  if (operands->g == nullptr || operands->other == nullptr || !quiet_thread() ||
      operands->other->numel() >= limit ||
      !gradient_operands(*operands->g, *operands->other, &operands->constant)) {
    return Answer::none;
  }
  return Answer::run;
}

// cube_root_grad(g, y, limit): g / (3 y^2) in a new contiguous tensor, or None/NotImplemented.
PyObject* cube_root_grad(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  Operands in;
  const Answer answer =
      read_operands(args, nargs, "cube_root_grad(g, y, limit) takes 3 arguments", 0, &in);
  if (answer != Answer::run) {
    return answer == Answer::none ? none() : nullptr;
  }
  const Loop loop = loops[1][in.column];
  if (loop == nullptr) {
    return not_implemented();
  }
  const at::Tensor& y = *in.other;
  try {
    at::Tensor dx = at::empty(y.sizes(), y.options());
    run(loop, y.numel(), address(*in.g), in.constant ? 1 : 0, address(y), address_out(dx));
    return THPVariable_Wrap(std::move(dx));
  } catch (const std::exception& error) {
    PyErr_SetString(PyExc_RuntimeError, error.what());
    return nullptr;
  }
}

// cube_root_and_grad(x, g, limit): (cbrt(x), g / (3 y^2)), the gradient from
// the rounded y (the bits of the fused kernel), or None/NotImplemented.
PyObject* cube_root_and_grad(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  Operands in;
  const Answer answer =
      read_operands(args, nargs, "cube_root_and_grad(x, g, limit) takes 3 arguments", 1, &in);
  if (answer != Answer::run) {
    return answer == Answer::none ? none() : nullptr;
  }
  const Loop forward = loops[0][in.column];
  const Loop gradient = loops[1][in.column];
  if (forward == nullptr || gradient == nullptr) {
    return not_implemented();
  }
  const at::Tensor& x = *in.other;
  const int64_t n = x.numel();
  try {
    at::Tensor y = at::empty(x.sizes(), x.options());
    at::Tensor dx = at::empty(x.sizes(), x.options());
    run(forward, n, address(x), 0, 0, address_out(y));
    run(gradient, n, address(*in.g), in.constant ? 1 : 0, address(y), address_out(dx));
    PyObject* first = THPVariable_Wrap(std::move(y));
    PyObject* second = first == nullptr ? nullptr : THPVariable_Wrap(std::move(dx));
    PyObject* pair = second == nullptr ? nullptr : PyTuple_Pack(2, first, second);
    Py_XDECREF(first);
    Py_XDECREF(second);
    return pair;
  } catch (const std::exception& error) {
    PyErr_SetString(PyExc_RuntimeError, error.what());
    return nullptr;
  }
}

// set_loop(kernel, column, address): kernel 0 the cube root, 1 the gradient;
// column 0 float32, 1 float64; address a loop of buffer_loops.py.
PyObject* set_loop(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "set_loop(kernel, column, address) takes 3 arguments");
    return nullptr;
  }
  const long kernel = PyLong_AsLong(args[0]);
  const long column = PyLong_AsLong(args[1]);
  void* loop = PyLong_AsVoidPtr(args[2]);
  if (PyErr_Occurred()) {
    return nullptr;
  }
  if (kernel < 0 || kernel > 1 || column < 0 || column > 1 || loop == nullptr) {
    PyErr_SetString(PyExc_ValueError, "set_loop: kernel and column are 0 or 1, address nonzero");
    return nullptr;
  }
  loops[kernel][column] = reinterpret_cast<Loop>(loop);
  Py_RETURN_NONE;
}

PyMethodDef methods[] = {
    {"cube_root", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(cube_root)),
     METH_FASTCALL, "cube_root(x, limit): cbrt(x), or None/NotImplemented"},
    {"cube_root_grad",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(cube_root_grad)), METH_FASTCALL,
     "cube_root_grad(g, y, limit): g / (3 y^2), or None/NotImplemented"},
    {"cube_root_and_grad",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(cube_root_and_grad)),
     METH_FASTCALL, "cube_root_and_grad(x, g, limit): both, or None/NotImplemented"},
    {"set_loop", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(set_loop)),
     METH_FASTCALL, "set_loop(kernel, column, address)"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cbrtgrad_torch",
                      "cbrtgrad.torch's entry for small calls (cbrtgrad/torch/_entry.cpp)", -1,
                      methods};

}  // namespace

PyMODINIT_FUNC PyInit__cbrtgrad_torch() {
  return PyModule_Create(&module);
}
