// The part of ONNX Runtime's C API that the session addon calls, declared by ortserve.
//
// These declarations follow ONNX Runtime's public C API (github.com/microsoft/onnxruntime,
// MIT License) and list only what ortserve uses: a handful of opaque handles, the enum values
// it passes or reads, OrtApiBase and the OrtApi function table. Nothing links against them;
// ort-runtime.cc dlopens the library onnxruntime-node ships and reads the table it returns.
//
// The table is a struct of function pointers that ONNX Runtime only ever appends to: a slot,
// once shipped, keeps its position and signature in every later 1.x release. So the table below
// stops at the last slot ortserve calls, the slots it does not call are untyped padding, and
// every typed slot is pinned to its index by a static_assert at the end of this file.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(_WIN32)
#define ORT_API_CALL __stdcall
#else
#define ORT_API_CALL
#endif

namespace ortserve {

// The C API version requested from GetApi: the first whose table reaches the last slot used
// (KernelContext_ParallelFor, slot 274, added in ONNX Runtime 1.17) and whose OrtCustomOp has
// every member declared below. Any 1.x library from 1.17 on serves it; LoadRuntime refuses the
// rest before touching the table.
constexpr uint32_t kOrtApiVersion = 17;
// C API version N first shipped in ONNX Runtime 1.N.
constexpr int kOrtMajor = 1;
constexpr int kOrtMinMinor = static_cast<int>(kOrtApiVersion);

}  // namespace ortserve

extern "C" {

// Opaque handles: only ever held by pointer.
struct OrtAllocator;
struct OrtEnv;
struct OrtCustomOpDomain;
struct OrtIoBinding;
struct OrtKernelContext;
struct OrtKernelInfo;
struct OrtMemoryInfo;
struct OrtRunOptions;
struct OrtSession;
struct OrtSessionOptions;
struct OrtStatus;
struct OrtTensorTypeAndShapeInfo;
struct OrtTypeInfo;
struct OrtValue;

// ONNX Runtime's enums are C enums, passed as int (hence `: int`); only the values ortserve
// uses are listed.

// Element types of the tensors session.cc binds (the numbers are ONNX's TensorProto types,
// which src/core/runner/native-session.ts uses too).
enum ONNXTensorElementDataType : int {
  ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED = 0,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT = 1,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8 = 2,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8 = 3,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16 = 4,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16 = 5,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32 = 6,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64 = 7,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL = 9,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16 = 10,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE = 11,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32 = 12,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64 = 13,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16 = 16,
};

// What a model input or output is; ortserve only tells tensors from the rest.
enum ONNXType : int {
  ONNX_TYPE_UNKNOWN = 0,
  ONNX_TYPE_TENSOR = 1,
};

enum OrtLoggingLevel : int {
  ORT_LOGGING_LEVEL_WARNING = 2,
};

enum GraphOptimizationLevel : int {
  ORT_ENABLE_ALL = 99,
};

enum ExecutionMode : int {
  ORT_SEQUENTIAL = 0,
};

enum OrtAllocatorType : int {
  OrtArenaAllocator = 1,
};

enum OrtMemType : int {
  OrtMemTypeDefault = 0,
};

enum OrtErrorCode : int {
  ORT_RUNTIME_EXCEPTION = 6,
};

enum OrtCustomOpInputOutputCharacteristic : int {
  INPUT_OUTPUT_REQUIRED = 0,
};

// Every call that can fail returns a status: null on success, otherwise an error the caller
// reads with GetErrorMessage and frees with ReleaseStatus.
struct OrtApi;

// A custom operator as ONNX Runtime reads it, up to the members of C API version 17 (`version`
// says which members exist; CreateKernelV2 and KernelComputeV2 are used when set).
struct OrtCustomOp {
  uint32_t version;
  void*(ORT_API_CALL* CreateKernel)(const OrtCustomOp* op, const OrtApi* api, const OrtKernelInfo* info);
  const char*(ORT_API_CALL* GetName)(const OrtCustomOp* op);
  const char*(ORT_API_CALL* GetExecutionProviderType)(const OrtCustomOp* op);
  ONNXTensorElementDataType(ORT_API_CALL* GetInputType)(const OrtCustomOp* op, size_t index);
  size_t(ORT_API_CALL* GetInputTypeCount)(const OrtCustomOp* op);
  ONNXTensorElementDataType(ORT_API_CALL* GetOutputType)(const OrtCustomOp* op, size_t index);
  size_t(ORT_API_CALL* GetOutputTypeCount)(const OrtCustomOp* op);
  void(ORT_API_CALL* KernelCompute)(void* kernel, OrtKernelContext* context);
  void(ORT_API_CALL* KernelDestroy)(void* kernel);
  OrtCustomOpInputOutputCharacteristic(ORT_API_CALL* GetInputCharacteristic)(const OrtCustomOp* op, size_t index);
  OrtCustomOpInputOutputCharacteristic(ORT_API_CALL* GetOutputCharacteristic)(const OrtCustomOp* op, size_t index);
  OrtMemType(ORT_API_CALL* GetInputMemoryType)(const OrtCustomOp* op, size_t index);
  int(ORT_API_CALL* GetVariadicInputMinArity)(const OrtCustomOp* op);
  int(ORT_API_CALL* GetVariadicInputHomogeneity)(const OrtCustomOp* op);
  int(ORT_API_CALL* GetVariadicOutputMinArity)(const OrtCustomOp* op);
  int(ORT_API_CALL* GetVariadicOutputHomogeneity)(const OrtCustomOp* op);
  OrtStatus*(ORT_API_CALL* CreateKernelV2)(const OrtCustomOp* op, const OrtApi* api, const OrtKernelInfo* info,
                                           void** kernel);
  OrtStatus*(ORT_API_CALL* KernelComputeV2)(void* kernel, OrtKernelContext* context);
  void* InferOutputShapeFn;
  void* GetStartVersion;
  void* GetEndVersion;
};

struct OrtApi {
  OrtStatus*(ORT_API_CALL* CreateStatus)(OrtErrorCode code, const char* message);
  void* unused1;
  const char*(ORT_API_CALL* GetErrorMessage)(const OrtStatus* status);
  OrtStatus*(ORT_API_CALL* CreateEnv)(OrtLoggingLevel level, const char* logId, OrtEnv** env);
  void* unused4[3];  // 4-6
  OrtStatus*(ORT_API_CALL* CreateSession)(const OrtEnv* env, const char* modelPath,
                                          const OrtSessionOptions* options, OrtSession** session);
  void* unused8[2];  // 8-9
  OrtStatus*(ORT_API_CALL* CreateSessionOptions)(OrtSessionOptions** options);
  void* unused11[2];  // 11-12
  OrtStatus*(ORT_API_CALL* SetSessionExecutionMode)(OrtSessionOptions* options, ExecutionMode mode);
  // Writes a JSON trace of every node's run to <prefix>_<time>.json when the session is released.
  OrtStatus*(ORT_API_CALL* EnableProfiling)(OrtSessionOptions* options, const char* profileFilePrefix);
  void* unused15[2];  // 15-16
  // Memory patterns: the planned offsets of every intermediate tensor, kept per set of input shapes.
  OrtStatus*(ORT_API_CALL* DisableMemPattern)(OrtSessionOptions* options);
  void* unused18;
  // Without the arena, each intermediate tensor is its own allocation from the process's allocator.
  OrtStatus*(ORT_API_CALL* DisableCpuMemArena)(OrtSessionOptions* options);
  void* unused20[3];  // 20-22
  OrtStatus*(ORT_API_CALL* SetSessionGraphOptimizationLevel)(OrtSessionOptions* options,
                                                             GraphOptimizationLevel level);
  OrtStatus*(ORT_API_CALL* SetIntraOpNumThreads)(OrtSessionOptions* options, int threads);
  OrtStatus*(ORT_API_CALL* SetInterOpNumThreads)(OrtSessionOptions* options, int threads);
  OrtStatus*(ORT_API_CALL* CreateCustomOpDomain)(const char* domain, OrtCustomOpDomain** out);
  OrtStatus*(ORT_API_CALL* CustomOpDomain_Add)(OrtCustomOpDomain* domain, const OrtCustomOp* op);
  OrtStatus*(ORT_API_CALL* AddCustomOpDomain)(OrtSessionOptions* options, OrtCustomOpDomain* domain);
  void* unused29;
  OrtStatus*(ORT_API_CALL* SessionGetInputCount)(const OrtSession* session, size_t* count);
  OrtStatus*(ORT_API_CALL* SessionGetOutputCount)(const OrtSession* session, size_t* count);
  void* unused32;
  OrtStatus*(ORT_API_CALL* SessionGetInputTypeInfo)(const OrtSession* session, size_t index, OrtTypeInfo** info);
  OrtStatus*(ORT_API_CALL* SessionGetOutputTypeInfo)(const OrtSession* session, size_t index, OrtTypeInfo** info);
  void* unused35;
  // The name is allocated with `allocator`; the caller frees it with AllocatorFree.
  OrtStatus*(ORT_API_CALL* SessionGetInputName)(const OrtSession* session, size_t index, OrtAllocator* allocator,
                                                char** name);
  OrtStatus*(ORT_API_CALL* SessionGetOutputName)(const OrtSession* session, size_t index, OrtAllocator* allocator,
                                                 char** name);
  void* unused38[11];  // 38-48
  // A tensor over the caller's memory, which must outlive the value.
  OrtStatus*(ORT_API_CALL* CreateTensorWithDataAsOrtValue)(const OrtMemoryInfo* memory, void* data, size_t bytes,
                                                           const int64_t* shape, size_t rank,
                                                           ONNXTensorElementDataType type, OrtValue** value);
  void* unused50;
  OrtStatus*(ORT_API_CALL* GetTensorMutableData)(OrtValue* value, void** data);
  void* unused52[3];  // 52-54
  // The tensor info belongs to the type info; it is not released on its own.
  OrtStatus*(ORT_API_CALL* CastTypeInfoToTensorInfo)(const OrtTypeInfo* info,
                                                     const OrtTensorTypeAndShapeInfo** tensor);
  OrtStatus*(ORT_API_CALL* GetOnnxTypeFromTypeInfo)(const OrtTypeInfo* info, ONNXType* type);
  void* unused57[3];  // 57-59
  OrtStatus*(ORT_API_CALL* GetTensorElementType)(const OrtTensorTypeAndShapeInfo* info,
                                                 ONNXTensorElementDataType* type);
  OrtStatus*(ORT_API_CALL* GetDimensionsCount)(const OrtTensorTypeAndShapeInfo* info, size_t* rank);
  // -1 for a symbolic dimension.
  OrtStatus*(ORT_API_CALL* GetDimensions)(const OrtTensorTypeAndShapeInfo* info, int64_t* dims, size_t rank);
  // The strings belong to the info; "" for a dimension without a name.
  OrtStatus*(ORT_API_CALL* GetSymbolicDimensions)(const OrtTensorTypeAndShapeInfo* info, const char** names,
                                                  size_t rank);
  OrtStatus*(ORT_API_CALL* GetTensorShapeElementCount)(const OrtTensorTypeAndShapeInfo* info, size_t* count);
  OrtStatus*(ORT_API_CALL* GetTensorTypeAndShape)(const OrtValue* value, OrtTensorTypeAndShapeInfo** info);
  void* unused66[3];  // 66-68
  OrtStatus*(ORT_API_CALL* CreateCpuMemoryInfo)(OrtAllocatorType allocator, OrtMemType memory,
                                                OrtMemoryInfo** info);
  void* unused70[6];  // 70-75
  OrtStatus*(ORT_API_CALL* AllocatorFree)(OrtAllocator* allocator, void* pointer);
  void* unused77;
  // The process-wide CPU allocator: never released.
  OrtStatus*(ORT_API_CALL* GetAllocatorWithDefaultOptions)(OrtAllocator** allocator);
  void* unused79[6];  // 79-84
  OrtStatus*(ORT_API_CALL* KernelInfoGetAttribute_float)(const OrtKernelInfo* info, const char* name, float* out);
  OrtStatus*(ORT_API_CALL* KernelInfoGetAttribute_int64)(const OrtKernelInfo* info, const char* name, int64_t* out);
  void* unused87;
  OrtStatus*(ORT_API_CALL* KernelContext_GetInputCount)(const OrtKernelContext* context, size_t* out);
  OrtStatus*(ORT_API_CALL* KernelContext_GetOutputCount)(const OrtKernelContext* context, size_t* out);
  OrtStatus*(ORT_API_CALL* KernelContext_GetInput)(const OrtKernelContext* context, size_t index,
                                                   const OrtValue** out);
  // The output over the memory IoBinding bound for it when `dims` equal the bound shape.
  OrtStatus*(ORT_API_CALL* KernelContext_GetOutput)(OrtKernelContext* context, size_t index, const int64_t* dims,
                                                    size_t rank, OrtValue** out);
  void* unused92;
  void(ORT_API_CALL* ReleaseStatus)(OrtStatus* status);
  void* unused94;
  void(ORT_API_CALL* ReleaseSession)(OrtSession* session);
  void(ORT_API_CALL* ReleaseValue)(OrtValue* value);
  void* unused97;
  void(ORT_API_CALL* ReleaseTypeInfo)(OrtTypeInfo* info);
  void(ORT_API_CALL* ReleaseTensorTypeAndShapeInfo)(OrtTensorTypeAndShapeInfo* info);
  void(ORT_API_CALL* ReleaseSessionOptions)(OrtSessionOptions* options);
  void* unused101[29];  // 101-129
  // Session config keys (onnxruntime_session_options_config_keys.h), e.g. the intra-op pool's spinning.
  OrtStatus*(ORT_API_CALL* AddSessionConfigEntry)(OrtSessionOptions* options, const char* key, const char* value);
  void* unused131[2];  // 131-132
  OrtStatus*(ORT_API_CALL* RunWithBinding)(OrtSession* session, const OrtRunOptions* options,
                                           const OrtIoBinding* binding);
  OrtStatus*(ORT_API_CALL* CreateIoBinding)(OrtSession* session, OrtIoBinding** binding);
  void(ORT_API_CALL* ReleaseIoBinding)(OrtIoBinding* binding);
  OrtStatus*(ORT_API_CALL* BindInput)(OrtIoBinding* binding, const char* name, const OrtValue* value);
  OrtStatus*(ORT_API_CALL* BindOutput)(OrtIoBinding* binding, const char* name, const OrtValue* value);
  // An output ONNX Runtime allocates on the given device when the run gives it a shape.
  OrtStatus*(ORT_API_CALL* BindOutputToDevice)(OrtIoBinding* binding, const char* name,
                                               const OrtMemoryInfo* memory);
  void* unused139;
  // The bound outputs in binding order: the array is allocated with `allocator` (freed with
  // AllocatorFree), and each value is released with ReleaseValue.
  OrtStatus*(ORT_API_CALL* GetBoundOutputValues)(const OrtIoBinding* binding, OrtAllocator* allocator,
                                                 OrtValue*** values, size_t* count);
  // Unbind every input (or output) of a binding: the kept binding starts over.
  void(ORT_API_CALL* ClearBoundInputs)(OrtIoBinding* binding);
  void(ORT_API_CALL* ClearBoundOutputs)(OrtIoBinding* binding);
  void* unused143[106];  // 143-248
  // An input the graph holds as a constant initializer, for a kernel to prepare once when made;
  // *isConstant is 0 (and *out unset) for any other input. The value belongs to the session.
  OrtStatus*(ORT_API_CALL* KernelInfoGetConstantInput_tensor)(const OrtKernelInfo* info, size_t index,
                                                              int* isConstant, const OrtValue** out);
  void* unused250[24];  // 250-273
  // fn(data, i) for i in [0, total) on the session's intra-op pool; returns when all are done.
  OrtStatus*(ORT_API_CALL* KernelContext_ParallelFor)(const OrtKernelContext* context, void (*fn)(void*, size_t),
                                                      size_t total, size_t batches, void* data);
};

// The one symbol the library exports: never versioned, so these two slots never move.
struct OrtApiBase {
  const OrtApi*(ORT_API_CALL* GetApi)(uint32_t version);
  const char*(ORT_API_CALL* GetVersionString)();
};

typedef const OrtApiBase*(ORT_API_CALL* OrtGetApiBaseFunction)();

}  // extern "C"

// Each typed slot sits at its index in ONNX Runtime's table.
#define ORTSERVE_SLOT(member, index)                                 \
  static_assert(offsetof(OrtApi, member) == (index) * sizeof(void*), \
                "OrtApi::" #member " must be slot " #index)
ORTSERVE_SLOT(CreateStatus, 0);
ORTSERVE_SLOT(GetErrorMessage, 2);
ORTSERVE_SLOT(CreateEnv, 3);
ORTSERVE_SLOT(CreateSession, 7);
ORTSERVE_SLOT(CreateSessionOptions, 10);
ORTSERVE_SLOT(SetSessionExecutionMode, 13);
ORTSERVE_SLOT(EnableProfiling, 14);
ORTSERVE_SLOT(DisableMemPattern, 17);
ORTSERVE_SLOT(DisableCpuMemArena, 19);
ORTSERVE_SLOT(SetSessionGraphOptimizationLevel, 23);
ORTSERVE_SLOT(SetIntraOpNumThreads, 24);
ORTSERVE_SLOT(SetInterOpNumThreads, 25);
ORTSERVE_SLOT(CreateCustomOpDomain, 26);
ORTSERVE_SLOT(CustomOpDomain_Add, 27);
ORTSERVE_SLOT(AddCustomOpDomain, 28);
ORTSERVE_SLOT(SessionGetInputCount, 30);
ORTSERVE_SLOT(SessionGetOutputCount, 31);
ORTSERVE_SLOT(SessionGetInputTypeInfo, 33);
ORTSERVE_SLOT(SessionGetOutputTypeInfo, 34);
ORTSERVE_SLOT(SessionGetInputName, 36);
ORTSERVE_SLOT(SessionGetOutputName, 37);
ORTSERVE_SLOT(CreateTensorWithDataAsOrtValue, 49);
ORTSERVE_SLOT(GetTensorMutableData, 51);
ORTSERVE_SLOT(CastTypeInfoToTensorInfo, 55);
ORTSERVE_SLOT(GetOnnxTypeFromTypeInfo, 56);
ORTSERVE_SLOT(GetTensorElementType, 60);
ORTSERVE_SLOT(GetDimensionsCount, 61);
ORTSERVE_SLOT(GetDimensions, 62);
ORTSERVE_SLOT(GetSymbolicDimensions, 63);
ORTSERVE_SLOT(GetTensorShapeElementCount, 64);
ORTSERVE_SLOT(GetTensorTypeAndShape, 65);
ORTSERVE_SLOT(CreateCpuMemoryInfo, 69);
ORTSERVE_SLOT(AllocatorFree, 76);
ORTSERVE_SLOT(GetAllocatorWithDefaultOptions, 78);
ORTSERVE_SLOT(KernelInfoGetAttribute_float, 85);
ORTSERVE_SLOT(KernelInfoGetAttribute_int64, 86);
ORTSERVE_SLOT(KernelContext_GetInputCount, 88);
ORTSERVE_SLOT(KernelContext_GetOutputCount, 89);
ORTSERVE_SLOT(KernelContext_GetInput, 90);
ORTSERVE_SLOT(KernelContext_GetOutput, 91);
ORTSERVE_SLOT(ReleaseStatus, 93);
ORTSERVE_SLOT(ReleaseSession, 95);
ORTSERVE_SLOT(ReleaseValue, 96);
ORTSERVE_SLOT(ReleaseTypeInfo, 98);
ORTSERVE_SLOT(ReleaseTensorTypeAndShapeInfo, 99);
ORTSERVE_SLOT(ReleaseSessionOptions, 100);
ORTSERVE_SLOT(AddSessionConfigEntry, 130);
ORTSERVE_SLOT(RunWithBinding, 133);
ORTSERVE_SLOT(CreateIoBinding, 134);
ORTSERVE_SLOT(ReleaseIoBinding, 135);
ORTSERVE_SLOT(BindInput, 136);
ORTSERVE_SLOT(BindOutput, 137);
ORTSERVE_SLOT(BindOutputToDevice, 138);
ORTSERVE_SLOT(GetBoundOutputValues, 140);
ORTSERVE_SLOT(ClearBoundInputs, 141);
ORTSERVE_SLOT(ClearBoundOutputs, 142);
ORTSERVE_SLOT(KernelInfoGetConstantInput_tensor, 249);
ORTSERVE_SLOT(KernelContext_ParallelFor, 274);
#undef ORTSERVE_SLOT
static_assert(sizeof(OrtApi) == 275 * sizeof(void*), "OrtApi ends at KernelContext_ParallelFor (slot 274)");
static_assert(sizeof(OrtCustomOp) == 176, "OrtCustomOp holds the members up to C API version 17");
static_assert(sizeof(OrtApiBase) == 2 * sizeof(void*), "OrtApiBase holds GetApi and GetVersionString");
