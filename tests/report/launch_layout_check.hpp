#pragma once
// A launch configuration read back must give the layout and job it was written from.
#include <doctest/doctest.h>

#include "report/launch_config.hpp"

namespace meshsim::test {

inline void check_same_layout(const LaunchLayout& back, const ParallelConfig& c,
                              const LaunchJob& job) {
  CHECK(back.config.mesh == c.mesh);
  CHECK(back.config.zero == c.zero);
  CHECK(back.config.reshard_after_forward == c.reshard_after_forward);
  CHECK(back.config.sp == c.sp);
  CHECK(back.config.recompute == c.recompute);
  CHECK(back.config.recompute_every == c.recompute_every);
  CHECK(back.config.recompute_block == c.recompute_block);
  CHECK(back.config.recompute_group == c.recompute_group);
  CHECK(back.config.schedule.kind == c.schedule.kind);
  CHECK(back.config.schedule.virtual_stages == c.schedule.virtual_stages);
  CHECK(back.config.schedule.overlap == c.schedule.overlap);
  CHECK(back.config.schedule.group == c.schedule.group);
  CHECK(back.job.seq == job.seq);
  CHECK(back.job.global_batch == job.global_batch);
  CHECK(back.job.micro_batch == job.micro_batch);
  CHECK(back.job.dtype == job.dtype);
  CHECK(back.job.pipeline_steps == job.pipeline_steps);
}

}  // namespace meshsim::test
