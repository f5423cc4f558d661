// Fuzzes the stack-delta case reader (validation/stack_deltas.json, `validate --cases DIR`): a
// file is read whole and strictly before any case runs, so anything it accepts has parsed every
// case's job, both stacks and their recompute policies.
#include <unistd.h>

#include <fstream>

#include "fuzz_common.hpp"
#include "training/training_validation.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // The reader takes a path: the input goes to a file of this process's own.
  static const std::string path = "/tmp/meshsim-fuzz-validation-" + std::to_string(::getpid());
  return meshsim::fuzz::run(data, size, [](const std::string& text) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
    const auto n = meshsim::read_stack_delta_file(path);
    if (n > 1'000'000) __builtin_trap();  // more cases than the input has bytes
  });
}
