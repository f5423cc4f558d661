#include "parallel/mesh.hpp"

#include <charconv>
#include <set>

#include "core/error.hpp"

namespace meshsim {

Mesh parse_mesh(std::string_view text, const std::string& where, std::int64_t world) {
  Mesh m;
  std::set<std::string, std::less<>> seen;
  auto fail = [&](const std::string& why) -> Mesh {
    throw Error("", where, "'" + std::string(text) + "': " + why);
  };
  if (text.empty()) return fail("expected degrees like dp=64,tp=8");
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const auto comma = text.find(',', pos);
    const auto item = text.substr(pos, comma == std::string_view::npos ? text.npos : comma - pos);
    const auto eq = item.find('=');
    if (eq == std::string_view::npos)
      return fail("expected name=value, got '" + std::string(item) + "'");
    const auto name = item.substr(0, eq);
    const auto value = item.substr(eq + 1);
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (ec != std::errc() || end != value.data() + value.size() || v < 1 || v > (1 << 24))
      return fail("degree '" + std::string(value) + "' of " + std::string(name) +
                  " is not a positive integer");
    if (!seen.insert(std::string(name)).second) return fail(std::string(name) + " is given twice");
    if (name == "dp")
      m.dp = v;
    else if (name == "tp")
      m.tp = v;
    else if (name == "pp")
      m.pp = v;
    else if (name == "cp")
      m.cp = v;
    else if (name == "ep")
      m.ep = v;
    else if (name == "fsdp")
      m.fsdp = v;
    else
      return fail("unknown degree '" + std::string(name) + "' (known: dp, tp, pp, cp, ep, fsdp)");
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  if (!seen.contains("dp") && world > 0) {
    const std::int64_t rest = m.tp * m.pp * m.cp;
    if (world % rest != 0)
      return fail("dp is left out, and tp·pp·cp = " + std::to_string(rest) +
                  " does not divide the cluster's " + std::to_string(world) + " GPUs");
    m.dp = world / rest;
  }
  if (m.world() > (std::int64_t{1} << 24)) return fail("more than 16M ranks");
  if (m.fsdp > 0 && m.dp % m.fsdp != 0)
    return fail("fsdp=" + std::to_string(m.fsdp) + " must divide dp=" + std::to_string(m.dp) +
                " (dp is the whole data-parallel degree: dp=512,fsdp=128 shards over 128 ranks "
                "and replicates 4 times)");
  if (m.fsdp == m.dp) m.fsdp = 0;  // a shard group of all of DP is plain ZeRO/FSDP
  if ((m.dp * m.cp) % m.ep != 0)
    return fail("ep=" + std::to_string(m.ep) + " must divide dp·cp = " +
                std::to_string(m.dp * m.cp) + " (expert parallelism is folded into DP × CP)");
  return m;
}

std::string to_string(const Mesh& m) {
  return "dp=" + std::to_string(m.dp) + " tp=" + std::to_string(m.tp) +
         " pp=" + std::to_string(m.pp) + " cp=" + std::to_string(m.cp) +
         " ep=" + std::to_string(m.ep) + (m.fsdp > 0 ? " fsdp=" + std::to_string(m.fsdp) : "");
}

}  // namespace meshsim
