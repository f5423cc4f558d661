#pragma once
// A training software stack as data (workloads/stacks/*.json): how Megatron-Core, torchtitan,
// DeepSpeed (or an ideal stack) really run a layer. What each bundled stack says, with its
// sources, is in ../shared/reference/software-stacks.md and the README; the values in the files
// come from the stacks' code, docs and published microbenchmarks, never from fitting an
// end-to-end run.
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compute/dtype.hpp"
#include "compute/kernel.hpp"
#include "core/json_reader.hpp"
#include "model/op_catalogue.hpp"
#include "model/recompute.hpp"

namespace meshsim {

enum class Recompute { none, selective, full };
inline constexpr std::array kAllRecompute{Recompute::none, Recompute::selective, Recompute::full};
std::string_view name_of(Recompute r);
std::optional<Recompute> parse_recompute(std::string_view s);

// How the stack runs one catalogue op that a fused stack runs as one kernel: eager PyTorch's
// composite RMSNorm is eight kernels moving about ten times the fused kernel's bytes.
struct OpKernels {
  std::int32_t forward_kernels = 1;
  double forward_bytes_factor = 1.0;  // HBM bytes of all the kernels / the fused kernel's
  std::int32_t backward_kernels = 1;
  double backward_bytes_factor = 1.0;
  std::optional<MemoryClass> kernel_class;  // of each unfused kernel; default: the op's class
};

// Tensor-parallel communication overlap (only with sequence parallelism: the all-gathers and
// reduce-scatters around the column- and row-parallel GEMMs; a plain TP all-reduce is never
// overlapped — Transformer Engine issue #746).
enum class TpOverlapMethod { none, userbuffers, async_tp };
inline constexpr std::array kAllTpOverlapMethods{
    TpOverlapMethod::none, TpOverlapMethod::userbuffers, TpOverlapMethod::async_tp};
std::string_view name_of(TpOverlapMethod m);

struct TpOverlap {
  TpOverlapMethod method = TpOverlapMethod::none;
  bool on = false;  // on unless the user says --tp-overlap off
  // A reduce-scatter after a GEMM: the GEMM split into `rs_splits` chunks along M, the RS of
  // chunk i overlapping chunk i+1; the last chunk's RS is exposed. Its CTAs take `rs_sms` SMs.
  // async TP splits into tp chunks instead (rs_splits 0 there).
  std::int32_t rs_splits = 4;
  std::int32_t rs_sms = 0;
  // An all-gather before a GEMM: ring exchange of tp chunks, each GEMM chunk on the chunk that
  // has arrived; on copy engines (TE ring exchange, symmetric-memory copies): `ag_sms` SMs.
  std::int32_t ag_sms = 0;
  // Backward bulk overlaps (TE qkv/fc1 dgrad and wgrad): the collective runs beside the whole
  // GEMM on `bulk_sms` SMs. 0 with method none.
  std::int32_t bulk_sms = 0;
};

// The backward of a column-parallel GEMM (QKV, FC1) without userbuffers. Megatron-Core and
// Transformer Engine (`LinearWithGradAccumulationAndAsyncCommunication`, TE `_Linear` /
// `_LayerNormLinear` backward): with sequence parallelism the GEMM saved only its input's
// sequence shard, so the input is all-gathered again, asynchronously, while the dgrad GEMM runs;
// the dgrad output's reduce-scatter (all-reduce without SP) is then issued asynchronously and
// the wgrad GEMM runs beside it. Eager DTensor TP (torchtitan) saves the gathered input and
// reduces the input gradient after the linear's whole backward. With userbuffers the re-gather
// is TE's bulk overlap beside the dgrad GEMM (qkv_dgrad / fc1_dgrad).
struct TpBackward {
  bool regather_input = false;      // SP: all-gather the saved input shard again in backward
  bool overlap_with_wgrad = false;  // the dgrad output's RS/AR beside the wgrad GEMM
};

// Compute/communication interference: while a collective's kernels run on a GPU they hold SMs
// and move HBM bytes, so the compute kernels beside them run slower.
struct Interference {
  bool on = false;
  std::int32_t nccl_sms = 0;  // SMs (CTAs) a plain NCCL collective occupies
  // HBM bytes per byte a collective sends: it reads what it sends and writes what it receives.
  double hbm_bytes_per_wire_byte = 2.0;
};

// FSDP2's copies around its collectives (torch/distributed/fsdp/_fully_shard/
// _fsdp_collectives.py, pytorch PR #117973): each parameter all-gather is a copy-in of the
// local shards into one buffer (on the all-gather stream) and a copy-out of the gathered buffer
// into the parameters (on the compute stream, before the module runs); each gradient
// reduce-scatter is a `_chunk_cat` copy-in into a buffer of the reduce dtype (the cast rides in
// it) on the reduce-scatter stream. Megatron's distributed optimizer and DeepSpeed reduce from
// and gather into contiguous buffers, with no such copies.
struct FsdpCopies {
  bool on = false;
};

// What the stack captures as CUDA graphs in training: the host launches a captured graph once,
// and its kernels follow one another with the graph's gap. `layer`: each layer's forward and
// backward pass of a micro-batch with its TP, CP and EP collectives (Megatron-Core
// `--cuda-graph-impl transformer_engine|local`); data-parallel and pipeline communication stay
// outside. `iteration`: the whole step but the optimizer (`--cuda-graph-impl full_iteration`,
// NVIDIA's MLPerf Llama 3.1 405B). Megatron's default is none.
enum class CudaGraphs { none, layer, iteration };
inline constexpr std::array kAllCudaGraphs{CudaGraphs::none, CudaGraphs::layer,
                                           CudaGraphs::iteration};
std::string_view name_of(CudaGraphs g);

// How the expert-parallel dispatch and combine move tokens. `all_to_all`: every (token, expert)
// copy is sent to its expert's rank (NCCL all-to-all: Megatron-Core's alltoall dispatcher,
// torchtitan, DeepSpeed). `deepep`: DeepEP's kernels (Megatron-Core
// --moe-token-dispatcher-type flex --moe-enable-deepep): across nodes a token is sent once to
// each node holding one of its experts, on the sender's rail, and forwarded over NVLink there
// (DeepSeek-V3 report §3.2.2; deepseek-ai/DeepEP README, "normal kernels").
enum class EpDispatch { all_to_all, deepep };
inline constexpr std::array kAllEpDispatch{EpDispatch::all_to_all, EpDispatch::deepep};
std::string_view name_of(EpDispatch d);

// How context parallelism moves K and V between the CP ranks. `ring`: ring attention, each of
// the cp steps computes against one K/V block while the next one travels around the ring
// (Megatron-Core's default `--cp-comm-type p2p`, Transformer Engine's AttnFuncWithCPAndKVP2P).
// `allgather`: K and V are all-gathered before attention and their gradients reduce-scattered
// after it (TE's `--cp-comm-type all_gather`; Llama 3's CP, 2407.21783 §3.3.2; torchtitan's
// default `context_parallel_rotate_method = "allgather"`).
enum class CpComm : std::uint8_t { ring, allgather };
inline constexpr std::array kAllCpComm{CpComm::ring, CpComm::allgather};
std::string_view name_of(CpComm c);

// How the stack's framework cuts the layers into pipeline chunks when the run gives no split
// (train --stage-layers, a Megatron line's --decoder-first/last-pipeline-num-layers).
// `balanced`: meshsim's own split, contiguous chunks minimising the slowest one by estimated
// time (no framework does this; the ideal stack). `even`: the same number of units in every
// chunk, the first chunk's embedding counting as `embedding_layers` layers and the last chunk's
// output layer and loss as `loss_layers`, the remainder one more to each of the first chunks
// (torchtitan generate_llm_fqn_per_model_part with pipeline_parallel_first/last_stage_less_layers,
// 1 and 1 by default; Megatron-Core's uniform split, --account-for-embedding-in-pipeline-split and
// --account-for-loss-in-pipeline-split off by default, needs the units to divide).
// `parameters`: contiguous chunks minimising the most parameters on one (DeepSpeed
// PipelineModule's default partition_method "parameters"; the embedding and the head count
// with their tables).
enum class PipelineSplitMethod : std::uint8_t { balanced, even, parameters };
inline constexpr std::array kAllPipelineSplitMethods{
    PipelineSplitMethod::balanced, PipelineSplitMethod::even, PipelineSplitMethod::parameters};
std::string_view name_of(PipelineSplitMethod m);

// The switches an `even` split's framework offers for its end stages, which `search` sets to
// balance the stages (strategy/pipeline_split.hpp, tuned_chunk_layers). `none`: no switch.
// `layers`: the first and the last stage's layer counts, the middle stages even, each stage's
// layers spread evenly over its virtual stages (Megatron-LM's
// --decoder-first/last-pipeline-num-layers), and the ends weighed as a layer or not
// (--account-for-embedding/loss-in-pipeline-split). `weights`: the
// ends' weights, 0 to 8 layers each (torchtitan's pipeline_parallel_first/last_stage_less_layers).
enum class EndSwitches : std::uint8_t { none, layers, weights };
inline constexpr std::array kAllEndSwitches{EndSwitches::none, EndSwitches::layers,
                                            EndSwitches::weights};
std::string_view name_of(EndSwitches e);
// The most layers an end's weight may count (the `weights` switches; the loader's bound too).
inline constexpr std::int32_t kMaxEndWeight = 8;

struct PipelineSplit {
  PipelineSplitMethod method = PipelineSplitMethod::balanced;
  std::int32_t embedding_layers = 0, loss_layers = 0;  // `even` only
  // `even` only: the framework refuses units that do not divide into the chunks (Megatron-LM's
  // arguments.py asserts it unless the ends' layers are given); meshsim still simulates them,
  // the first chunks one more, with a note (framework_split_note).
  bool must_divide = false;
  EndSwitches end_switches = EndSwitches::none;  // `even` only
  bool operator==(const PipelineSplit&) const = default;
};

// Layers per chunk of an `even` split of `layers` over `chunks` (chunks ≤ layers): units =
// layers + embedding_layers + loss_layers, each chunk units / chunks and the first units % chunks
// one more, less the ends' weights. When a weighted end would keep no layer, the weights are
// dropped (a plain even split). Hand examples: 126 layers, 16 chunks, 1 + 1 → 7, 8 × 14, 7
// (Llama 3 405B); 32 layers, 3 chunks, 1 + 1 → 11, 11, 10.
// Megatron's uneven split of `layers` over `stages` pipeline stages (one chunk each) when they do
// not divide: the middle stages ceil(layers / stages) each, the first and last stage the rest,
// the first one more when it is odd (--decoder-first/last-pipeline-num-layers). Hand example: 61
// layers on 8 stages → 7, 8 × 6, 6. Empty when the ends would keep no layer or when the layers
// divide (the even split is the framework's then).
std::vector<std::int64_t> uneven_ends_chunk_layers(std::int64_t layers, std::int64_t stages);

// The split a framework that needs the units to divide (PipelineSplit::must_divide) runs for
// `layers` in `chunks`: the stack's own when its units divide, else the first of the ends'
// weightings it offers whose units do (embedding and loss, embedding only, loss only: Megatron's
// --account-for-embedding/loss-in-pipeline-split, as NeMo's Llama 3.1 405B recipe sets both for
// 126 layers on 16 stages), else the stack's own (the note of framework_split_note). Any other
// split is returned as given.
PipelineSplit runnable_split(const PipelineSplit& split, std::int64_t layers, std::int64_t chunks);

// Whether `layers` with the ends weighed `embedding_layers` and `loss_layers` divide into
// `chunks` chunks that each keep a layer: the weightings Megatron-LM runs (its account flags).
bool weighted_units_divide(std::int64_t layers, std::int64_t chunks, std::int32_t embedding_layers,
                           std::int32_t loss_layers);

std::vector<std::int64_t> even_chunk_layers(std::int64_t layers, std::int64_t chunks,
                                            std::int32_t embedding_layers,
                                            std::int32_t loss_layers);

// FP8 runs under FSDP (ZeRO-3): how the sharded weights of the FP8 linears are gathered.
// `none`: 16-bit, each rank casting the gathered weight (kGatheredBytesPerParam). `dynamic` and
// `precomputed`: torchao's float8 all-gather (torchtitan `[float8] enable_fsdp_float8_all_gather`,
// docs/float8.md: "cast Float8Linear.weight from high precision to float8 before FSDP
// all-gather so we can communicate in float8 to save bandwidth"): each rank casts its shard and
// the gather moves one byte a parameter. `dynamic` computes each weight's scale in its
// pre-all-gather hook (an amax over the shard, then one all-reduce a weight); `precomputed`
// (`precompute_float8_dynamic_scale_for_fsdp`: "communicate AMAX/scales efficiently in a single
// all-reduce for all parameters") computes them all once a step after the optimizer.
enum class Fp8FsdpAllGather : std::uint8_t { none, dynamic, precomputed };
inline constexpr std::array kAllFp8FsdpAllGather{Fp8FsdpAllGather::none, Fp8FsdpAllGather::dynamic,
                                                 Fp8FsdpAllGather::precomputed};
std::string_view name_of(Fp8FsdpAllGather g);

// How an FP8 GEMM's operands are made in training. On Hopper an FP8 GEMM takes both operands
// K-major, so besides the forward and dgrad operands the wgrad GEMM needs the input and the
// output gradient transposed (Transformer Engine keeps an FP8 copy and its transpose):
// `cast_transpose`: a 16-bit tensor is quantized by one kernel that reads it (2 B an element)
// and writes the FP8 copy and its transpose (1 + 1 B), 4 B an element; `transpose`: the tensor
// is already FP8 (a fused norm wrote it, or an FP8 all-gather brought it) and only its
// transpose is made (1 + 1 B); `none`: no kernel (a stack that quantizes inside its GEMMs).
// Those scale by delayed scaling (Transformer Engine's default recipe: the scale comes from the
// amax history of earlier steps, and the cast records this step's amax as it goes, one pass).
// `amax_cast_transpose`: dynamic tensorwise scaling (torchao's Float8Linear, torchtitan's
// Float8): the scale is this tensor's absolute max, so a reduction reads the whole 16-bit tensor
// (2 B an element) before the cast_transpose kernel can start (4 B): 6 B in 2 kernels. That is
// the fewest a dynamic scale allows (named assumption: Inductor fuses the abs, max, scale,
// clamp and cast chains down to those two passes; eager PyTorch runs more kernels).
enum class Fp8Cast { none, transpose, cast_transpose, amax_cast_transpose };
inline constexpr std::array kAllFp8Casts{Fp8Cast::none, Fp8Cast::transpose, Fp8Cast::cast_transpose,
                                         Fp8Cast::amax_cast_transpose};
std::string_view name_of(Fp8Cast c);
// HBM bytes per element of the tensor, all kernels together: 0, 2, 4 or 6.
double bytes_per_element(Fp8Cast c);
// The bytes per element of each kernel, in launch order (empty for `none`).
std::vector<double> kernel_bytes_per_element(Fp8Cast c);

// The FP8 quantization kernels of one GEMM op (by catalogue name): its input before the
// forward GEMM, its output gradient before the dgrad GEMM, and its weight before the forward
// GEMM (once per forward, recomputed ones included). A stack that keeps its FP8 weights across
// a step's micro-batches (Transformer Engine: the cast runs at the first micro-batch, once a
// step) lists `none` for the weight: a once-a-step cast is not priced.
struct Fp8Casts {
  Fp8Cast input = Fp8Cast::none;
  Fp8Cast output_grad = Fp8Cast::none;
  Fp8Cast weight = Fp8Cast::none;
};

// The catalogue's GEMM ops with weights, the ones an FP8 recipe quantizes (the names `fp8_casts`
// accepts; model/op_catalogue.cpp builds them).
inline constexpr std::array<std::string_view, 13> kFp8GemmOps{
    "qkv_proj",          "q_proj", "q_down_proj", "q_up_proj", "kv_down_proj", "kv_up_proj",
    "out_proj",          "mlp_up", "mlp_down",    "expert_up", "expert_down",  "shared_expert_up",
    "shared_expert_down"};

// What sharded data parallelism (ZeRO-2/3, FSDP) does with a stage's gradients and gathered
// weights under pipeline parallelism. `every_microbatch`: as without a pipeline, each
// micro-batch's backward reduce-scatters its gradients (meshsim's ZeRO-2/3 without this key).
// `once_per_step`: torch.distributed.pipelining's PipelineStage turns FSDP2's gradient sync and
// reshard-after-backward off for all but a stage's last backward of the schedule
// (torch/distributed/pipelining/stage.py, backward_maybe_with_nosync; torchtitan): gradients
// accumulate unsharded in the reduce dtype and are reduce-scattered once, after that last
// backward; weights gathered without reshard-after-forward (torchtitan's default with PP,
// software-stacks.md §1.2) stay gathered from the stage's first forward to the step's end.
enum class ShardedWithPp : std::uint8_t { every_microbatch, once_per_step };
inline constexpr std::array kAllShardedWithPp{ShardedWithPp::every_microbatch,
                                              ShardedWithPp::once_per_step};
std::string_view name_of(ShardedWithPp s);
// Whether a run at ZeRO stage `zero` on `pp` stages syncs its sharded gradients once per step
// (ZeRO-2/3 under a pipeline, on a stack that does so): the trace and the memory model ask it.
inline bool syncs_once_per_step(ShardedWithPp mode, std::int32_t zero, std::int64_t pp) {
  return zero >= 2 && pp > 1 && mode == ShardedWithPp::once_per_step;
}

// The pipeline schedule families a stack may name (Stack::schedules).
inline constexpr std::array<std::string_view, 6> kScheduleFamilies{
    "gpipe", "1f1b", "interleaved", "interleaved-overlap", "zb", "1f1b-overlap"};

// Bytes a parameter of the weights ZeRO-3/FSDP gathers and of the unsharded gradients it
// reduces, in every run: 16 bits, whatever the sharded state holds (FSDP2's param_dtype beside
// fp32 shards) and in FP8 runs too (their GEMMs quantize the gathered weights and write 16-bit
// gradients), but for the FP8 linears' weights of a stack that gathers them in FP8
// (gathers_fp8_weights: an FP8 FSDP all-gather or FP8 parameters; fsdp_gathered_bytes). The
// trace's collectives and copies and the memory model's gathered layers use it.
inline constexpr double kGatheredBytesPerParam = 2;

struct DataParallel {
  // Gradient buckets of max(bucket_min_params, bucket_params_per_rank × dp) parameters
  // (Megatron-Core: max(40 M, 1 M × DP)).
  double bucket_min_params = 0;
  double bucket_params_per_rank = 0;
  // The dtype gradients are reduced in, by the training dtype (Megatron: fp32 for bf16 runs,
  // bf16 for its FP8 recipes); a dtype not listed reduces in `grad_reduce_default`.
  std::map<DType, DType> grad_reduce_by_dtype;
  DType grad_reduce_default = DType::bf16;
  ShardedWithPp sharded_with_pp = ShardedWithPp::every_microbatch;
  DType grad_reduce(DType training) const {
    const auto it = grad_reduce_by_dtype.find(training);
    return it == grad_reduce_by_dtype.end() ? grad_reduce_default : it->second;
  }
};

// Bytes per parameter of model state (before sharding).
struct StateBytes {
  double weight = 2, grad = 2, master = 4, optimizer = 8;
};

struct RecomputePolicy {
  std::string name;  // the stack's own name ("selective", "op", "layer", "full")
  std::string description;
  Recompute mode = Recompute::none;
  // selective: the regions that re-run before the layer's backward (model/recompute.hpp). A
  // policy's "ops" in a stack file are one region whose ops' stored tensors are dropped (catalogue
  // ops, or GEMM parts "qkv_proj.k"); none: Korthikanti et al.'s attention scores.
  std::vector<RecomputeUnit> units;
  // The stack's module names the regions came from (Megatron's --recompute-modules), in the
  // order given; empty for a policy of the stack file.
  std::vector<std::string> modules;
  // full: every `every`-th layer is checkpointed (layers every−1, 2·every−1, … counted from 0
  // over the whole model), the others keep their activations; 1 = every layer. torchtitan's
  // `layer` policy (selective_ac_option "2").
  std::int32_t every = 1;
};

struct Stack {
  std::string name, file, description;
  std::vector<std::string> sources;
  // Catalogue GEMMs the stack runs as one GEMM per part (torchtitan's separate wq, wk, wv and
  // w1, w3 linears); the rest run fused as the catalogue has them.
  std::vector<std::string> unfused_gemms;
  std::map<std::string, OpKernels, std::less<>> op_kernels;  // by catalogue op name
  TpOverlap tp_overlap;
  TpBackward tp_backward;
  Interference interference;
  FsdpCopies fsdp_copies;
  CudaGraphs cuda_graphs = CudaGraphs::none;
  EpDispatch ep_dispatch = EpDispatch::all_to_all;
  CpComm cp_comm = CpComm::ring;
  // FP8 runs: the TP all-gathers of a linear's input move FP8 (Transformer Engine: the norm of a
  // LayerNormLinear writes FP8 and the sequence-parallel all-gather moves it; an output gradient
  // is cast to FP8 before its all-gather; the saved FP8 input is what backward re-gathers.
  // torchao's Float8 tensor parallelism, torchtitan's with tensorwise scaling: the input is cast
  // before its gather, PrepareFloat8ModuleInput, and the output gradient before its gather,
  // Float8RowwiseParallel). Reduce-scatters move the GEMMs' 16-bit outputs either way.
  bool fp8_tp_all_gathers = false;
  // FP8 runs: the routed experts' GEMMs run in FP8. Transformer Engine's GroupedLinear (Megatron-
  // Core's TEGroupedMLP under --fp8) does; torchtitan's Float8 converter swaps nn.Linear modules
  // for Float8Linear (torchao convert_to_float8_training), and its routed experts are one
  // torch._grouped_mm over 3-D weights, not linears, so they stay 16-bit unless the MoE prototype
  // is asked for ([float8] moe_fqns_prototype). Shared experts are linears and follow the
  // others. Absent: true (the behaviour before this field existed).
  bool fp8_routed_experts = true;
  Fp8FsdpAllGather fp8_fsdp_all_gather = Fp8FsdpAllGather::none;
  // FP8 runs: the FP8 linears' working weights are FP8 parameters (Megatron-LM
  // `--fp8-param-gather`: "Keep the compute param in fp8 (do not use any other intermediate
  // dtype) and perform the param all-gather in fp8"; Transformer Engine's fp8_model_init): cast
  // from the fp32 main weights once a step, held in one byte instead of the 16-bit weight and its
  // FP8 copy, and gathered in one byte by the distributed optimizer's parameter all-gather
  // (ZeRO-1/2) or by FSDP (ZeRO-3). Exclusive with fp8_fsdp_all_gather.
  bool fp8_params = false;
  // FP8 runs: the quantization kernels around each GEMM op (empty: none are priced).
  std::map<std::string, Fp8Casts, std::less<>> fp8_casts;
  DataParallel data_parallel;
  StateBytes state;
  // The optimizer step's HBM bytes per local parameter (fused AdamW: 28–30, derived in
  // software-stacks.md §3).
  double optimizer_bytes_per_param = 28;
  // Gradient clipping's norm pass: HBM bytes read per local parameter (the fp32 main gradient,
  // 4; software-stacks.md §3: Megatron --clip-grad 1.0, torchtitan max_norm 1.0). 0: no clipping.
  double grad_norm_bytes_per_param = 0;
  std::vector<RecomputePolicy> recompute;  // the policies the stack offers
  std::string default_recompute;
  // Selective recompute by module (Megatron's --recompute-modules): each module name's regions.
  // Empty: the stack has no such choice.
  std::map<std::string, std::vector<RecomputeUnit>, std::less<>> recompute_modules;
  // Full recompute of only the first N layers of each pipeline chunk (Megatron's
  // --recompute-method block): a search's full-recompute candidates recompute the fewest layers
  // that fit.
  bool recompute_block = false;
  // Full recompute of every N-th layer of a chunk for any N (torchtitan's selective layer AC,
  // selective_ac_option N): a search's full-recompute candidates recompute every N-th layer
  // for the largest N that fits.
  bool recompute_layer_frequency = false;
  // The ZeRO stages the stack runs (ParallelConfig::zero), ascending: torchtitan replicates
  // (DDP) or shards with FSDP2 (ZeRO-3), with no ZeRO-1/2. A search enumerates only these;
  // train and memory simulate another as asked, with a note (unrun_notes).
  std::vector<std::int32_t> zero_stages{0, 1, 2, 3};
  // The pipeline schedules the stack runs, by family (kScheduleFamilies, parallel/
  // parallel_config.hpp schedule_family); always 1f1b, the schedule of a run without a pipeline.
  // Megatron-LM has no GPipe or zero-bubble schedule in its main line; DeepSpeed's pipeline
  // engine runs its 1F1B-style TrainSchedule only. A search tries only these.
  std::vector<std::string> schedules{kScheduleFamilies.begin(), kScheduleFamilies.end()};
  // How the framework splits the layers into pipeline chunks (strategy/stack_split.hpp applies it).
  PipelineSplit pipeline_split;

  const RecomputePolicy* policy(std::string_view name) const;
  bool runs_zero(std::int32_t zero) const;
  bool runs_schedule(std::string_view family) const;
  // "0 or 3", "0, 1, 2 or 3": the stages for an error message.
  std::string zero_stages_text() const;
  // The stack's first policy of `mode` (what a search's selective or full candidate runs).
  const RecomputePolicy* policy_for(Recompute mode) const;
  const OpKernels* kernels_of(std::string_view op) const;
  const Fp8Casts* fp8_casts_of(std::string_view op) const;
  // FP8 runs: whether the stack keeps a persistent FP8 copy of its weights between steps
  // (Transformer Engine) rather than casting them every forward from the 16-bit weights (a
  // `weight` cast in `fp8_casts`: torchao, whose casts are temporaries).
  bool keeps_fp8_weights() const;
  bool unfused(std::string_view gemm) const;
  double grad_reduce_bytes(DType training) const {
    return bytes_of(data_parallel.grad_reduce(training));
  }
};

// A dense FP8 GEMM with weights: the linears whose weights an FP8 weight gather moves in one
// byte (torchao's float8 all-gather wraps the Float8Linear weights, TE's FP8 parameters are its
// linears'; the experts' grouped weights, norms, the embedding and the 16-bit head stay 16-bit).
bool is_fp8_linear(const OpSpec& op);
// Whether the stack gathers the FP8 linears' weights in FP8 (Stack::fp8_fsdp_all_gather or
// Stack::fp8_params).
bool gathers_fp8_weights(const Stack& stack);
// Whether a data-parallel gather of the weights moves this op's in FP8 on `stack`.
bool fsdp_gathers_fp8(const Stack& stack, const OpSpec& op);
// Bytes a parameter of `op`'s weight moves in a data-parallel gather and takes once gathered: 1
// for an FP8 linear where `fp8_gather`, else kGatheredBytesPerParam.
double fsdp_gathered_bytes(bool fp8_gather, const OpSpec& op);
// Bytes of `params` weights gathered, `fp8_params` of them (FP8 linears' on a stack that
// gathers them in FP8) in one byte and the rest in kGatheredBytesPerParam.
double gathered_weight_bytes(double params, double fp8_params);
// The stack with FP8 parameters (Megatron's --fp8-param-gather, which replaces an FP8 FSDP
// all-gather), named "<name> +fp8-params" when that changes it; an Error for a stack without
// fp32 main weights (StateBytes::master 0), which FP8 parameters are cast from.
Stack with_fp8_params(Stack stack);
// The stack with its FP8 FSDP all-gather replaced (a torchtitan config's [float8] switches; one
// that is not none replaces FP8 parameters), named "<name> +fp8-fsdp-all-gather" (or
// "+fp8-fsdp-all-gather-precomputed") when that changes it.
Stack with_fp8_fsdp_all_gather(Stack stack, Fp8FsdpAllGather gather);

Stack read_stack(const JsonRef& ref);
Stack load_stack(const std::string& path);

// The stacks compiled into the library (workloads/stacks/*.json), by name; `default_stack()` is
// megatron.
std::vector<std::string> bundled_stack_names();
const Stack* bundled_stack(std::string_view name);
const Stack& default_stack();
// A bundled name, else a file path; an unknown name that is not a file is an Error naming both.
Stack resolve_stack(const std::string& name_or_file);
// The stack running the catalogue's fused loss kernel instead of its own loss kernels (Megatron's
// --cross-entropy-loss-fusion, torchtitan's compiled loss), named "<name> +fused-loss"; the
// stack itself when it runs the fused kernel already.
Stack with_fused_loss(Stack stack);
// Whether the stack runs the catalogue's fused loss kernel (it has no loss kernels of its own):
// what a launch configuration written for it says (--cross-entropy-loss-fusion).
bool runs_fused_loss(const Stack& stack);
// The stack with its EP dispatch replaced (`--ep-dispatch`, a Megatron line's
// --moe-enable-deepep), named "<name> +deepep" (or "+all_to_all") when that changes it.
Stack with_ep_dispatch(Stack stack, EpDispatch dispatch);
// The stack with CP's K/V exchange overridden (`--cp-comm`, a launch configuration's
// `--cp-comm-type` or `context_parallel_rotate_method`); the name is kept, since the step's
// header names the exchange beside the stack whenever CP > 1.
Stack with_cp_comm(Stack stack, CpComm comm);
// The stack with its pipeline split replaced (a launch configuration's split switches); the name
// is kept, since the step's report lists the layers of every stage.
Stack with_pipeline_split(Stack stack, PipelineSplit split);

// The policy a user's --recompute names (the stack's names, or none/selective/full mapped to the
// stack's policy of that mode); an Error lists the stack's names.
RecomputePolicy recompute_policy(const Stack& stack, std::string_view name);
// The selective policy recomputing the stack's `modules` (Megatron's --recompute-modules: each
// module once, in the order given). An Error naming `where` for a stack without modules, an
// unknown or repeated module, or none.
RecomputePolicy module_policy(const Stack& stack, const std::vector<std::string>& modules,
                              const std::string& where);
// The stack whose selective policy (what a search's selective candidates run) recomputes
// `modules` instead (search --recompute-modules); errors as module_policy's.
// One line for each of `modules` that acts on no layer of `model` (acts_on): "recompute module
// 'moe' acts on no layer of llama3.1-8b (its regions need router)". Empty when all act.
std::vector<std::string> idle_module_notes(const Stack& stack,
                                           const std::vector<std::string>& modules,
                                           const ModelSpec& model);
// "stack 'deepspeed' does not run interleaved (its schedules: 1f1b)" for a schedule family the
// stack does not run (a search's pin error), nothing for one it runs.
std::optional<std::string> unrun_schedule(const Stack& stack, std::string_view schedule_family);
// One line for a ZeRO stage or a schedule family the stack does not run, simulated as asked
// (train and memory): "stack 'megatron' does not run zb (its schedules: 1f1b, interleaved,
// interleaved-overlap, 1f1b-overlap); simulated as asked". Empty when it runs both.
std::vector<std::string> unrun_notes(const Stack& stack, std::int32_t zero,
                                     std::string_view schedule_family);

Stack with_recompute_modules(Stack stack, const std::vector<std::string>& modules,
                             const std::string& where);

}  // namespace meshsim
