// Fuzzes the calibration readers: profiles (with link fits) and raw harness output through
// `calibrate fit`.
#include "compute/calibration_fit.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return meshsim::fuzz::run(data, size, [](const std::string& text) {
    const auto doc = meshsim::fuzz::parse(text);
    const auto root = meshsim::JsonRef::root(doc, "fuzz.json");
    if (doc.is_object() && doc.contains("harness")) {
      meshsim::FitOptions opt;
      opt.gpu = "H100-SXM5-80GB";
      const auto fit = meshsim::fit_calibration(root, opt);
      (void)meshsim::to_json(fit.profile);
    } else {
      const auto p = meshsim::read_calibration_profile(root);
      (void)meshsim::to_json(p);
    }
  });
}
