// JavaScript bindings of the sampler kernels (kernels.h). Rows and outputs are
// typed arrays used in place (no copies); every length is checked against the
// arrays so a wrong call throws instead of touching memory it does not own.
// The TypeScript side is src/core/sample/native.ts.
#include <napi.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "kernels.h"

namespace {

template <typename T>
struct Kind;
template <>
struct Kind<float> {
  static constexpr napi_typedarray_type type = napi_float32_array;
  static constexpr const char* name = "a Float32Array";
};
template <>
struct Kind<double> {
  static constexpr napi_typedarray_type type = napi_float64_array;
  static constexpr const char* name = "a Float64Array";
};
template <>
struct Kind<int32_t> {
  static constexpr napi_typedarray_type type = napi_int32_array;
  static constexpr const char* name = "an Int32Array";
};
template <>
struct Kind<uint16_t> {
  static constexpr napi_typedarray_type type = napi_uint16_array;
  static constexpr const char* name = "a Uint16Array";
};

// Reads the arguments in order; the first bad one throws and the rest are skipped.
class Args {
 public:
  explicit Args(const Napi::CallbackInfo& info) : info_(info), env_(info.Env()) {}

  bool ok() const { return ok_; }
  Napi::Env env() const { return env_; }

  template <typename T>
  T* array(size_t index, size_t* length) {
    if (!ok_) return nullptr;
    napi_typedarray_type type;
    void* data = nullptr;
    if (napi_get_typedarray_info(env_, info_[index], &type, length, &data, nullptr, nullptr) != napi_ok ||
        type != Kind<T>::type) {
      return fail<T*>(true, index, Kind<T>::name);
    }
    return static_cast<T*>(data);
  }

  // A typed array with at least `need` elements.
  template <typename T>
  T* array(size_t index, size_t need, const char* what) {
    size_t length = 0;
    T* data = array<T>(index, &length);
    if (ok_ && length < need) return fail<T*>(false, index, what);
    return data;
  }

  double number(size_t index) {
    if (!ok_) return 0;
    double v = 0;
    if (napi_get_value_double(env_, info_[index], &v) != napi_ok) return fail<double>(true, index, "a number");
    return v;
  }

  // An integer in [min, max].
  size_t integer(size_t index, double min, double max) {
    const double v = number(index);
    if (ok_ && !(v >= min && v <= max && std::floor(v) == v)) return fail<size_t>(false, index, "in range");
    return static_cast<size_t>(v);
  }

  // The exp kernels need the table native.ts installs when it loads the addon.
  bool expTable() {
    if (ok_ && !ortserve::expTableReady()) {
      ok_ = false;
      Napi::Error::New(env_, "setExpTable() has not been called").ThrowAsJavaScriptException();
    }
    return ok_;
  }

  double temperature(size_t index) {
    const double t = number(index);
    if (ok_ && !(t > 0)) return fail<double>(false, index, "a positive temperature");
    return t;
  }

  bool boolean(size_t index) {
    if (!ok_) return false;
    bool v = false;
    if (napi_get_value_bool(env_, info_[index], &v) != napi_ok) return fail<bool>(true, index, "a boolean");
    return v;
  }

 private:
  template <typename R>
  R fail(bool typeError, size_t index, const char* what) {
    ok_ = false;
    const std::string message = "argument " + std::to_string(index) + " must be " + what;
    if (typeError)
      Napi::TypeError::New(env_, message).ThrowAsJavaScriptException();
    else
      Napi::RangeError::New(env_, message).ThrowAsJavaScriptException();
    return R{};
  }

  const Napi::CallbackInfo& info_;
  Napi::Env env_;
  bool ok_ = true;
};

Napi::Value number(Napi::Env env, double v) { return Napi::Number::New(env, v); }

// A row and its length: (row, length, ...).
const float* rowArg(Args& a, size_t* length) {
  size_t size = 0;
  const float* row = a.array<float>(0, &size);
  *length = a.integer(1, 0, static_cast<double>(size));
  return row;
}

// setExpTable(table: Float64Array): boolean
Napi::Value SetExpTable(const Napi::CallbackInfo& info) {
  Args a(info);
  const double* table = a.array<double>(0, ortserve::kExpTableSize, "the exp table");
  if (!a.ok()) return a.env().Undefined();
  return Napi::Boolean::New(a.env(), ortserve::setExpTable(table));
}

// setSimd(on: boolean): boolean, whether the AVX2 kernels are now in use.
Napi::Value SetSimd(const Napi::CallbackInfo& info) {
  Args a(info);
  const bool on = a.boolean(0);
  if (!a.ok()) return a.env().Undefined();
  return Napi::Boolean::New(a.env(), ortserve::setSimd(on));
}

// argmax(row, length): number
Napi::Value Argmax(const Napi::CallbackInfo& info) {
  Args a(info);
  size_t n;
  const float* row = rowArg(a, &n);
  if (!a.ok()) return a.env().Undefined();
  return number(a.env(), ortserve::argmax(row, n));
}

// maxValue(row, length): number
Napi::Value MaxValue(const Napi::CallbackInfo& info) {
  Args a(info);
  size_t n;
  const float* row = rowArg(a, &n);
  if (!a.ok()) return a.env().Undefined();
  return number(a.env(), ortserve::maxValue(row, n));
}

// logSumExp(row, length): number
Napi::Value LogSumExp(const Napi::CallbackInfo& info) {
  Args a(info);
  size_t n;
  const float* row = rowArg(a, &n);
  if (!a.expTable()) return a.env().Undefined();
  return number(a.env(), ortserve::logSumExp(row, n));
}

// rankOf(row, length, tokenId): number
Napi::Value RankOf(const Napi::CallbackInfo& info) {
  Args a(info);
  size_t size = 0;
  const float* row = a.array<float>(0, &size);
  const size_t n = a.integer(1, 0, static_cast<double>(size));
  const size_t id = a.integer(2, 0, static_cast<double>(size) - 1);
  if (!a.ok()) return a.env().Undefined();
  return number(a.env(), static_cast<double>(ortserve::rankOf(row, n, row[id])));
}

// topN(row, length, n, outIds: Int32Array, outVals: Float64Array): number
Napi::Value TopN(const Napi::CallbackInfo& info) {
  Args a(info);
  size_t n;
  const float* row = rowArg(a, &n);
  const size_t want = a.integer(2, 0, 4294967295.0);
  const size_t fits = want < n ? want : n;
  int32_t* ids = a.array<int32_t>(3, fits, "an Int32Array of n entries");
  double* vals = a.array<double>(4, fits, "a Float64Array of n entries");
  if (!a.ok()) return a.env().Undefined();
  return number(a.env(), static_cast<double>(ortserve::topN(row, n, want, ids, vals)));
}

// kthLargest(row, length, k): number, 1 <= k <= length
Napi::Value KthLargest(const Napi::CallbackInfo& info) {
  Args a(info);
  size_t n;
  const float* row = rowArg(a, &n);
  const size_t k = a.integer(2, 1, static_cast<double>(n));
  if (!a.ok()) return a.env().Undefined();
  return number(a.env(), ortserve::kthLargest(row, n, k));
}

// heapTopK(row, length, k, heap: Float64Array, ids: Int32Array, out: Float64Array): undefined,
// 1 <= k < length; out = [max, k-th largest, 1 if values outside the heap tie with it else 0].
Napi::Value HeapTopK(const Napi::CallbackInfo& info) {
  Args a(info);
  size_t n;
  const float* row = rowArg(a, &n);
  const size_t k = a.integer(2, 1, static_cast<double>(n) - 1);
  double* heap = a.array<double>(3, k, "a Float64Array of k entries");
  int32_t* ids = a.array<int32_t>(4, k, "an Int32Array of k entries");
  double* out = a.array<double>(5, 3, "a Float64Array of 3 entries");
  if (!a.ok()) return a.env().Undefined();
  const ortserve::HeapScan r = ortserve::heapTopK(row, n, k, heap, ids);
  out[0] = r.max;
  out[1] = r.top;
  out[2] = r.tiesOutside ? 1 : 0;
  return a.env().Undefined();
}

// collect(row, length, threshold, max, temperature, withBuckets, ids: Int32Array,
//         weights: Float64Array, buckets: Uint16Array, out: Float64Array): count; out[0] = total weight
Napi::Value Collect(const Napi::CallbackInfo& info) {
  Args a(info);
  size_t n;
  const float* row = rowArg(a, &n);
  const double threshold = a.number(2);
  const double max = a.number(3);
  const double temperature = a.temperature(4);
  const bool withBuckets = a.boolean(5);
  int32_t* ids = a.array<int32_t>(6, n, "an Int32Array of length entries");
  double* weights = a.array<double>(7, n, "a Float64Array of length entries");
  uint16_t* buckets = a.array<uint16_t>(8, withBuckets ? n : 0, "a Uint16Array of length entries");
  double* out = a.array<double>(9, 1, "a Float64Array of 1 entry");
  if (!a.expTable()) return a.env().Undefined();
  const size_t count =
      ortserve::collect(row, n, threshold, max, temperature, withBuckets, ids, weights, buckets, out);
  return number(a.env(), static_cast<double>(count));
}

// massHistogram(row, length, threshold, max, temperature, histogram: Float64Array): total weight
Napi::Value MassHistogram(const Napi::CallbackInfo& info) {
  Args a(info);
  size_t n;
  const float* row = rowArg(a, &n);
  const double threshold = a.number(2);
  const double max = a.number(3);
  const double temperature = a.temperature(4);
  double* histogram = a.array<double>(5, ortserve::kLastBucket + 1, "a Float64Array of 1025 entries");
  if (!a.expTable()) return a.env().Undefined();
  return number(a.env(), ortserve::massHistogram(row, n, threshold, max, temperature, histogram));
}

// drawDense(row, length, temperature, u, blockSums: Float64Array): token id or -1
Napi::Value DrawDense(const Napi::CallbackInfo& info) {
  Args a(info);
  size_t n;
  const float* row = rowArg(a, &n);
  const double temperature = a.temperature(2);
  const double u = a.number(3);
  const size_t blocks = (n + ortserve::kBlock - 1) / ortserve::kBlock;
  double* sums = a.array<double>(4, blocks, "a Float64Array of one entry per 64 tokens");
  if (!a.expTable()) return a.env().Undefined();
  return number(a.env(), ortserve::drawDense(row, n, temperature, u, sums));
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  const auto add = [&](const char* name, Napi::Value (*fn)(const Napi::CallbackInfo&)) {
    exports.Set(name, Napi::Function::New(env, fn, name));
  };
  add("setExpTable", SetExpTable);
  add("setSimd", SetSimd);
  add("argmax", Argmax);
  add("maxValue", MaxValue);
  add("logSumExp", LogSumExp);
  add("rankOf", RankOf);
  add("topN", TopN);
  add("kthLargest", KthLargest);
  add("heapTopK", HeapTopK);
  add("collect", Collect);
  add("massHistogram", MassHistogram);
  add("drawDense", DrawDense);
  exports.Set("simdAvailable", Napi::Boolean::New(env, ortserve::simdAvailable()));
  return exports;
}

}  // namespace

NODE_API_MODULE(NODE_GYP_MODULE_NAME, Init)
