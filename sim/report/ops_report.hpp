#pragma once
// The per-kernel view of one transformer layer on one GPU (`meshsim ops`): every kernel of the
// op catalogue's layer at N tokens on TP degree T — class, shape, FLOPs, bytes, time, achieved
// rate and share of the layer — then the model's ends (embedding; final norm, logits, loss).
#include <cstdint>
#include <string>
#include <vector>

#include "compute/compute_model.hpp"
#include "core/json_reader.hpp"
#include "model/model_spec.hpp"
#include "stack/stack.hpp"

namespace meshsim {

struct OpsRequest {
  std::int64_t tokens = 0;
  std::int64_t tp = 1;
  DType dtype = DType::bf16;
  bool backward = false;     // dgrad and wgrad kernels instead of forward
  std::int64_t context = 0;  // cached tokens before the N new ones (a prefill chunk)
  std::int64_t decode = 0;   // > 0: attention is one decode step of this many sequences
  std::int64_t layer = -1;   // -1: the first layer (the first MoE layer of an MoE model)
  // The stack whose kernels are listed (GEMM parts as their own GEMMs, an eager op as its
  // kernels); the catalogue's fused kernels when null.
  const Stack* stack = nullptr;
};

struct OpsRow {
  std::string name;
  std::string part;          // "forward", "dgrad", "wgrad"
  std::string kind;          // "gemm", "attention", "memory"
  std::string kernel_class;  // gemm, attention, decode_attention or the memory class
  std::string shape;
  double flops = 0, bytes = 0, time_s = 0;
  bool ends = false;
  std::int32_t kernels = 1;  // kernels the stack launches for this row
};

struct OpsReport {
  std::string gpu, model, source;
  OpsRequest request;
  std::int64_t layer = 0;
  std::vector<OpsRow> rows;
  double layer_time_s = 0;  // the layer's rows (not the ends)
  // The profile's host time per kernel launch (ComputeModel::host_per_kernel_s; 0: not
  // modelled): a row whose launches take longer than its kernels is launch-bound.
  double host_per_kernel_s = 0;
  double layer_host_s = 0;  // the layer's rows' launches (not the ends)
  double host_s(const OpsRow& row) const { return host_per_kernel_s * row.kernels; }
};

OpsReport ops_report(const ModelSpec& model, const ComputeModel& cm, const OpsRequest& request);
Json to_json(const OpsReport& r);
std::string to_text(const OpsReport& r);

}  // namespace meshsim
