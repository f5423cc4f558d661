#include "report/html_report.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli_runner.hpp"

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
  r.ranked = {c, c};
  const auto html = render_html(r);
  CHECK(html.starts_with("<!DOCTYPE html>"));
  CHECK(html.find("t &lt;&amp;&gt; &quot;x&quot;") != std::string::npos);
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("http://") == html.find("http://www.w3.org"));  // no external resources
  CHECK(count(html, "<svg") == 2);
  // Two candidates × (compute, tp, bubble) segments; the zero dp segment is not drawn.
  CHECK(count(html, "class=\"seg\"") == 2 * 3 + 2 * 2);
  CHECK(html.find("H100 80.0 GB") != std::string::npos);  // the capacity line's label
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
  CHECK(count(dom, "<svg") == 3);
  CHECK(count(dom, "class=\"seg\"") >= 12);
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
  std::filesystem::remove(html);
}
