// A decoder session over ONNX Runtime's C API with IoBinding, for
// src/core/runner/native-session.ts. Inputs are bound over the callers' typed
// arrays, and so are the outputs the caller pre-allocates (the KV cache's
// present tensors are the very memory of its past tensors, so the attention
// operator updates the cache in place): nothing is copied in or out.
// onnxruntime-node's own run copies every fetched output into a fresh
// ArrayBuffer, which for a batch's KV cache is most of a decode step.
//
// The runtime it runs is ort-runtime.h's; a graph rewritten for ortserve's
// operators gets their domain from custom-ops.h.
#include "session.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "block-quant-matmul.h"
#include "custom-ops.h"
#include "ort-runtime.h"

namespace ortserve {

namespace {

// "a;b;;c" -> {"a", "b", "c"}.
std::vector<std::string> SplitEntries(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(';', start), text.size());
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// Bytes of one element of an ONNX tensor type this session binds, 0 for the rest.
size_t elementBytes(int type) {
  switch (type) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL:
      return 1;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16:
      return 2;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32:
      return 4;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE:
      return 8;
    default:
      return 0;
  }
}

struct ValueInfo {
  std::string name;
  bool isTensor = false;
  int type = 0;
  std::vector<int64_t> shape;
  std::vector<std::string> symbolic;
};

class Session;

// One run: the binding and the values bound to it. Everything JavaScript owns that the run
// reads or writes is referenced until the run settles.
class RunWorker : public Napi::AsyncWorker {
 public:
  RunWorker(Napi::Env env, Session* session, Napi::Object self);
  ~RunWorker() override;

  Napi::Promise Promise() { return deferred_.Promise(); }
  // Binds feeds and fetches; false (and a JavaScript exception) when an argument is wrong.
  // With `kept`, into the session's kept binding (see Session::Run), on top of what it holds.
  bool Bind(Napi::Array inputs, Napi::Array outputs, OrtIoBinding* kept);

  void Execute() override;
  void OnOK() override;
  void OnError(const Napi::Error& error) override;

 private:
  bool Fail(const std::string& message);
  // The tensor over a typed array of `type` and `dims`, kept alive by the run.
  OrtValue* Wrap(Napi::Value data, int type, Napi::Value dims, const std::string& name);
  void Done();

  Session* session_;
  Napi::ObjectReference self_;
  Napi::Promise::Deferred deferred_;
  OrtIoBinding* binding_ = nullptr;
  // The binding is the session's kept one: not released here, and nothing is fetched back.
  bool kept_ = false;
  std::vector<OrtValue*> values_;
  // Name of each value in values_ ("in:" or "out:" + the value's name).
  std::vector<std::string> valueNames_;
  std::vector<Napi::ObjectReference> arrays_;
  std::vector<bool> onDevice_;
  OrtValue** results_ = nullptr;
  size_t resultCount_ = 0;
};

class Session : public Napi::ObjectWrap<Session> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "Session",
                       {InstanceAccessor<&Session::InputMetadata>("inputMetadata"),
                        InstanceAccessor<&Session::OutputMetadata>("outputMetadata"),
                        InstanceAccessor<&Session::PackedWeightBytes>("packedWeightBytes"),
                        InstanceMethod<&Session::Run>("run"), InstanceMethod<&Session::Release>("release")});
  }

  // new Session(modelPath, intraOpThreads, interOpThreads, cachedAttention)
  explicit Session(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Session>(info) {
    Napi::Env env = info.Env();
    if (ort == nullptr) {
      Napi::Error::New(env, "loadRuntime() has not loaded ONNX Runtime").ThrowAsJavaScriptException();
      return;
    }
    if (info.Length() < 3 || !info[0].IsString() || !info[1].IsNumber() || !info[2].IsNumber()) {
      Napi::TypeError::New(env, "Session(modelPath, intraOpThreads, interOpThreads)").ThrowAsJavaScriptException();
      return;
    }
    std::string path = info[0].As<Napi::String>().Utf8Value();
    int intra = info[1].As<Napi::Number>().Int32Value();
    int inter = info[2].As<Napi::Number>().Int32Value();
    // The graph uses ortserve.CachedAttention (src/core/runner/attention-graph.ts).
    bool cachedAttention = info.Length() > 3 && info[3].ToBoolean().Value();
    // The options onnxruntime-node is given by createDecoderSession (src/core/runner/ort-session.ts);
    // the CPU execution provider is the default.
    OrtSessionOptions* options = nullptr;
    std::string error = Failure(ort->CreateSessionOptions(&options));
    if (error.empty()) error = Failure(ort->SetIntraOpNumThreads(options, intra));
    if (error.empty()) error = Failure(ort->SetInterOpNumThreads(options, inter));
    if (error.empty()) error = Failure(ort->SetSessionGraphOptimizationLevel(options, ORT_ENABLE_ALL));
    if (error.empty()) error = Failure(ort->SetSessionExecutionMode(options, ORT_SEQUENTIAL));
    // The intra-op threads stop spinning when a run returns, not some time after: the engine's
    // JavaScript between two steps (sampling, the next step's inputs) would otherwise share the
    // two cores with a spinning thread, and lose a scheduler time slice (3-6 ms) on ~30% of the
    // steps. The threads still spin between the operators of a run.
    if (error.empty()) error = Failure(ort->AddSessionConfigEntry(options, "session.force_spinning_stop", "1"));
    if (error.empty() && cachedAttention) error = AddOrtserveOps(options);
    // A profiling aid, not a setting: ORTSERVE_ORT_PROFILE=<path prefix> traces every node.
    const char* profile = getenv("ORTSERVE_ORT_PROFILE");
    if (error.empty() && profile != nullptr && profile[0] != '\0') error = Failure(ort->EnableProfiling(options, profile));
    // A measuring aid, not a setting: ORTSERVE_ORT_CONFIG="key=value;key=value" adds session config
    // entries (the thread pool's spinning and partitioning keys are what it was made for).
    const char* config = getenv("ORTSERVE_ORT_CONFIG");
    for (const std::string& entry : SplitEntries(config == nullptr ? "" : config)) {
      const size_t eq = entry.find('=');
      if (!error.empty()) break;
      if (eq == std::string::npos) error = "ORTSERVE_ORT_CONFIG: expected key=value, got " + entry;
      else error = Failure(ort->AddSessionConfigEntry(options, entry.substr(0, eq).c_str(), entry.substr(eq + 1).c_str()));
    }
    // A measuring aid, not a setting: ORTSERVE_ORT_MEMORY="no-pattern;no-arena" turns off ONNX
    // Runtime's per-input-shape memory patterns and its CPU arena (the soak's memory looks).
    const char* memory = getenv("ORTSERVE_ORT_MEMORY");
    for (const std::string& entry : SplitEntries(memory == nullptr ? "" : memory)) {
      if (!error.empty()) break;
      if (entry == "no-pattern") error = Failure(ort->DisableMemPattern(options));
      else if (entry == "no-arena") error = Failure(ort->DisableCpuMemArena(options));
      else error = "ORTSERVE_ORT_MEMORY: expected no-pattern or no-arena, got " + entry;
    }
    const size_t packedBefore = ortserve::BytesPackedOnThisThread();
    if (error.empty()) error = Failure(ort->CreateSession(ortEnv, path.c_str(), options, &session_));
    packedWeightBytes_ = ortserve::BytesPackedOnThisThread() - packedBefore;
    ort->ReleaseSessionOptions(options);
    if (error.empty()) error = ReadMetadata();
    if (!error.empty()) {
      ReleaseSession();
      Napi::Error::New(env, error).ThrowAsJavaScriptException();
    }
  }

  ~Session() override { ReleaseSession(); }

  OrtSession* session() const { return session_; }
  // A run holds the session until it settles; release() waits for the last one.
  void Enter() { running_++; }
  void Leave() {
    if (--running_ == 0 && releasing_) ReleaseSession();
  }

  int OutputIndex(const std::string& name) const {
    for (size_t i = 0; i < outputs_.size(); i++)
      if (outputs_[i].name == name) return static_cast<int>(i);
    return -1;
  }
  int InputIndex(const std::string& name) const {
    for (size_t i = 0; i < inputs_.size(); i++)
      if (inputs_[i].name == name) return static_cast<int>(i);
    return -1;
  }

  // A value now bound under `name` in the kept binding; the one it replaces is released.
  void Hold(const std::string& name, OrtValue* value) {
    OrtValue*& slot = held_[name];
    if (slot != nullptr) ort->ReleaseValue(slot);
    slot = value;
  }

  void ClearKept() {
    if (kept_ != nullptr) {
      ort->ClearBoundInputs(kept_);
      ort->ClearBoundOutputs(kept_);
    }
    for (auto& [name, value] : held_) ort->ReleaseValue(value);
    held_.clear();
  }

 private:
  std::string ReadMetadata() {
    OrtAllocator* allocator = nullptr;
    std::string error = Failure(ort->GetAllocatorWithDefaultOptions(&allocator));
    for (int io = 0; io < 2 && error.empty(); io++) {
      size_t count = 0;
      error = Failure(io == 0 ? ort->SessionGetInputCount(session_, &count)
                              : ort->SessionGetOutputCount(session_, &count));
      for (size_t i = 0; i < count && error.empty(); i++) {
        ValueInfo value;
        char* name = nullptr;
        error = Failure(io == 0 ? ort->SessionGetInputName(session_, i, allocator, &name)
                                : ort->SessionGetOutputName(session_, i, allocator, &name));
        if (!error.empty()) break;
        value.name = name;
        error = Failure(ort->AllocatorFree(allocator, name));
        OrtTypeInfo* typeInfo = nullptr;
        if (error.empty())
          error = Failure(io == 0 ? ort->SessionGetInputTypeInfo(session_, i, &typeInfo)
                                  : ort->SessionGetOutputTypeInfo(session_, i, &typeInfo));
        if (!error.empty()) break;
        error = DescribeType(typeInfo, &value);
        ort->ReleaseTypeInfo(typeInfo);
        (io == 0 ? inputs_ : outputs_).push_back(std::move(value));
      }
    }
    return error;
  }

  static std::string DescribeType(const OrtTypeInfo* typeInfo, ValueInfo* value) {
    ONNXType kind = ONNX_TYPE_UNKNOWN;
    std::string error = Failure(ort->GetOnnxTypeFromTypeInfo(typeInfo, &kind));
    if (!error.empty() || kind != ONNX_TYPE_TENSOR) return error;
    value->isTensor = true;
    const OrtTensorTypeAndShapeInfo* tensor = nullptr;  // owned by typeInfo
    ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
    size_t rank = 0;
    error = Failure(ort->CastTypeInfoToTensorInfo(typeInfo, &tensor));
    if (error.empty()) error = Failure(ort->GetTensorElementType(tensor, &type));
    if (error.empty()) error = Failure(ort->GetDimensionsCount(tensor, &rank));
    if (!error.empty()) return error;
    value->type = type;
    value->shape.resize(rank);
    std::vector<const char*> symbolic(rank, nullptr);
    error = Failure(ort->GetDimensions(tensor, value->shape.data(), rank));
    if (error.empty()) error = Failure(ort->GetSymbolicDimensions(tensor, symbolic.data(), rank));
    for (const char* s : symbolic) value->symbolic.emplace_back(s != nullptr ? s : "");
    return error;
  }

  static Napi::Array Describe(Napi::Env env, const std::vector<ValueInfo>& values) {
    Napi::Array out = Napi::Array::New(env, values.size());
    for (size_t i = 0; i < values.size(); i++) {
      const ValueInfo& v = values[i];
      Napi::Object o = Napi::Object::New(env);
      o.Set("name", v.name);
      o.Set("isTensor", v.isTensor);
      o.Set("type", v.type);
      Napi::Array shape = Napi::Array::New(env, v.shape.size());
      Napi::Array symbolic = Napi::Array::New(env, v.symbolic.size());
      for (size_t d = 0; d < v.shape.size(); d++) shape.Set(d, static_cast<double>(v.shape[d]));
      for (size_t d = 0; d < v.symbolic.size(); d++) symbolic.Set(d, v.symbolic[d]);
      o.Set("shape", shape);
      o.Set("symbolicDimensions", symbolic);
      out.Set(i, o);
    }
    return out;
  }

  Napi::Value InputMetadata(const Napi::CallbackInfo& info) { return Describe(info.Env(), inputs_); }
  Napi::Value OutputMetadata(const Napi::CallbackInfo& info) { return Describe(info.Env(), outputs_); }
  Napi::Value PackedWeightBytes(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), static_cast<double>(packedWeightBytes_));
  }

  // run(inputs: {name, type, data, dims}[], outputs: {name, type?, data?, dims?}[]): Promise<outputs>
  // An output with data is written in place and settles as undefined; one without data is
  // allocated by ONNX Runtime and settles as {type, dims, data} (a fresh copy).
  //
  // A third argument selects the kept binding, which lives across runs so that a decode step
  // binds only what changed (the KV cache's 2 x layers tensors stay bound step after step):
  //   0 (default)  the run's own binding of everything given;
  //   1            the kept binding, emptied, then everything given;
  //   2            the kept binding as it is, with what is given bound over it by name.
  // A kept run takes pre-allocated outputs only and settles as undefined for each. Values stay
  // bound after their run: the caller must give a new tensor for a name before a value it bound
  // there is freed or moved (ortserve's NativeDecoderSession compares tensor identities).
  Napi::Value Run(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (session_ == nullptr) {
      Napi::Error::New(env, "the session has been released").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    if (info.Length() < 2 || !info[0].IsArray() || !info[1].IsArray()) {
      Napi::TypeError::New(env, "run(inputs, outputs): two arrays").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    int mode = info.Length() > 2 && info[2].IsNumber() ? info[2].As<Napi::Number>().Int32Value() : 0;
    if (mode < 0 || mode > 2) {
      Napi::TypeError::New(env, "run: the binding mode is 0, 1 or 2").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    OrtIoBinding* kept = nullptr;
    if (mode != 0) {
      // The kept binding is changed before the run starts: no other run may be using it.
      if (running_ > 0) {
        Napi::Error::New(env, "run: the kept binding is in use by a run in flight").ThrowAsJavaScriptException();
        return env.Undefined();
      }
      if (kept_ == nullptr) {
        std::string error = Failure(ort->CreateIoBinding(session_, &kept_));
        if (!error.empty()) {
          Napi::Error::New(env, error).ThrowAsJavaScriptException();
          return env.Undefined();
        }
      }
      if (mode == 1) ClearKept();
      kept = kept_;
    }
    auto* worker = new RunWorker(env, this, Value());
    if (!worker->Bind(info[0].As<Napi::Array>(), info[1].As<Napi::Array>(), kept)) {
      delete worker;
      // What was half bound over the kept binding is not known to the caller: start it over.
      if (kept != nullptr) ClearKept();
      return env.Undefined();
    }
    Napi::Promise promise = worker->Promise();
    worker->Queue();
    return promise;
  }

  Napi::Value Release(const Napi::CallbackInfo& info) {
    releasing_ = true;
    if (running_ == 0) ReleaseSession();
    return info.Env().Undefined();
  }

  void ReleaseSession() {
    ClearKept();
    if (kept_ != nullptr) ort->ReleaseIoBinding(kept_);
    kept_ = nullptr;
    if (session_ != nullptr) ort->ReleaseSession(session_);
    session_ = nullptr;
  }

  OrtSession* session_ = nullptr;
  // Bytes of BlockQuantMatMul weights its kernels packed: what a decode step reads of them.
  size_t packedWeightBytes_ = 0;
  // The binding kept across runs (mode 1 and 2 of run()), and the values bound in it by name.
  OrtIoBinding* kept_ = nullptr;
  std::unordered_map<std::string, OrtValue*> held_;
  std::vector<ValueInfo> inputs_;
  std::vector<ValueInfo> outputs_;
  int running_ = 0;
  bool releasing_ = false;
};

RunWorker::RunWorker(Napi::Env env, Session* session, Napi::Object self)
    : Napi::AsyncWorker(env, "ortserve.run"),
      session_(session),
      self_(Napi::Persistent(self)),
      deferred_(Napi::Promise::Deferred::New(env)) {
  session_->Enter();
}

RunWorker::~RunWorker() {
  for (size_t i = 0; i < resultCount_; i++) ort->ReleaseValue(results_[i]);
  if (results_ != nullptr) {
    OrtAllocator* allocator = nullptr;
    if (Failure(ort->GetAllocatorWithDefaultOptions(&allocator)).empty())
      Failure(ort->AllocatorFree(allocator, results_));
  }
  for (OrtValue* v : values_) ort->ReleaseValue(v);
  if (binding_ != nullptr && !kept_) ort->ReleaseIoBinding(binding_);
  session_->Leave();
}

bool RunWorker::Fail(const std::string& message) {
  Napi::Error::New(Env(), message).ThrowAsJavaScriptException();
  return false;
}

OrtValue* RunWorker::Wrap(Napi::Value data, int type, Napi::Value dimsValue, const std::string& name) {
  size_t bytesPer = elementBytes(type);
  if (bytesPer == 0) return Fail(name + ": unsupported tensor type " + std::to_string(type)), nullptr;
  if (!data.IsTypedArray() || !dimsValue.IsArray())
    return Fail(name + ": data must be a typed array and dims an array"), nullptr;
  Napi::TypedArray array = data.As<Napi::TypedArray>();
  Napi::Array dimsArray = dimsValue.As<Napi::Array>();
  std::vector<int64_t> dims(dimsArray.Length());
  size_t count = 1;
  for (uint32_t d = 0; d < dimsArray.Length(); d++) {
    Napi::Value v = dimsArray.Get(d);
    double x = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : -1;
    if (!(x >= 0) || x != static_cast<double>(static_cast<int64_t>(x)))
      return Fail(name + ": bad dimension"), nullptr;
    dims[d] = static_cast<int64_t>(x);
    count *= static_cast<size_t>(dims[d]);
  }
  // The view's bytes must be exactly the tensor's: ONNX Runtime reads and writes all of them.
  size_t bytes = array.ByteLength();
  if (bytes != count * bytesPer || array.ElementSize() != bytesPer)
    return Fail(name + ": " + std::to_string(bytes) + " bytes for " + std::to_string(count) +
                " elements of type " + std::to_string(type)),
           nullptr;
  // Materializes the ArrayBuffer (an on-heap typed array moves off the heap for good), so the
  // pointer stays valid while the reference below keeps the array alive.
  napi_typedarray_type kind;
  size_t length = 0;
  void* pointer = nullptr;
  napi_value buffer;
  size_t offset = 0;
  if (napi_get_typedarray_info(Env(), array, &kind, &length, &pointer, &buffer, &offset) != napi_ok)
    return Fail(name + ": cannot read the typed array"), nullptr;
  static char empty[8];
  if (pointer == nullptr) pointer = empty;  // a zero-element tensor still needs an address
  OrtValue* value = nullptr;
  std::string error = Failure(ort->CreateTensorWithDataAsOrtValue(
      cpuMemory, pointer, bytes, dims.data(), dims.size(), static_cast<ONNXTensorElementDataType>(type), &value));
  if (!error.empty()) return Fail(name + ": " + error), nullptr;
  values_.push_back(value);
  valueNames_.push_back(name);
  arrays_.push_back(Napi::Persistent(array.As<Napi::Object>()));
  return value;
}

bool RunWorker::Bind(Napi::Array inputs, Napi::Array outputs, OrtIoBinding* kept) {
  std::string error;
  if (kept != nullptr) {
    binding_ = kept;
    kept_ = true;
  } else {
    error = Failure(ort->CreateIoBinding(session_->session(), &binding_));
    if (!error.empty()) return Fail(error);
  }
  for (uint32_t i = 0; i < inputs.Length(); i++) {
    Napi::Value item = inputs.Get(i);
    if (!item.IsObject()) return Fail("run: inputs must be objects");
    Napi::Object feed = item.As<Napi::Object>();
    Napi::Value nameValue = feed.Get("name");
    Napi::Value typeValue = feed.Get("type");
    if (!nameValue.IsString() || !typeValue.IsNumber()) return Fail("run: an input needs a name and a type");
    std::string name = nameValue.As<Napi::String>().Utf8Value();
    if (session_->InputIndex(name) < 0) return Fail("run: the model has no input " + name);
    OrtValue* value = Wrap(feed.Get("data"), typeValue.As<Napi::Number>().Int32Value(), feed.Get("dims"), name);
    if (value == nullptr) return false;
    valueNames_.back() = "in:" + name;
    error = Failure(ort->BindInput(binding_, name.c_str(), value));
    if (!error.empty()) return Fail(name + ": " + error);
  }
  for (uint32_t i = 0; i < outputs.Length(); i++) {
    Napi::Value item = outputs.Get(i);
    if (!item.IsObject()) return Fail("run: outputs must be objects");
    Napi::Object fetch = item.As<Napi::Object>();
    Napi::Value nameValue = fetch.Get("name");
    if (!nameValue.IsString()) return Fail("run: an output needs a name");
    std::string name = nameValue.As<Napi::String>().Utf8Value();
    if (session_->OutputIndex(name) < 0) return Fail("run: the model has no output " + name);
    Napi::Value data = fetch.Get("data");
    if (kept_ && (data.IsUndefined() || data.IsNull()))
      return Fail("run: a kept binding takes pre-allocated outputs only (" + name + ")");
    if (data.IsUndefined() || data.IsNull()) {
      error = Failure(ort->BindOutputToDevice(binding_, name.c_str(), cpuMemory));
      onDevice_.push_back(true);
    } else {
      Napi::Value typeValue = fetch.Get("type");
      if (!typeValue.IsNumber()) return Fail("run: a pre-allocated output needs a type");
      OrtValue* value = Wrap(data, typeValue.As<Napi::Number>().Int32Value(), fetch.Get("dims"), name);
      if (value == nullptr) return false;
      valueNames_.back() = "out:" + name;
      error = Failure(ort->BindOutput(binding_, name.c_str(), value));
      onDevice_.push_back(false);
    }
    if (!error.empty()) return Fail(name + ": " + error);
  }
  if (kept_) {
    // Bound for good: the session releases each value when its name is bound again.
    for (size_t i = 0; i < values_.size(); i++) session_->Hold(valueNames_[i], values_[i]);
    values_.clear();
  }
  return true;
}

void RunWorker::Execute() {
  std::string error = Failure(ort->RunWithBinding(session_->session(), nullptr, binding_));
  if (error.empty() && !kept_) {
    OrtAllocator* allocator = nullptr;
    error = Failure(ort->GetAllocatorWithDefaultOptions(&allocator));
    if (error.empty()) error = Failure(ort->GetBoundOutputValues(binding_, allocator, &results_, &resultCount_));
  }
  if (!error.empty()) SetError(error);
}

void RunWorker::OnOK() {
  Napi::Env env = Env();
  Napi::HandleScope scope(env);
  Napi::Array out = Napi::Array::New(env, onDevice_.size());
  if (kept_) {
    // Every output was pre-allocated and written in place.
    deferred_.Resolve(out);
    return;
  }
  if (resultCount_ != onDevice_.size()) {
    deferred_.Reject(Napi::Error::New(env, "ONNX Runtime returned " + std::to_string(resultCount_) +
                                               " outputs for " + std::to_string(onDevice_.size()))
                         .Value());
    return;
  }
  for (size_t i = 0; i < onDevice_.size(); i++) {
    if (!onDevice_[i]) {
      out.Set(i, env.Undefined());
      continue;
    }
    // An output ONNX Runtime allocated: copied out once (the caller had no shape to pre-allocate).
    OrtTensorTypeAndShapeInfo* shape = nullptr;
    ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
    size_t rank = 0;
    size_t count = 0;
    void* data = nullptr;
    std::string error = Failure(ort->GetTensorTypeAndShape(results_[i], &shape));
    if (error.empty()) error = Failure(ort->GetTensorElementType(shape, &type));
    if (error.empty()) error = Failure(ort->GetDimensionsCount(shape, &rank));
    std::vector<int64_t> dims(rank);
    if (error.empty()) error = Failure(ort->GetDimensions(shape, dims.data(), rank));
    if (error.empty()) error = Failure(ort->GetTensorShapeElementCount(shape, &count));
    if (shape != nullptr) ort->ReleaseTensorTypeAndShapeInfo(shape);
    if (error.empty()) error = Failure(ort->GetTensorMutableData(results_[i], &data));
    size_t bytes = count * elementBytes(type);
    if (error.empty() && elementBytes(type) == 0) error = "unsupported output type " + std::to_string(type);
    if (!error.empty()) {
      deferred_.Reject(Napi::Error::New(env, error).Value());
      return;
    }
    Napi::ArrayBuffer buffer = Napi::ArrayBuffer::New(env, bytes);
    if (bytes > 0) std::memcpy(buffer.Data(), data, bytes);
    Napi::Array dimsOut = Napi::Array::New(env, rank);
    for (size_t d = 0; d < rank; d++) dimsOut.Set(d, static_cast<double>(dims[d]));
    Napi::Object o = Napi::Object::New(env);
    o.Set("type", static_cast<int>(type));
    o.Set("dims", dimsOut);
    o.Set("buffer", buffer);
    out.Set(i, o);
  }
  deferred_.Resolve(out);
}

void RunWorker::OnError(const Napi::Error& error) { deferred_.Reject(error.Value()); }

}  // namespace

Napi::Function DefineSession(Napi::Env env) { return Session::Define(env); }

}  // namespace ortserve
