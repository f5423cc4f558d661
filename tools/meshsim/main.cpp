// meshsim: a discrete-event cluster simulator for parallel LLM training and serving.
// Exit codes (DESIGN.md): 0 success, 2 bad input (one `error:` line), 1 internal failure;
// `train` exits 3 when the layout does not fit memory (a verdict, not an error).
#include "commands.hpp"

int main(int argc, char** argv) {
  return meshsim::cli::run_command(argc, argv);
}
