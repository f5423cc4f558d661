// Fuzzes the software-stack loader (workloads/stacks/*.json): anything it accepts must price an
// eager op and give finite gradient and bucket sizes, and its pipeline switches valid splits.
#include <algorithm>
#include <numeric>

#include "fuzz_common.hpp"
#include "stack/stack.hpp"
#include "strategy/pipeline_split.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return meshsim::fuzz::run(data, size, [](const std::string& text) {
    const auto doc = meshsim::fuzz::parse(text);
    const auto s = meshsim::read_stack(meshsim::JsonRef::root(doc, "fuzz.json"));
    for (auto t : meshsim::kAllDTypes)
      if (!(s.grad_reduce_bytes(t) > 0)) __builtin_trap();
    if (!s.policy(s.default_recompute)) __builtin_trap();  // the loader checked it
    for (const auto& [name, k] : s.op_kernels)
      if (k.forward_kernels < 1 || !(k.forward_bytes_factor > 0)) __builtin_trap();
    // Every split the stack's pipeline switches give (search's tuned one among them) is one
    // positive count per chunk summing to the model's layers.
    meshsim::ModelSpec m;
    m.declared_params = 1e9;  // no architecture: a `parameters` split falls back to even
    for (const std::int64_t layers : {5, 32, 61})
      for (const std::int64_t pp : {2, 4})
        for (const std::int64_t v : {1, 2}) {
          m.layers = layers;
          if (pp * v > layers) continue;
          const auto valid = [&](const std::vector<std::int64_t>& c) {
            return static_cast<std::int64_t>(c.size()) == pp * v &&
                   std::all_of(c.begin(), c.end(), [](std::int64_t l) { return l >= 1; }) &&
                   std::accumulate(c.begin(), c.end(), std::int64_t{0}) == layers;
          };
          for (const auto& c : meshsim::end_switch_splits(s.pipeline_split, m, pp * v, v))
            if (!valid(c)) __builtin_trap();
          const auto tuned =
              meshsim::tuned_chunk_layers(s.pipeline_split, m, pp * v, v, 1.0, 0.5, 2.5);
          if (!tuned.empty() && !valid(tuned)) __builtin_trap();
          // A split moved for memory: stages holding at most `cap` layers each, the first fewer.
          for (const std::int64_t cap : {layers / pp + 1, layers / pp + 3, layers}) {
            const auto fits = [&](const std::vector<std::int64_t>& c) {
              std::vector<std::int64_t> stage(static_cast<std::size_t>(pp), 0);
              for (std::size_t i = 0; i < c.size(); ++i)
                stage[i % static_cast<std::size_t>(pp)] += c[i];
              std::vector<bool> fit;
              for (std::size_t i = 0; i < stage.size(); ++i)
                fit.push_back(stage[i] <= (i == 0 ? cap - 2 : cap));
              return fit;
            };
            const auto moved =
                meshsim::fitting_end_switch_split(s.pipeline_split, m, pp * v, v, fits);
            if (!moved.empty()) {
              const auto f = fits(moved);
              if (!valid(moved) || std::find(f.begin(), f.end(), false) != f.end())
                __builtin_trap();
            }
          }
        }
  });
}
