// Fuzzes the serving-engine loader (workloads/engines/*.json): anything it accepts must give a
// scheduler the simulator can run (positive limits, a KV fraction in (0, 1], increasing graph
// sizes, no watermark with reserve admission, a ratio estimate in (0, 1] with min <= init).
#include "fuzz_common.hpp"
#include "serving/engine.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return meshsim::fuzz::run(data, size, [](const std::string& text) {
    const auto doc = meshsim::fuzz::parse(text);
    const auto e = meshsim::read_engine(meshsim::JsonRef::root(doc, "fuzz.json"));
    const auto& s = e.scheduler;
    if (s.max_seqs < 1 || s.max_batch_tokens < 1 || s.block_size < 1) __builtin_trap();
    if (!(s.gpu_memory_utilization > 0) || s.gpu_memory_utilization > 1) __builtin_trap();
    if (!(s.watermark >= 0) || s.watermark >= 1) __builtin_trap();
    if (s.admission == meshsim::Admission::reserve && s.watermark != 0) __builtin_trap();
    for (std::int64_t tp = 1; tp <= 64; tp *= 2)
      if (!(s.memory_fraction(tp) > 0) || s.memory_fraction(tp) > 1) __builtin_trap();
    if (!(s.ratio.min > 0) || s.ratio.min > s.ratio.init || s.ratio.init > 1) __builtin_trap();
    if (s.ratio.decay_steps < 1 || s.ratio.clip_tokens < 1 || s.ratio.retract_steps < 0)
      __builtin_trap();
    for (std::size_t i = 1; i < s.cuda_graph_sizes.size(); ++i)
      if (s.cuda_graph_sizes[i] <= s.cuda_graph_sizes[i - 1]) __builtin_trap();
  });
}
