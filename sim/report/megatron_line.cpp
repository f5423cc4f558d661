#include "report/megatron_line.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <set>

#include "core/error.hpp"

namespace meshsim {
namespace {

// Shell words: blanks split, '…' and "…" quote, a backslash escapes the next character (a
// backslash-newline joins lines), a line whose first word starts with # is a comment.
std::vector<std::string> shell_words(std::string_view text, const std::string& where) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false, line_start = true;
  auto flush = [&] {
    if (in_word) words.push_back(std::move(word));
    word.clear();
    in_word = false;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n' || c == ' ' || c == '\t' || c == '\r') {
      flush();
      if (c == '\n') line_start = true;
      continue;
    }
    if (c == '\\' && i + 1 < text.size() && text[i + 1] == '\n') {  // a continued line
      ++i;
      continue;
    }
    if (line_start && c == '#') {  // a comment line (what --emit writes before the command)
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
      continue;
    }
    line_start = false;
    in_word = true;
    if (c == '\\' && i + 1 < text.size()) {
      word += text[++i];
    } else if (c == '\'' || c == '"') {
      const auto close = text.find(c, i + 1);
      if (close == std::string_view::npos)
        throw Error("", where,
                    fmt::format("unterminated {} quote", c == '"' ? "double" : "single"));
      word += text.substr(i + 1, close - i - 1);
      i = close;
    } else {
      word += c;
    }
  }
  flush();
  return words;
}

// Flags meshsim reads and whether each takes a value. The rest are skipped (with their value:
// the next word when it does not start with --) and listed as ignored.
const std::map<std::string, bool, std::less<>>& known_flags() {
  static const std::map<std::string, bool, std::less<>> kFlags = {
      // layout and batch
      {"--tensor-model-parallel-size", true},
      {"--pipeline-model-parallel-size", true},
      {"--context-parallel-size", true},
      {"--expert-model-parallel-size", true},
      {"--micro-batch-size", true},
      {"--global-batch-size", true},
      {"--seq-length", true},
      {"--sequence-parallel", false},
      {"--num-layers-per-virtual-pipeline-stage", true},
      {"--num-virtual-stages-per-pipeline-rank", true},
      {"--microbatch-group-size-per-virtual-pipeline-stage", true},
      {"--decoder-first-pipeline-num-layers", true},
      {"--decoder-last-pipeline-num-layers", true},
      {"--account-for-embedding-in-pipeline-split", false},
      {"--account-for-loss-in-pipeline-split", false},
      // sharding of model state
      {"--use-distributed-optimizer", false},
      {"--use-megatron-fsdp", false},
      {"--use-custom-fsdp", false},  // Megatron-FSDP's name before Megatron-Core 0.14
      {"--use-torch-fsdp2", false},
      {"--data-parallel-sharding-strategy", true},
      {"--outer-dp-sharding-strategy", true},
      {"--num-distributed-optimizer-instances", true},
      {"--overlap-grad-reduce", false},
      {"--overlap-param-gather", false},
      // the software stack (workloads/stacks/megatron.json runs Megatron-LM's defaults)
      {"--tp-comm-overlap", false},
      {"--cross-entropy-loss-fusion", false},
      // recompute and precision
      {"--recompute-granularity", true},
      {"--recompute-method", true},
      {"--recompute-num-layers", true},
      {"--recompute-activations", false},
      {"--recompute-modules", true},
      {"--bf16", false},
      {"--fp16", false},
      {"--fp8-format", true},
      {"--fp8-param-gather", false},
      // architecture (checked against the model)
      {"--num-layers", true},
      {"--hidden-size", true},
      {"--ffn-hidden-size", true},
      {"--num-attention-heads", true},
      {"--group-query-attention", false},
      {"--num-query-groups", true},
      {"--kv-channels", true},
      {"--swiglu", false},
      {"--squared-relu", false},
      {"--normalization", true},
      {"--position-embedding-type", true},
      {"--rotary-base", true},
      {"--max-position-embeddings", true},
      {"--vocab-size", true},
      {"--untie-embeddings-and-output-weights", false},
      {"--disable-bias-linear", false},
      {"--add-qkv-bias", false},
      {"--multi-latent-attention", false},
      {"--q-lora-rank", true},
      {"--kv-lora-rank", true},
      {"--qk-head-dim", true},
      {"--qk-pos-emb-head-dim", true},
      {"--v-head-dim", true},
      {"--num-experts", true},
      {"--moe-router-topk", true},
      {"--moe-ffn-hidden-size", true},
      {"--moe-shared-expert-intermediate-size", true},
      {"--moe-layer-freq", true},
      {"--moe-grouped-gemm", false},
      {"--moe-router-num-groups", true},
      {"--moe-router-group-topk", true},
      // MoE dispatch (the stack's EP dispatch: DeepEP with flex)
      {"--moe-token-dispatcher-type", true},
      {"--moe-enable-deepep", false},
      // EP all-to-alls under another micro-batch's compute (combined 1F1B)
      {"--overlap-moe-expert-parallel-comm", false},
      // context parallelism's K/V exchange
      {"--cp-comm-type", true},
      {"--moe-flex-dispatcher-backend", true},
      {"--attention-dropout", true},
      {"--hidden-dropout", true},
      // data: synthetic batches of the simulated shapes
      {"--mock-data", false},
      {"--tokenizer-type", true},
  };
  return kFlags;
}

// Known flags that take a list of words (argparse nargs='*'), kept joined by single spaces.
bool takes_list(std::string_view flag) {
  return flag == "--recompute-modules";
}

std::int64_t int_flag(const MegatronLine& line, std::string_view flag, std::int64_t fallback,
                      const std::string& where) {
  const auto it = line.flags.find(flag);
  if (it == line.flags.end()) return fallback;
  std::int64_t v = 0;
  const auto& text = it->second;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 1 || v > (std::int64_t{1} << 40))
    throw Error("", where, std::string(flag) + " '" + text + "' is not a positive integer");
  return v;
}

bool has(const MegatronLine& line, std::string_view flag) {
  return line.flags.contains(flag);
}

// Layers per global chunk of Megatron's uneven split: the first pipeline stage takes
// --decoder-first-pipeline-num-layers, the last --decoder-last-pipeline-num-layers, the middle
// stages the rest evenly (megatron/core/transformer/transformer_block.py
// get_num_layers_to_build), each stage's layers spread evenly over its `v` virtual chunks; chunk
// g is stage g mod pp's. Refused where the layers do not divide, as Megatron-LM refuses them.
std::vector<std::int64_t> megatron_uneven_chunks(const MegatronLine& line, std::int64_t layers,
                                                 std::int64_t pp, std::int64_t v,
                                                 const std::string& where) {
  if (pp < 2)
    throw Error("", where,
                "--decoder-first/last-pipeline-num-layers need a pipeline "
                "(--pipeline-model-parallel-size > 1)");
  const bool has_first = has(line, "--decoder-first-pipeline-num-layers");
  const bool has_last = has(line, "--decoder-last-pipeline-num-layers");
  const auto first = int_flag(line, "--decoder-first-pipeline-num-layers", 0, where);
  const auto last = int_flag(line, "--decoder-last-pipeline-num-layers", 0, where);
  const std::int64_t middle = pp - (has_first ? 1 : 0) - (has_last ? 1 : 0);
  const std::int64_t rest = layers - first - last;
  if (rest < 0 || (middle == 0 && rest != 0) || (middle > 0 && (rest < middle || rest % middle)))
    throw Error("", where,
                fmt::format("{} layers less the first and last stage's ({} and {}) do not divide "
                            "into the {} middle pipeline stages",
                            layers, has_first ? std::to_string(first) : "not given",
                            has_last ? std::to_string(last) : "not given", middle));
  std::vector<std::int64_t> stage(static_cast<std::size_t>(pp), middle > 0 ? rest / middle : 0);
  if (has_first) stage.front() = first;
  if (has_last) stage.back() = last;
  for (std::size_t p = 0; p < stage.size(); ++p)
    if (stage[p] % v != 0)
      throw Error("", where,
                  fmt::format("pipeline stage {}'s {} layers do not divide into {} virtual stages",
                              p, stage[p], v));
  std::vector<std::int64_t> chunks(static_cast<std::size_t>(pp * v));
  for (std::size_t g = 0; g < chunks.size(); ++g)
    chunks[g] = stage[g % static_cast<std::size_t>(pp)] / v;
  return chunks;
}

}  // namespace

MegatronLine parse_megatron_line(std::string_view text, const std::string& where) {
  const auto words = shell_words(text, where);
  // Flags after the training script (torchrun's own come before it), else from the first --.
  std::size_t start = 0;
  for (std::size_t i = 0; i < words.size(); ++i)
    if (words[i].ends_with(".py")) start = i + 1;
  while (start < words.size() && !words[start].starts_with("--")) ++start;
  if (start == words.size()) throw Error("", where, "no --flags in the launch line");
  MegatronLine line;
  const auto& known = known_flags();
  // The last flag read and whether it took a value: what a stray word follows.
  std::string previous;
  bool previous_valued = false;
  for (std::size_t i = start; i < words.size(); ++i) {
    std::string flag = words[i];
    if (!flag.starts_with("--"))
      throw Error("", where,
                  "'" + flag + "' is not a flag (" + previous +
                      (previous_valued ? " takes one value)" : " takes no value)"));
    std::string value;
    bool valued = false;
    if (const auto eq = flag.find('='); eq != std::string::npos) {  // --flag=value
      value = flag.substr(eq + 1);
      flag.resize(eq);
      valued = true;
    }
    const auto k = known.find(flag);
    const bool takes_value =
        k != known.end() ? k->second : i + 1 < words.size() && !words[i + 1].starts_with("--");
    if (takes_value && !valued) {
      if (i + 1 >= words.size() || words[i + 1].starts_with("--"))
        throw Error("", where, flag + " needs a value");
      value = words[++i];
      // Megatron-LM has no positional arguments: the words up to the next flag are this flag's
      // (--data-path 0.5 a 0.5 b, --recompute-modules core_attn moe_act).
      if (k == known.end() || takes_list(flag))
        while (i + 1 < words.size() && !words[i + 1].starts_with("--")) value += " " + words[++i];
    } else if (!takes_value && valued) {
      throw Error("", where, flag + " takes no value");
    }
    previous = flag;
    previous_valued = takes_value;
    if (k == known.end()) {
      line.ignored.push_back(flag);
      continue;
    }
    if (!line.flags.emplace(flag, value).second) throw Error("", where, flag + " is given twice");
  }
  return line;
}

MegatronJob megatron_job(const MegatronLine& line, std::int64_t world, std::int64_t layers,
                         const std::string& where) {
  MegatronJob out;
  auto& c = out.config;
  const auto tp = int_flag(line, "--tensor-model-parallel-size", 1, where);
  const auto pp = int_flag(line, "--pipeline-model-parallel-size", 1, where);
  const auto cp = int_flag(line, "--context-parallel-size", 1, where);
  const auto ep = int_flag(line, "--expert-model-parallel-size", 1, where);
  c.mesh = parse_mesh(fmt::format("tp={},pp={},cp={},ep={}", tp, pp, cp, ep), where, world);

  // ZeRO stage: the distributed optimizer is ZeRO-1; Megatron-FSDP's strategies name the rest.
  const bool fsdp = has(line, "--use-megatron-fsdp") || has(line, "--use-custom-fsdp");
  if (fsdp) {
    const auto it = line.flags.find("--data-parallel-sharding-strategy");
    const std::string strategy = it == line.flags.end() ? "no_shard" : it->second;
    static const std::map<std::string, std::int32_t, std::less<>> kStages = {
        {"no_shard", 0}, {"optim", 1}, {"optim_grads", 2}, {"optim_grads_params", 3}};
    const auto s = kStages.find(strategy);
    if (s == kStages.end())
      throw Error("", where,
                  "--data-parallel-sharding-strategy '" + strategy +
                      "': expected no_shard, optim, optim_grads or optim_grads_params");
    c.zero = s->second;
  } else if (has(line, "--use-torch-fsdp2")) {
    c.zero = 3;
  } else if (has(line, "--use-distributed-optimizer")) {
    c.zero = 1;
  }
  if (const auto instances = int_flag(line, "--num-distributed-optimizer-instances", 1, where);
      instances > 1) {
    if (c.zero == 0)
      throw Error("", where,
                  "--num-distributed-optimizer-instances needs a sharded optimizer "
                  "(--use-distributed-optimizer or Megatron-FSDP)");
    if (c.mesh.dp % instances != 0)
      throw Error("", where,
                  fmt::format("--num-distributed-optimizer-instances {} does not divide the "
                              "data-parallel degree {}",
                              instances, c.mesh.dp));
    c.mesh.fsdp = c.mesh.dp / instances;
  }

  c.sp = has(line, "--sequence-parallel");
  // Recompute: Megatron's full recompute (uniform groups of --recompute-num-layers layers, or
  // only that many layers of each chunk with the block method) or its selective recompute of
  // --recompute-modules (default core_attn, the stack's "selective" policy).
  const auto gran = line.flags.find("--recompute-granularity");
  if (gran != line.flags.end()) {
    if (gran->second == "full") {
      c.recompute = Recompute::full;
      const auto method = line.flags.find("--recompute-method");
      set_recompute_method(c, method == line.flags.end() ? "uniform" : method->second,
                           int_flag(line, "--recompute-num-layers", 1, where), where);
    } else if (gran->second == "selective") {
      c.recompute = Recompute::selective;
    } else {
      throw Error("", where,
                  "--recompute-granularity '" + gran->second + "': expected full or selective");
    }
  } else if (has(line, "--recompute-activations")) {
    c.recompute = Recompute::selective;  // Megatron's older spelling of selective
  }
  if (const auto mods = line.flags.find("--recompute-modules"); mods != line.flags.end()) {
    if (c.recompute != Recompute::selective)
      throw Error("", where, "--recompute-modules needs --recompute-granularity selective");
    for (std::size_t at = 0; at < mods->second.size();) {
      const auto end = std::min(mods->second.find(' ', at), mods->second.size());
      c.recompute_modules.push_back(mods->second.substr(at, end - at));
      at = end + 1;
    }
  }

  if (has(line, "--num-virtual-stages-per-pipeline-rank") &&
      has(line, "--num-layers-per-virtual-pipeline-stage"))
    throw Error("", where,
                "give --num-virtual-stages-per-pipeline-rank or "
                "--num-layers-per-virtual-pipeline-stage, not both");
  // The pipeline split (Megatron-Core get_num_layers_to_build): even over pp × vp chunks, the
  // embedding and the loss counted as a layer each when asked (--account-for-*), or the first
  // and last stage's layers given, the rest even over the middle stages.
  const bool uneven = has(line, "--decoder-first-pipeline-num-layers") ||
                      has(line, "--decoder-last-pipeline-num-layers");
  PipelineSplit split{PipelineSplitMethod::even,
                      has(line, "--account-for-embedding-in-pipeline-split") ? 1 : 0,
                      has(line, "--account-for-loss-in-pipeline-split") ? 1 : 0, true};
  if (uneven && split.embedding_layers + split.loss_layers > 0)
    throw Error("", where,
                "--decoder-first/last-pipeline-num-layers and --account-for-*-in-pipeline-split "
                "do not go together (the first fix the ends' layers, the second weigh them)");
  if (split.embedding_layers + split.loss_layers > 0) out.stack.pipeline_split = split;
  const auto model_layers = int_flag(line, "--num-layers", layers, where);
  const std::int64_t units = model_layers + split.embedding_layers + split.loss_layers;
  std::int64_t virtual_stages = int_flag(line, "--num-virtual-stages-per-pipeline-rank", 1, where);
  if (has(line, "--num-layers-per-virtual-pipeline-stage")) {
    if (uneven)
      throw Error("", where,
                  "meshsim reads an uneven pipeline split with "
                  "--num-virtual-stages-per-pipeline-rank, not "
                  "--num-layers-per-virtual-pipeline-stage");
    const auto per = int_flag(line, "--num-layers-per-virtual-pipeline-stage", 1, where);
    if (units % (pp * per) != 0)
      throw Error("", where,
                  fmt::format("--num-layers-per-virtual-pipeline-stage {} × pp {} does not divide "
                              "the {} layers{}",
                              per, pp, units, units != model_layers ? " (with the ends')" : ""));
    virtual_stages = units / (pp * per);
  }
  if (virtual_stages > 1) c.schedule = {ScheduleKind::interleaved, virtual_stages};
  // Without the uneven flags Megatron-LM asserts that the layers divide (arguments.py); a line
  // whose layers do not is still simulated, with the stack's split and its note
  // (framework_split_note), so that what `--emit megatron` wrote for such a layout reads back.
  if (uneven)
    out.chunk_layers = megatron_uneven_chunks(line, model_layers, pp, virtual_stages, where);
  if (has(line, "--microbatch-group-size-per-virtual-pipeline-stage")) {
    if (virtual_stages == 1)
      throw Error("", where,
                  "--microbatch-group-size-per-virtual-pipeline-stage needs virtual pipeline "
                  "stages");
    c.schedule.group =
        int_flag(line, "--microbatch-group-size-per-virtual-pipeline-stage", 0, where);
  }
  // Megatron-Core's EP overlap (the flag of Megatron-Core ≥ 0.14; earlier versions have none):
  // each steady-state forward merged with the next backward, the interleaved order on a pipeline.
  if (has(line, "--overlap-moe-expert-parallel-comm")) {
    if (virtual_stages > 1)
      c.schedule.overlap = true;
    else if (pp == 1)
      c.schedule = {ScheduleKind::one_f_one_b_overlap, 1};
    else
      throw Error("", where,
                  "--overlap-moe-expert-parallel-comm with pp > 1 needs virtual pipeline stages "
                  "(--num-layers-per-virtual-pipeline-stage): meshsim merges a pipeline's passes "
                  "only on the interleaved schedule");
  }

  auto& j = out.job;
  if (has(line, "--fp8-format"))
    j.dtype = DType::fp8;
  else if (has(line, "--fp16"))
    j.dtype = DType::fp16;
  else if (has(line, "--bf16"))
    j.dtype = DType::bf16;
  else
    j.dtype = DType::fp32;  // Megatron's default without a precision flag
  j.seq = int_flag(line, "--seq-length", 0, where);
  j.micro_batch = int_flag(line, "--micro-batch-size", 1, where);
  j.global_batch = int_flag(line, "--global-batch-size", 0, where);
  // Megatron-LM asserts it (ConstantNumMicroBatchesCalculator, megatron/core/
  // num_microbatches_calculator.py), so the line is refused as Megatron would refuse it.
  if (j.global_batch > 0 && j.global_batch % (j.micro_batch * c.mesh.dp) != 0)
    throw Error("", where,
                fmt::format("--global-batch-size {} is not a multiple of --micro-batch-size {} × "
                            "the data-parallel degree {}",
                            j.global_batch, j.micro_batch, c.mesh.dp));

  // The stack: Megatron-LM's (its defaults are the megatron stack's), with TE's userbuffers
  // overlap when asked for (Megatron asserts sequence parallelism for it, arguments.py) and the
  // fused cross entropy when asked for.
  out.stack.name = "megatron";
  if (has(line, "--tp-comm-overlap")) {
    if (!c.sp)
      throw Error("", where,
                  "--tp-comm-overlap needs --sequence-parallel (Megatron-LM asserts it)");
    out.stack.tp_overlap = true;
  }
  out.stack.fused_loss = has(line, "--cross-entropy-loss-fusion");
  // FP8 parameters, gathered in FP8 by the distributed optimizer (Stack::fp8_params).
  if (has(line, "--fp8-param-gather")) {
    if (j.dtype != DType::fp8)
      throw Error("", where,
                  "--fp8-param-gather needs --fp8-format (FP8 parameters are an FP8 recipe's)");
    out.stack.fp8_params = true;
  }
  // DeepEP: --moe-enable-deepep (Megatron-Core 0.12–0.14) or, later,
  // --moe-flex-dispatcher-backend deepep; either with --moe-token-dispatcher-type flex.
  const auto backend = line.flags.find("--moe-flex-dispatcher-backend");
  out.stack.deepep = has(line, "--moe-enable-deepep") ||
                     (backend != line.flags.end() && backend->second == "deepep");
  // CP's K/V exchange (megatron_cp_comm_type; p2p when not given). TE's a2a and a2a+p2p
  // (Ulysses' all-to-all over heads) are not modelled.
  const auto cp_comm = line.flags.find("--cp-comm-type");
  const std::string cp_type = cp_comm == line.flags.end() ? "p2p" : cp_comm->second;
  for (const auto comm : kAllCpComm)
    if (megatron_cp_comm_type(comm) == cp_type) out.stack.cp_comm = comm;
  if (!out.stack.cp_comm)
    throw Error("", where,
                "--cp-comm-type '" + cp_type +
                    (cp_type == "a2a" || cp_type == "a2a+p2p"
                         ? "': the all-to-all CP exchange is not modelled (p2p or all_gather are)"
                         : "': expected p2p, all_gather, a2a or a2a+p2p"));
  return out;
}

std::optional<std::string> megatron_architecture_mismatch(const MegatronLine& line,
                                                          const ModelSpec& m) {
  if (!m.has_architecture()) return std::nullopt;
  auto differs = [&](std::string_view flag, std::int64_t expected) -> std::optional<std::string> {
    const auto it = line.flags.find(flag);
    if (it == line.flags.end() || it->second == std::to_string(expected)) return std::nullopt;
    return fmt::format("{} {}, but the model {} has {}", flag, it->second, m.name, expected);
  };
  const std::pair<std::string_view, std::int64_t> ints[] = {
      {"--num-layers", m.layers},
      {"--hidden-size", m.hidden},
      {"--ffn-hidden-size", m.ffn},
      {"--num-attention-heads", m.heads},
      {"--num-query-groups", m.kv_heads},
      {"--kv-channels", m.head_dim},
      {"--vocab-size", m.vocab},
      {"--num-experts", m.moe ? m.moe->experts : 0},
      {"--moe-router-topk", m.moe ? m.moe->top_k : 0},
      {"--moe-ffn-hidden-size", m.moe ? m.moe->expert_ffn : 0},
      {"--moe-router-num-groups", m.moe ? m.moe->groups : 0},
      {"--moe-router-group-topk", m.moe ? m.moe->group_limit : 0},
      {"--kv-lora-rank", m.mla ? m.mla->kv_lora_rank : 0},
      {"--q-lora-rank", m.mla ? m.mla->q_lora_rank : 0},
  };
  for (const auto& [flag, expected] : ints)
    if (auto d = differs(flag, expected)) return d;
  bool any = false;
  for (const auto& [flag, expected] : ints) any = any || has(line, flag);
  if (!any) return std::nullopt;
  // Megatron-LM's MLP: --swiglu, --squared-relu, or GELU without either.
  const Activation line_act = has(line, "--swiglu")         ? Activation::swiglu
                              : has(line, "--squared-relu") ? Activation::relu2
                                                            : Activation::gelu;
  if (line_act != m.activation)
    return fmt::format("the line's MLP is {} ({}), but the model {} uses {}", name_of(line_act),
                       line_act == Activation::swiglu  ? "--swiglu"
                       : line_act == Activation::relu2 ? "--squared-relu"
                                                       : "neither --swiglu nor --squared-relu",
                       m.name, name_of(m.activation));
  if (has(line, "--untie-embeddings-and-output-weights") == m.tied_embeddings)
    return fmt::format("the line's embeddings are {}, but the model {}'s are {}",
                       m.tied_embeddings ? "untied" : "tied", m.name,
                       m.tied_embeddings ? "tied" : "untied");
  if (const auto norm = line.flags.find("--normalization"); norm != line.flags.end()) {
    const bool rms = norm->second == "RMSNorm";
    if (rms != (m.norm == Norm::rmsnorm))
      return fmt::format("--normalization {}, but the model {} uses {}", norm->second, m.name,
                         name_of(m.norm));
  }
  return std::nullopt;
}

}  // namespace meshsim
