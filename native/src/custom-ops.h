// ortserve's custom operators (the "ortserve" domain) as rows of a table: each operator is an
// OpDescriptor — its name, its input and output types, and its family's create, compute and
// destroy — and one builder (custom-ops.cc) turns every row into the OrtCustomOp ONNX Runtime
// calls. The families: CachedAttention* (attention-op.cc), and the projections' epilogues and
// BlockQuantMatMul* and HalfMatMul (projection-ops.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "attention.h"
#include "ort-api.h"

namespace ortserve {

constexpr size_t kMaxOpInputs = 8;
constexpr size_t kMaxOpOutputs = 3;

struct OpDescriptor {
  const char* name;
  // What its errors are reported under: the family's name, or its own (null).
  const char* label;
  size_t inputCount;
  ONNXTensorElementDataType inputs[kMaxOpInputs];
  size_t outputCount;
  ONNXTensorElementDataType outputs[kMaxOpOutputs];
  // The family's parameters for this operator (a struct of the family's), handed to create.
  const void* params;
  // Makes a kernel from the node's attributes and constant inputs: "" with *kernel set, or why not.
  std::string (*create)(const void* params, const OrtApi* api, const OrtKernelInfo* info, void** kernel);
  // Runs the kernel over the context's inputs and outputs: "" or what went wrong.
  std::string (*compute)(const void* kernel, OrtKernelContext* context);
  void (*destroy)(void* kernel);
};

// The rows of each family.
std::vector<OpDescriptor> AttentionOps();
std::vector<OpDescriptor> ProjectionOps();

// Adds the "ortserve" domain to session options: every family's operators, built once for the
// process (sessions refer to the domain for as long as they live).
std::string AddOrtserveOps(OrtSessionOptions* options);

// ---- what the families' compute functions share ----

struct TensorView {
  void* data = nullptr;
  std::vector<int64_t> dims;
};

// The data and dims of a tensor value.
std::string Describe(const OrtValue* value, TensorView* view);

// Describes the context's first `count` inputs into `views`.
std::string ReadInputs(OrtKernelContext* context, size_t count, TensorView* views);

// ONNX Runtime's intra-op pool for a kernel's work items (inline when it cannot take them).
ParallelFor ParallelForOf(OrtKernelContext* context);

}  // namespace ortserve
