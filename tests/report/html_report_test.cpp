#include "report/html_report.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_runner.hpp"
#include "report/chart_check.hpp"
#include "report/svg_chart.hpp"

using namespace meshsim;
using meshsim::test::run_cli;
using meshsim::test::source_path;
using meshsim::test::topology_path;

namespace {

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string shell(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *status = ::pclose(p);
  return out;
}

}  // namespace

TEST_CASE("the report is self-contained HTML with one bar segment per component") {
  HtmlReport r;
  r.title = "t <&> \"x\"";
  r.command = "meshsim search --x";
  r.gpu = "H100";
  r.gpu_bytes = 80e9;
  ReportCandidate c;
  c.label = "tp=8";
  c.step_s = 2;
  c.compute_s = 1.5;
  c.bubble_s = 0.25;
  c.exposed_s = {{"tp", 0.25}, {"dp", 0.0}};
  c.memory.weights = 10e9;
  c.memory.activations = 20e9;
  auto slower = c;
  slower.label = "tp=4";
  slower.step_s = 2.5;
  slower.compute_s = 2;
  r.ranked = {c, slower};
  const auto html = render_html(r);
  CHECK(html.starts_with("<!DOCTYPE html>"));
  CHECK(html.find("t &lt;&amp;&gt; &quot;x&quot;") != std::string::npos);
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("http://") == html.find("http://www.w3.org"));  // no external resources
  // Where the step goes, what separates the rows, memory.
  CHECK(count(html, "<svg") == 3);
  // Two rows × (compute, tp, bubble), then × (tp, bubble), then × (weights, activations); the
  // zero dp segment is not drawn.
  CHECK(count(html, "class=\"seg\"") == 2 * 3 + 2 * 2 + 2 * 2);
  CHECK(html.find("H100 80.0 GB") != std::string::npos);  // the capacity line's label
  CHECK(html.find("<h2>Headline</h2>") != std::string::npos);
  CHECK(html.find("fits: 30.0 of 80.0 GB") != std::string::npos);
  for (const auto& problem : meshsim::test::chart_problems(html)) FAIL_CHECK(problem);
}

TEST_CASE("chart ticks: 1, 2 or 5 × 10^k from 0 to the first multiple at or above the maximum") {
  // 0.87 / 5 = 0.174 → 0.2; 5 steps reach 1.0.
  const auto a = nice_ticks(0.87);
  CHECK(a.step == doctest::Approx(0.2));
  CHECK(a.top == doctest::Approx(1.0));
  CHECK(a.values.size() == 6);
  CHECK(tick_label(a.values[2], a.step) == "0.4");
  // 12.3 / 5 = 2.46 → 5; 15 is the first multiple above.
  const auto b = nice_ticks(12.3);
  CHECK(b.step == 5);
  CHECK(b.top == 15);
  CHECK(tick_label(15, 5) == "15");
  // A maximum on a tick is the top: 100 / 5 = 20.
  CHECK(nice_ticks(100).top == 100);
  CHECK(nice_ticks(100).values.size() == 6);
  // Nothing to show still gives an axis.
  CHECK(nice_ticks(0).top == 1);
  CHECK(std::string(time_unit(2.5).name) == "s");
  CHECK(std::string(time_unit(0.05).name) == "ms");
  CHECK(time_unit(2e-5).per_second == 1e6);
}

TEST_CASE("an SLO or capacity line past the data extends the axis and its label stays inside") {
  XYChart c;
  c.series.push_back({"TTFT", "#000", {{0.1, 0.5}, {0.3, 1.0}}, false, {}});
  c.x_title = "TTFT (s)";
  c.y_title = "fraction";
  c.y_max = 1.0;
  c.x_markers.emplace_back(2.0, "SLO 2 s");
  const auto svg = xy_chart(c);
  CHECK(count(svg, "class=\"marker\"") == 1);
  // The x axis reaches the marker: ticks 0, 0.5, …, 2.
  CHECK(svg.find(">2.0</text>") != std::string::npos);
  CHECK(meshsim::test::chart_problems(svg).empty());
  BarChart bars{{"weights"},   {{"#1 tp=8", "", {{"weights", 70.0}}}},
                "memory (GB)", "layout",
                80.0,          "H100 80.0 GB of HBM3",
                "GB"};
  CHECK(meshsim::test::chart_problems(bar_chart(bars)).empty());
}

TEST_CASE("search report helpers: equivalent shapes, the Pareto front, why the winner wins") {
  auto cand = [](std::string label, double step, double mem_gb, double compute, double tp) {
    ReportCandidate c;
    c.label = std::move(label);
    c.step_s = step;
    c.compute_s = compute;
    c.exposed_s = {{"tp", tp}, {"dp", step - compute - tp}};
    c.memory.weights = mem_gb * 1e9;
    return c;
  };
  const std::vector<ReportCandidate> ranked{
      cand("a", 1.0, 70, 0.9, 0.05), cand("a'", 1.0, 70, 0.9, 0.05), cand("b", 1.2, 40, 0.9, 0.2),
      cand("c", 1.3, 50, 1.0, 0.1), cand("d", 1.5, 30, 1.0, 0.1)};
  const auto groups = group_equivalent(ranked);
  REQUIRE(groups.size() == 4);
  CHECK(groups[0].members == std::vector<std::size_t>{0, 1});
  CHECK(groups[1].members == std::vector<std::size_t>{2});
  // c is beaten by b on both axes; a' repeats a point already on the front; d has the least
  // memory.
  CHECK(pareto_front(ranked) == std::vector<std::size_t>{0, 2, 4});
  // a against b: 0.2 s faster; exposed TP 0.05 against 0.2, exposed DP 1.0 − 0.9 − 0.05 = 0.05
  // against 1.2 − 0.9 − 0.2 = 0.1; the same compute.
  CHECK(why_winner(ranked[0], ranked[2], 3) ==
        "0.200 s faster than #3 (b): 0.150 s less exposed tp communication, 0.050 s less "
        "exposed dp communication");
}

TEST_CASE("search report helpers: the best per TP degree, exact or at least") {
  auto cand = [](std::string label, std::int64_t tp, double step, double exposed_tp) {
    ReportCandidate c;
    c.label = std::move(label);
    c.tp = tp;
    c.step_s = step;
    c.exposed_s = {{"tp", exposed_tp}};
    return c;
  };
  const std::vector<ReportCandidate> ranked{cand("a", 4, 1.0, 0.1), cand("b", 8, 1.1, 0.3),
                                            cand("c", 4, 1.2, 0.1), cand("d", 2, 1.6, 0.05)};
  // TP 2's best is beyond reach (at least 1.4 s; 1.6 s simulated), TP 1 has no layout ranked.
  const std::map<std::int64_t, double> at_least{{1, 1.5}, {2, 1.4}};
  CHECK(best_per_tp(ranked, at_least) ==
        std::map<std::int64_t, std::size_t>{{1, kNoLayout}, {2, 3}, {4, 0}, {8, 1}});
  CHECK(best_per_tp_line(ranked, at_least) ==
        "tp=1 at least 1.500 s (none simulated), tp=2 at least 1.400 s (best simulated 1.600 s), "
        "tp=4 1.000 s (exposed tp 0.100 s), tp=8 1.100 s (exposed tp 0.300 s); \"at least\": its "
        "best is beyond reach of the K-th best, so not every layout of that degree was simulated "
        "(--exhaustive finds it)");
  CHECK(best_per_tp_line(ranked, {}) ==
        "tp=2 1.600 s (exposed tp 0.050 s), tp=4 1.000 s (exposed tp 0.100 s), tp=8 1.100 s "
        "(exposed tp 0.300 s)");
}

TEST_CASE("report in a headless browser: SVG charts render and the page is not blank") {
  int status = -1;
  const auto which = shell("command -v chromium || command -v chromium-browser", &status);
  REQUIRE_MESSAGE(status == 0, "chromium is needed for this test (tools/dev test installs it)");
  std::string browser = which.substr(0, which.find('\n'));
  const auto dir = std::filesystem::temp_directory_path() / "meshsim_report_test";
  std::filesystem::create_directories(dir);
  const auto html = (dir / "report.html").string();
  const auto r = run_cli("search --topology " + topology_path("pcie-8gpu.json") + " --workload " +
                         source_path("workloads/models/llama3.1-8b.json") +
                         " --seq 4096 --gbs 32 --top 6 --report " + html);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const std::string flags =
      " --headless --no-sandbox --disable-gpu --hide-scrollbars "
      "--user-data-dir=" +
      (dir / "profile").string() + " --window-size=1100,1600 ";
  // The DOM the browser built: the three charts and their bars are there.
  const auto dom = shell(browser + flags + "--dump-dom file://" + html + " 2>/dev/null", &status);
  CHECK(status == 0);
  // Where the step goes, what separates the rows, memory, every layout, the timeline.
  CHECK(count(dom, "<svg") == 5);
  CHECK(count(dom, "class=\"seg\"") >= 12);
  CHECK(count(dom, "class=\"dot\"") >= 6);
  for (const auto& problem : meshsim::test::chart_problems(dom)) FAIL_CHECK(problem);
  for (const auto& section : {"Why #1 wins", "Ranked layouts", "Best per TP degree",
                              "rejected because", "Seed heuristic", "Assumptions"})
    CHECK_MESSAGE(dom.find(section) != std::string::npos, section);
  CHECK(count(dom, "class=\"op\"") > 100);
  CHECK(dom.find("Where the step goes") != std::string::npos);
  // Screenshots: the report against an empty page of the same size; a blank render compresses to
  // almost nothing, the charts do not.
  const auto shot = (dir / "report.png").string(), empty = (dir / "empty.png").string();
  const auto blank = (dir / "blank.html").string();
  std::ofstream(blank) << "<!DOCTYPE html><html><body></body></html>";
  shell(browser + flags + "--screenshot=" + shot + " file://" + html + " 2>/dev/null", &status);
  shell(browser + flags + "--screenshot=" + empty + " file://" + blank + " 2>/dev/null", &status);
  const auto png = read(shot), none = read(empty);
  REQUIRE(png.size() > 8);
  CHECK(png.substr(1, 3) == "PNG");
  CHECK(png.size() > 5 * none.size());
  std::filesystem::remove_all(dir);
}

TEST_CASE("train writes a report too") {
  const auto html = (std::filesystem::temp_directory_path() / "meshsim_train_report.html").string();
  const auto r = run_cli("train --topology " + topology_path("dgx-h100.json") + " --workload " +
                         source_path("workloads/models/llama3.1-8b.json") +
                         " --mesh tp=2,pp=2,dp=2 --seq 2048 --gbs 8 --report " + html);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const auto text = read(html);
  CHECK(count(text, "<svg") == 3);
  CHECK(text.find("meshsim train --topology") != std::string::npos);
  for (const auto& row :
       {"step time", "tokens/s", "MFU", "exposed tp communication", "pipeline bubble", "fits: "})
    CHECK_MESSAGE(text.find(row) != std::string::npos, row);
  for (const auto& problem : meshsim::test::chart_problems(text)) FAIL_CHECK(problem);
  // torchtitan's eager kernels beside FSDP's NVLink collectives: the headline says what the
  // interference cost, as train --json does.
  const auto tt = run_cli("train --topology " + topology_path("dgx-h100.json") + " --workload " +
                          source_path("workloads/models/llama3.1-8b.json") +
                          " --mesh dp=8 --zero 3 --seq 4096 --gbs 8 --stack torchtitan --report " +
                          html + " --json");
  REQUIRE_MESSAGE(tt.exit_code == 0, tt.err);
  const auto j = nlohmann::json::parse(tt.out);
  const auto page = read(html);
  CHECK(page.find(fmt::format("of it, slowed by collectives beside it</th><td>{:.4g} s",
                              j["interference_s"].get<double>())) != std::string::npos);
  CHECK(page.find(
            fmt::format("collective time lost to HBM sharing and waiting for SMs</th><td>{:.4g} s",
                        j["comm_interference_s"].get<double>())) != std::string::npos);
  CHECK(page.find("waiting for the host") == std::string::npos);  // no host time measured
  // A profile that measured 20 µs of host time a launch: torchtitan's eager kernels on TP 8 at
  // 1,024 tokens wait for their launches, and the headline says how long.
  const auto profile =
      (std::filesystem::temp_directory_path() / "meshsim_host_profile.json").string();
  std::ofstream(profile)
      << R"({"gpu": "H100-SXM5-80GB", "source": "test", "host_per_kernel_us": 20})";
  const auto host = run_cli("train --topology " + topology_path("dgx-h100.json") + " --workload " +
                            source_path("workloads/models/llama3.1-8b.json") +
                            " --mesh tp=8 --seq 1024 --gbs 8 --stack torchtitan --calibration " +
                            profile + " --report " + html + " --json");
  REQUIRE_MESSAGE(host.exit_code == 0, host.err);
  const double wait = nlohmann::json::parse(host.out)["host_wait_s"].get<double>();
  CHECK(wait > 0.1);
  CHECK(read(html).find(fmt::format("GPU waiting for the host's launches</th><td>{:.4g} s",
                                    wait)) != std::string::npos);
  for (const auto& problem : meshsim::test::chart_problems(read(html))) FAIL_CHECK(problem);
  std::filesystem::remove(profile);
  std::filesystem::remove(html);
}
