#include "model/model_registry.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "model/model_loader.hpp"

namespace meshsim {
namespace {

namespace fs = std::filesystem;

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

struct Known {
  std::string name, id;  // bundled stem and Hugging Face id (may be empty)
  const BundledModel* entry;
  Json doc;  // its config, parsed once
};

std::vector<Known> known_models() {
  std::vector<Known> out;
  for (const auto& e : bundled_models()) {
    Json doc = parse_json_text(e.text, e.file);
    std::string id;
    if (doc.is_object() && doc.contains("_name_or_path") && doc["_name_or_path"].is_string())
      id = doc["_name_or_path"].get<std::string>();
    out.push_back({fs::path(e.file).stem().string(), id, &e, std::move(doc)});
  }
  return out;
}

Workload from_bundled(const Known& k) {
  Workload w;
  w.file = k.entry->file;
  w.model = read_model(JsonRef::root(k.doc, w.file));
  w.name = w.model.name;
  return w;
}

// huggingface_hub's layout: models--ORG--NAME/{refs/main, snapshots/<commit>/config.json}.
std::string cached_config(const std::string& id, const std::string& hub_cache) {
  if (hub_cache.empty() || id.find('/') == std::string::npos) return "";
  std::string dir_name = "models--" + id;
  for (std::size_t p = 0; (p = dir_name.find('/', p)) != std::string::npos; p += 2)
    dir_name.replace(p, 1, "--");
  const fs::path repo = fs::path(hub_cache) / dir_name;
  std::error_code ec;
  if (!fs::is_directory(repo, ec)) return "";
  std::ifstream ref(repo / "refs" / "main");
  std::string commit;
  if (ref && std::getline(ref, commit) && !commit.empty()) {
    const auto config = repo / "snapshots" / commit / "config.json";
    if (fs::is_regular_file(config, ec)) return config.string();
  }
  // No refs/main: the one snapshot with a config (several without a ref are ambiguous).
  std::vector<fs::path> found;
  for (const auto& s : fs::directory_iterator(repo / "snapshots", ec))
    if (fs::is_regular_file(s.path() / "config.json", ec))
      found.push_back(s.path() / "config.json");
  if (found.size() == 1) return found.front().string();
  if (found.size() > 1)
    throw Error(id, "",
                "the Hugging Face cache " + repo.string() + " holds " +
                    std::to_string(found.size()) +
                    " snapshots and no refs/main: give the config.json path");
  return "";
}

}  // namespace

std::string hf_hub_cache_dir() {
  if (const char* c = std::getenv("HF_HUB_CACHE"); c && *c) return c;
  if (const char* h = std::getenv("HF_HOME"); h && *h) return (fs::path(h) / "hub").string();
  if (const char* home = std::getenv("HOME"); home && *home)
    return (fs::path(home) / ".cache" / "huggingface" / "hub").string();
  return "";
}

Workload load_workload_or_model_id(const std::string& arg, const std::string& hub_cache) {
  std::error_code ec;
  if (arg.empty() || fs::exists(arg, ec) || arg.ends_with(".json")) return load_workload(arg);
  const auto known = known_models();
  const auto key = lower(arg);
  for (const auto& k : known)
    if (lower(k.name) == key || (!k.id.empty() && lower(k.id) == key)) return from_bundled(k);
  if (const auto config = cached_config(arg, hub_cache); !config.empty()) {
    Workload w = load_workload(config);
    w.model.name = fs::path(arg).filename().string();
    if (w.model.hf_id.empty()) w.model.hf_id = arg;
    w.name = w.model.name;
    w.file = config;
    return w;
  }
  // The nearest bundled name or id, for a typo.
  std::string best;
  std::size_t best_d = std::string::npos;
  for (const auto& k : known)
    for (const auto* candidate : {&k.name, &k.id}) {
      if (candidate->empty()) continue;
      const auto d = edit_distance(key, lower(*candidate));
      if (d < best_d) {
        best_d = d;
        best = *candidate;
      }
    }
  std::string why = "not a file, a bundled model or a Hugging Face id in the local cache";
  if (!hub_cache.empty()) why += " (" + hub_cache + ")";
  if (!best.empty() && best_d <= std::max<std::size_t>(3, key.size() / 3))
    why += "; did you mean '" + best + "'?";
  else
    why +=
        "; bundled: llama3.1-8b, llama3.1-70b, meta-llama/Llama-3.1-405B, ... (workloads/models/)";
  throw Error(arg, "", why);
}

}  // namespace meshsim
