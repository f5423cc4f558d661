#include "network/nccl_tests_log.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "test_paths.hpp"

using namespace meshsim;

TEST_CASE("an nccl-tests log reads as collective timings") {
  const auto log = read_nccl_tests_log(
      meshsim::test::source_path("tools/calibrate/examples/dgx-h100-all_reduce_perf.log"));
  CHECK(log.op == CollectiveOp::all_reduce);
  CHECK(log.ranks == 8);
  CHECK(log.nodes == 1);
  CHECK(log.gpu == "NVIDIA H100 80GB HBM3");
  REQUIRE(log.rows.size() == 13);
  CHECK(log.rows.front().bytes == 8);
  CHECK(log.rows.front().time_us == doctest::Approx(13.67));
  CHECK(log.rows[12].bytes == 17179869184.0);
  CHECK(log.rows[12].time_us == doctest::Approx(62648));
  CHECK(log.rows[12].busbw_GBps == doctest::Approx(479.9).epsilon(0.001));
}

TEST_CASE("nccl-tests logs that cannot be read say why") {
  const auto dir = std::filesystem::temp_directory_path();
  const auto write = [&](const std::string& name, const std::string& text) {
    const auto p = (dir / name).string();
    std::ofstream(p) << text;
    return p;
  };
  const auto no_rows = write("ms_nt1.log", "# nThread 1 nGpus 8\n# nothing\n");
  CHECK_THROWS_WITH_AS(read_nccl_tests_log(no_rows), doctest::Contains("no result rows"), Error);
  const auto no_op = write("ms_nt2.log",
                           "# nThread 1 nGpus 2\n 1024 256 float sum -1 10.0 0.10 0.10 0 10.0 "
                           "0.10 0.10 0\n");
  CHECK_THROWS_WITH_AS(read_nccl_tests_log(no_op), doctest::Contains("--nccl-op"), Error);
  const auto ok = read_nccl_tests_log(no_op, "all_gather");
  CHECK(ok.op == CollectiveOp::all_gather);
  CHECK(ok.ranks == 2);
  const auto short_row = write("ms_nt3.log", "# nGpus 2\n 1024 256 float sum 10.0\n");
  CHECK_THROWS_WITH_AS(read_nccl_tests_log(short_row, "all_reduce"), doctest::Contains("line 2"),
                       Error);
  CHECK_THROWS_AS(read_nccl_tests_log((dir / "ms_missing.log").string()), Error);
  // Range checks before fitting (issue 19: a row of 1e23 bytes was fitted).
  const auto huge = write("ms_nt4.log",
                          "# nGpus 2\n 100000000000000000000000 256 float sum -1 10.0 0.10 0.10 0 "
                          "10.0 0.10 0.10 0\n");
  CHECK_THROWS_WITH_AS(read_nccl_tests_log(huge, "all_reduce"),
                       (huge + ":line 2: size '100000000000000000000000' is not a byte count "
                               "from 0 to 2^44 (16 TiB)")
                           .c_str(),
                       Error);
  const auto fast =
      write("ms_nt5.log", "# nGpus 2\n 1024 256 float sum -1 10.0 1e9 0.10 0 10.0 0.10 0.10 0\n");
  CHECK_THROWS_WITH_AS(read_nccl_tests_log(fast, "all_reduce"),
                       doctest::Contains("algbw 1e9 and busbw 0.10 GB/s must lie from 0 to 1e+06"),
                       Error);
}
