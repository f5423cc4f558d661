#pragma once
// Chrome trace event format (also what ui.perfetto.dev opens): a process per rank, a thread per
// stream, one complete event per op with its group and bytes in args.
#include <ostream>

#include "engine/replay.hpp"
#include "strategy/trace.hpp"

namespace meshsim {

void write_chrome_trace(const Trace& trace, const ReplayResult& replay, std::ostream& out);

}  // namespace meshsim
