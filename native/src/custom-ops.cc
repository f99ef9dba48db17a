// The one builder of ortserve's custom operators (see custom-ops.h).
#include "custom-ops.h"

#include <mutex>

#include "ort-runtime.h"

namespace ortserve {

namespace {

// An operator as ONNX Runtime holds it: the OrtCustomOp it calls back with, then the row.
struct BuiltOp {
  OrtCustomOp op;
  OpDescriptor row;
};

static_assert(offsetof(BuiltOp, op) == 0, "ONNX Runtime hands the OrtCustomOp back: it must start the struct");

const OpDescriptor& RowOf(const OrtCustomOp* op) { return reinterpret_cast<const BuiltOp*>(op)->row; }

// A kernel as ONNX Runtime holds it: its family's state and the row that made it.
struct Kernel {
  const OpDescriptor* row;
  void* state;
};

const char* ORT_API_CALL Name(const OrtCustomOp* op) { return RowOf(op).name; }
const char* ORT_API_CALL Provider(const OrtCustomOp*) { return "CPUExecutionProvider"; }
ONNXTensorElementDataType ORT_API_CALL InputType(const OrtCustomOp* op, size_t index) {
  return RowOf(op).inputs[index];
}
size_t ORT_API_CALL InputCount(const OrtCustomOp* op) { return RowOf(op).inputCount; }
ONNXTensorElementDataType ORT_API_CALL OutputType(const OrtCustomOp* op, size_t index) {
  return RowOf(op).outputs[index];
}
size_t ORT_API_CALL OutputCount(const OrtCustomOp* op) { return RowOf(op).outputCount; }
OrtCustomOpInputOutputCharacteristic ORT_API_CALL Required(const OrtCustomOp*, size_t) {
  return INPUT_OUTPUT_REQUIRED;
}
OrtMemType ORT_API_CALL InputMemory(const OrtCustomOp*, size_t) { return OrtMemTypeDefault; }
int ORT_API_CALL NoVariadic(const OrtCustomOp*) { return 0; }

OrtStatus* Error(const OpDescriptor& row, const std::string& error) {
  return ort->CreateStatus(ORT_RUNTIME_EXCEPTION,
                           (std::string(row.label != nullptr ? row.label : row.name) + ": " + error).c_str());
}

OrtStatus* ORT_API_CALL Create(const OrtCustomOp* op, const OrtApi* api, const OrtKernelInfo* info, void** out) {
  const OpDescriptor& row = RowOf(op);
  void* state = nullptr;
  const std::string error = row.create(row.params, api, info, &state);
  if (!error.empty()) return Error(row, error);
  *out = new Kernel{&row, state};
  return nullptr;
}

OrtStatus* ORT_API_CALL Compute(void* kernel, OrtKernelContext* context) {
  const Kernel& k = *static_cast<Kernel*>(kernel);
  const std::string error = k.row->compute(k.state, context);
  return error.empty() ? nullptr : Error(*k.row, error);
}

void ORT_API_CALL Destroy(void* kernel) {
  auto* k = static_cast<Kernel*>(kernel);
  k->row->destroy(k->state);
  delete k;
}

// The OrtCustomOp for a row: CPU, fixed inputs and outputs, none optional or variadic, default
// memory; the row's names, types and kernel behind the callbacks.
BuiltOp Build(const OpDescriptor& row) {
  BuiltOp built{};
  built.row = row;
  OrtCustomOp& op = built.op;
  op.version = kOrtApiVersion;
  op.GetName = Name;
  op.GetExecutionProviderType = Provider;
  op.GetInputType = InputType;
  op.GetInputTypeCount = InputCount;
  op.GetOutputType = OutputType;
  op.GetOutputTypeCount = OutputCount;
  op.GetInputCharacteristic = Required;
  op.GetOutputCharacteristic = Required;
  op.GetInputMemoryType = InputMemory;
  op.GetVariadicInputMinArity = NoVariadic;
  op.GetVariadicInputHomogeneity = NoVariadic;
  op.GetVariadicOutputMinArity = NoVariadic;
  op.GetVariadicOutputHomogeneity = NoVariadic;
  op.CreateKernelV2 = Create;
  op.KernelComputeV2 = Compute;
  op.KernelDestroy = Destroy;
  return built;
}

std::mutex domainMutex;
// Made once and kept for the process, with the operators it refers to.
OrtCustomOpDomain* domain = nullptr;
std::vector<BuiltOp>* builtOps = nullptr;

struct ParallelCall {
  const std::function<void(size_t)>* fn;
};

void RunItem(void* data, size_t item) { (*static_cast<ParallelCall*>(data)->fn)(item); }

}  // namespace

std::string AddOrtserveOps(OrtSessionOptions* options) {
  std::lock_guard<std::mutex> lock(domainMutex);
  if (domain == nullptr) {
    if (builtOps == nullptr) {
      auto* ops = new std::vector<BuiltOp>();
      for (const auto& family : {AttentionOps(), ProjectionOps()})
        for (const OpDescriptor& row : family) ops->push_back(Build(row));
      builtOps = ops;
    }
    OrtCustomOpDomain* made = nullptr;
    std::string error = Failure(ort->CreateCustomOpDomain("ortserve", &made));
    for (const BuiltOp& op : *builtOps)
      if (error.empty()) error = Failure(ort->CustomOpDomain_Add(made, &op.op));
    if (!error.empty()) return error;
    domain = made;
  }
  return Failure(ort->AddCustomOpDomain(options, domain));
}

std::string Describe(const OrtValue* value, TensorView* view) {
  OrtTensorTypeAndShapeInfo* info = nullptr;
  std::string error = Failure(ort->GetTensorTypeAndShape(value, &info));
  size_t rank = 0;
  if (error.empty()) error = Failure(ort->GetDimensionsCount(info, &rank));
  if (error.empty()) {
    view->dims.resize(rank);
    error = Failure(ort->GetDimensions(info, view->dims.data(), rank));
  }
  if (info != nullptr) ort->ReleaseTensorTypeAndShapeInfo(info);
  if (error.empty()) error = Failure(ort->GetTensorMutableData(const_cast<OrtValue*>(value), &view->data));
  return error;
}

std::string ReadInputs(OrtKernelContext* context, size_t count, TensorView* views) {
  for (size_t i = 0; i < count; i++) {
    const OrtValue* value = nullptr;
    std::string error = Failure(ort->KernelContext_GetInput(context, i, &value));
    if (error.empty()) error = Describe(value, &views[i]);
    if (!error.empty()) return error;
  }
  return {};
}

ParallelFor ParallelForOf(OrtKernelContext* context) {
  return [context](size_t count, const std::function<void(size_t)>& fn) {
    ParallelCall call{&fn};
    OrtStatus* status = ort->KernelContext_ParallelFor(context, RunItem, count, 0, &call);
    if (status != nullptr) {
      ort->ReleaseStatus(status);
      for (size_t i = 0; i < count; i++) fn(i);
    }
  };
}

}  // namespace ortserve
