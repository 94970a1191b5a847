// Argument parsing and checking for the addon's exports (see napi_args.h).
#include "napi_args.h"

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <string>

#include "dtype.h"

namespace tsorch {

namespace {

size_t typedarray_element_size(napi_typedarray_type t) {
  switch (t) {
    case napi_int8_array: case napi_uint8_array: case napi_uint8_clamped_array: return 1;
    case napi_int16_array: case napi_uint16_array: return 2;
    case napi_int32_array: case napi_uint32_array: case napi_float32_array: return 4;
    default: return 8;  // float64, bigint64, biguint64
  }
}

thread_local const std::vector<RecordedArg>* replaying = nullptr;

}  // namespace

ReplayScope::ReplayScope(const std::vector<RecordedArg>* args) : previous_(replaying) {
  replaying = args;
}

ReplayScope::~ReplayScope() { replaying = previous_; }

Args::Args(napi_env env, napi_callback_info info, const char* fn, size_t count)
    : env_(env), recorded_(replaying), fn_(fn) {
  if (recorded_ != nullptr) {
    check(recorded_->size() == count, true, "expects %zu arguments, got %zu", count, recorded_->size());
    return;
  }
  if (!check(count <= kMaxArgs, true, "takes %zu arguments, more than Args reads (%zu)", count, kMaxArgs)) return;
  size_t argc = kMaxArgs;
  if (napi_get_cb_info(env, info, &argc, argv_, nullptr, nullptr) != napi_ok) {
    check(false, true, "could not read the arguments");
    return;
  }
  check(argc == count, true, "expects %zu arguments, got %zu", count, argc);
}

bool Args::check(bool ok, bool type_error, const char* fmt, ...) {
  if (failed_) return false;
  if (ok) return true;
  char msg[512];
  int n = std::snprintf(msg, sizeof(msg), "tsorch_cpu.%s: ", fn_);
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg + n, sizeof(msg) - n, fmt, ap);
  va_end(ap);
  if (type_error) napi_throw_type_error(env_, nullptr, msg);
  else napi_throw_range_error(env_, nullptr, msg);
  failed_ = true;
  return false;
}

Buffer Args::buffer(size_t i, const char* name, bool nullable) {
  Buffer b;
  b.name = name;
  if (failed_) return b;
  if (recorded_ != nullptr) {
    const RecordedArg& r = (*recorded_)[i];
    if (nullable && r.kind == RecordedArg::kNull) return b;
    if (!check(r.kind == RecordedArg::kBuffer, true, "argument '%s' must be a TypedArray%s", name,
               nullable ? " or null" : ""))
      return b;
    b.data = r.buffer.data;
    b.bytes = r.buffer.bytes;
    b.given = true;
    return b;
  }
  napi_valuetype t;
  napi_typeof(env_, argv_[i], &t);
  if (nullable && (t == napi_null || t == napi_undefined)) return b;
  bool is_typed = false;
  napi_is_typedarray(env_, argv_[i], &is_typed);
  if (!check(is_typed, true, "argument '%s' must be a TypedArray%s", name, nullable ? " or null" : ""))
    return b;
  napi_typedarray_type type;
  size_t length = 0;
  napi_get_typedarray_info(env_, argv_[i], &type, &length, &b.data, nullptr, nullptr);
  b.bytes = length * typedarray_element_size(type);
  b.given = true;
  return b;
}

double Args::number(size_t i, const char* name) {
  if (failed_) return 0;
  if (recorded_ != nullptr) {
    const RecordedArg& r = (*recorded_)[i];
    check(r.kind == RecordedArg::kNumber, true, "argument '%s' must be a number", name);
    return r.number;
  }
  napi_valuetype t;
  napi_typeof(env_, argv_[i], &t);
  if (!check(t == napi_number, true, "argument '%s' must be a number", name)) return 0;
  double d = 0;
  napi_get_value_double(env_, argv_[i], &d);
  return d;
}

int64_t Args::integer(size_t i, const char* name, int64_t lo, int64_t hi) {
  const double d = number(i, name);
  if (failed_) return 0;
  if (!check(std::floor(d) == d, false, "argument '%s' must be an integer, got %g", name, d)) return 0;
  if (!check(d >= static_cast<double>(lo) && d <= static_cast<double>(hi), false,
             "argument '%s' = %.0f is out of range [%lld, %lld]", name, d,
             static_cast<long long>(lo), static_cast<long long>(hi)))
    return 0;
  return static_cast<int64_t>(d);
}

std::vector<int64_t> Args::ints(size_t i, const char* name, int64_t len, int64_t lo) {
  std::vector<int64_t> out;
  if (failed_) return out;
  if (recorded_ != nullptr) {
    const RecordedArg& r = (*recorded_)[i];
    if (!check(r.kind == RecordedArg::kNumbers, true, "argument '%s' must be an array of integers", name))
      return out;
    const size_t n = r.numbers.size();
    if (!check(len < 0 || n == static_cast<size_t>(len), false,
               "argument '%s' must have %lld entries, got %zu", name, static_cast<long long>(len), n))
      return out;
    for (size_t k = 0; k < n; ++k) {
      const double d = r.numbers[k];
      const bool ok = std::floor(d) == d && std::fabs(d) <= 9007199254740992.0;
      if (!check(ok, false, "argument '%s'[%zu] must be an integer", name, k)) return out;
      if (!check(d >= static_cast<double>(lo), false, "argument '%s'[%zu] = %.0f must be >= %lld",
                 name, k, d, static_cast<long long>(lo)))
        return out;
      out.push_back(static_cast<int64_t>(d));
    }
    return out;
  }
  bool is_array = false;
  napi_is_array(env_, argv_[i], &is_array);
  if (!check(is_array, true, "argument '%s' must be an array of integers", name)) return out;
  uint32_t n = 0;
  napi_get_array_length(env_, argv_[i], &n);
  if (!check(len < 0 || n == static_cast<uint64_t>(len), false,
             "argument '%s' must have %lld entries, got %u", name, static_cast<long long>(len), n))
    return out;
  for (uint32_t k = 0; k < n; ++k) {
    napi_value e;
    napi_get_element(env_, argv_[i], k, &e);
    napi_valuetype t;
    napi_typeof(env_, e, &t);
    double d = 0;
    if (t == napi_number) napi_get_value_double(env_, e, &d);
    const bool ok = t == napi_number && std::floor(d) == d && std::fabs(d) <= 9007199254740992.0;
    if (!check(ok, t != napi_number, "argument '%s'[%u] must be an integer", name, k)) return out;
    if (!check(d >= static_cast<double>(lo), false, "argument '%s'[%u] = %.0f must be >= %lld",
               name, k, d, static_cast<long long>(lo)))
      return out;
    out.push_back(static_cast<int64_t>(d));
  }
  return out;
}

int Args::dtype(size_t i, const char* name) {
  return static_cast<int>(integer(i, name, 0, kNumDTypes - 1));
}

bool Args::fits_dims(const Buffer& b, int dtype, const int64_t* shape, size_t ndim, const int64_t* strides, size_t nstrides) {
  if (failed_) return false;
  if (!check(ndim == nstrides, false, "strides of '%s' have %zu entries but its shape has %zu dims", b.name,
             nstrides, ndim))
    return false;
  int64_t lo = 0, hi = 0;
  for (size_t d = 0; d < ndim; ++d)
    if (shape[d] == 0) return true;  // empty: nothing is touched
  for (size_t d = 0; d < ndim; ++d) {
    int64_t span;
    bool overflow = __builtin_mul_overflow(shape[d] - 1, strides[d], &span);
    overflow = overflow || __builtin_add_overflow(span < 0 ? lo : hi, span, span < 0 ? &lo : &hi);
    if (!check(!overflow, false, "shape and strides of '%s' overflow", b.name)) return false;
  }
  if (!check(lo >= 0, false, "strides of '%s' reach before its element 0", b.name)) return false;
  const int esize = dtype_size(dtype);
  const double need = (static_cast<double>(hi) + 1) * esize;
  if (!check(need <= static_cast<double>(b.bytes), false,
             "argument '%s' (%s) needs %.0f bytes for the elements it is read or written at, but "
             "its view has %zu bytes",
             b.name, dtype_name(dtype), need, b.bytes))
    return false;
  return check(reinterpret_cast<uintptr_t>(b.data) % esize == 0, false,
               "argument '%s' (%s) must be %d-byte aligned (byteOffset %% %d == 0)", b.name,
               dtype_name(dtype), esize, esize);
}

bool Args::fits_contiguous(const Buffer& b, int dtype, const int64_t* shape, size_t ndim) {
  // Row-major strides on the stack for the shapes the kernels take (a vector past that).
  constexpr size_t kStackDims = 16;
  int64_t local[kStackDims];
  std::vector<int64_t> heap(ndim > kStackDims ? ndim : 0);
  int64_t* strides = ndim > kStackDims ? heap.data() : local;
  int64_t acc = 1;
  bool overflow = false;
  for (size_t d = ndim; d-- > 0;) {
    strides[d] = acc;
    overflow = overflow || (shape[d] != 0 && __builtin_mul_overflow(acc, shape[d], &acc));
  }
  if (!check(!overflow, false, "the shape of '%s' overflows", b.name)) return false;
  return fits_dims(b, dtype, shape, ndim, strides, ndim);
}

napi_value undefined(napi_env env) {
  napi_value u;
  napi_get_undefined(env, &u);
  return u;
}

bool float_dtype(Args& args, int dt, const char* name) {
  return args.check(dtype_is_float(dt), true, "%s must be float32, float16 or bfloat16, got %s",
                    name, dtype_name(dt));
}

bool slots_in_pool(Args& args, const int32_t* slots, int64_t T, int64_t pool_slots) {
  for (int64_t t = 0; t < T; ++t)
    if (!args.check(slots[t] >= 0 && slots[t] < pool_slots, false, "slot %d of token %lld is outside the pool's %lld slots",
                    slots[t], static_cast<long long>(t), static_cast<long long>(pool_slots)))
      return false;
  return true;
}

}  // namespace tsorch
