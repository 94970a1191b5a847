// Argument parsing and checking for the addon's exports. An Args object reads the JS arguments of
// one call; the first problem throws a JS TypeError / RangeError naming the function and the
// argument, and marks the Args as failed so the export returns without running its kernel.
#pragma once

#define NAPI_VERSION 8
#include <node_api.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

namespace tsorch {

// A TypedArray argument: its data at the view's byteOffset, and its length in bytes.
struct Buffer {
  void* data = nullptr;
  size_t bytes = 0;
  const char* name = "";
  bool given = false;  // a TypedArray was passed (data may be null for an empty one)
};

// One argument of a call recorded into a native graph (graph.cc), read once when the graph is
// built: null / undefined, a TypedArray's bytes, a number, or an array of numbers.
struct RecordedArg {
  enum Kind { kNull, kBuffer, kNumber, kNumbers } kind = kNull;
  Buffer buffer;
  double number = 0;
  std::vector<double> numbers;
};

class Args {
 public:
  // Reads the JS arguments of `info`; while a native graph replays a node (ReplayScope), it reads
  // that node's recorded arguments instead, with the same checks.
  Args(napi_env env, napi_callback_info info, const char* fn, size_t count);

  bool failed() const { return failed_; }

  // A TypedArray (or, when `nullable`, null / undefined: then data is null).
  Buffer buffer(size_t i, const char* name, bool nullable = false);
  // A number that is an integer in [lo, hi].
  int64_t integer(size_t i, const char* name, int64_t lo = 0, int64_t hi = int64_t(1) << 53);
  // Any number.
  double number(size_t i, const char* name);
  // An array of `len` integers (any length when len is -1); `lo` bounds every entry.
  std::vector<int64_t> ints(size_t i, const char* name, int64_t len = -1, int64_t lo = INT64_MIN);
  // A dtype code (0..5).
  int dtype(size_t i, const char* name);

  // Throws TypeError (type_error) or RangeError with a printf-style message unless `ok`.
  bool check(bool ok, bool type_error, const char* fmt, ...);

  // Checks that `b` can hold every element that `shape` / `strides` reach from element 0
  // (a null buffer passes: optional arguments are checked by the caller), and that it is aligned
  // to the element size of `dtype`.
  // Shapes and strides are braced lists ({M, K}) or vectors, read in place: fits runs on every
  // kernel call, also inside graph replays, so it allocates nothing.
  bool fits(const Buffer& b, int dtype, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
    return fits_dims(b, dtype, shape.data(), shape.size(), strides.data(), strides.size());
  }
  bool fits(const Buffer& b, int dtype, std::initializer_list<int64_t> shape, const std::vector<int64_t>& strides) {
    return fits_dims(b, dtype, shape.begin(), shape.size(), strides.data(), strides.size());
  }
  bool fits(const Buffer& b, int dtype, std::initializer_list<int64_t> shape, std::initializer_list<int64_t> strides) {
    return fits_dims(b, dtype, shape.begin(), shape.size(), strides.begin(), strides.size());
  }
  // The same for a contiguous (row-major) tensor of `shape`.
  bool fits(const Buffer& b, int dtype, const std::vector<int64_t>& shape) { return fits_contiguous(b, dtype, shape.data(), shape.size()); }
  bool fits(const Buffer& b, int dtype, std::initializer_list<int64_t> shape) { return fits_contiguous(b, dtype, shape.begin(), shape.size()); }

 private:
  bool fits_dims(const Buffer& b, int dtype, const int64_t* shape, size_t ndim, const int64_t* strides, size_t nstrides);
  bool fits_contiguous(const Buffer& b, int dtype, const int64_t* shape, size_t ndim);

  napi_env env_;
  static constexpr size_t kMaxArgs = 48;  // the most any export takes (decodeAttention)
  napi_value argv_[kMaxArgs];
  const std::vector<RecordedArg>* recorded_ = nullptr;
  const char* fn_;
  bool failed_ = false;
};

// While alive, every Args constructed on this thread reads `args` instead of its callback info:
// graph.cc runs an export with a node's recorded arguments this way, without any JS call.
class ReplayScope {
 public:
  explicit ReplayScope(const std::vector<RecordedArg>* args);
  ~ReplayScope();
  ReplayScope(const ReplayScope&) = delete;
  ReplayScope& operator=(const ReplayScope&) = delete;

 private:
  const std::vector<RecordedArg>* previous_;
};

// JavaScript's undefined (what an export returns when it only writes its outputs).
napi_value undefined(napi_env env);

// Checks that dtype code `dt` is float32, float16 or bfloat16 (else records an error naming `name`).
bool float_dtype(Args& args, int dt, const char* name);

// Checks that each of the T int32 pool slots is in [0, pool_slots) (else records an error naming
// the first one outside): the paged KV writes' slot check.
bool slots_in_pool(Args& args, const int32_t* slots, int64_t T, int64_t pool_slots);

}  // namespace tsorch
