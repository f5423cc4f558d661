#include "model/workload.hpp"

#include <filesystem>

#include "core/enum_names.hpp"
#include "core/json_reader.hpp"
#include "model/model_loader.hpp"

namespace meshsim {
namespace {

std::int64_t job_count(const JsonRef& ref) {
  const auto v = ref.positive_integer();
  if (v > (std::int64_t{1} << 30)) ref.fail("is implausibly large");
  return v;
}

}  // namespace

Workload load_workload(const std::string& path) {
  const Json doc = load_json_file(path);
  return read_workload(JsonRef::root(doc, path));
}

Workload read_workload(const JsonRef& root) {
  const Json& doc = root.raw();
  const std::string& path = root.file();
  Workload w;
  w.file = path;
  if (!doc.is_object() || !doc.contains("model")) {
    w.model = read_model(root);
    w.name = w.model.name;
    return w;
  }
  ObjectReader r(root);
  const auto model = r.required("model");
  if (model.raw().is_string()) {
    const auto rel = std::filesystem::path(model.string());
    const auto resolved =
        (rel.is_absolute() ? rel : std::filesystem::path(path).parent_path() / rel)
            .lexically_normal();
    // A reference to nothing is this file's error (its field names it); a model file that is
    // there but wrong reports its own file and path.
    if (!std::filesystem::is_regular_file(resolved))
      model.fail("no model file at '" + resolved.string() +
                 "' (the path is relative to this job file)");
    w.model = load_model(resolved.string());
  } else {
    w.model = read_model(model);
  }
  w.name = std::filesystem::path(path).stem().string();
  if (auto n = r.optional("name")) w.name = n->string();
  if (auto s = r.optional("source")) (void)s->string();
  if (auto v = r.optional("seq")) w.job.seq = job_count(*v);
  if (auto v = r.optional("global_batch")) w.job.global_batch = job_count(*v);
  if (auto v = r.optional("micro_batch")) w.job.micro_batch = job_count(*v);
  if (auto v = r.optional("dtype")) {
    const auto s = v->string();
    w.job.dtype = parse_dtype(s);
    if (!w.job.dtype)
      v->fail("unknown dtype '" + s + "' (known: " + joined_names(kAllDTypes) + ")");
  }
  r.finish();
  return w;
}

}  // namespace meshsim
