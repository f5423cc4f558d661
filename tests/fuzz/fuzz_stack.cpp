// Fuzzes the software-stack loader (workloads/stacks/*.json): anything it accepts must price an
// eager op and give finite gradient and bucket sizes.
#include "fuzz_common.hpp"
#include "stack/stack.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return meshsim::fuzz::run(data, size, [](const std::string& text) {
    const auto doc = meshsim::fuzz::parse(text);
    const auto s = meshsim::read_stack(meshsim::JsonRef::root(doc, "fuzz.json"));
    for (auto t : meshsim::kAllDTypes)
      if (!(s.grad_reduce_bytes(t) > 0)) __builtin_trap();
    if (!s.policy(s.default_recompute)) __builtin_trap();  // the loader checked it
    for (const auto& [name, k] : s.op_kernels)
      if (k.forward_kernels < 1 || !(k.forward_bytes_factor > 0)) __builtin_trap();
  });
}
