#include "embedding.hpp"

#include <iostream>

namespace meshsim::cli {
namespace {
thread_local std::ostream* t_out = nullptr;
thread_local std::ostream* t_err = nullptr;
thread_local const LoadedCluster* t_cluster = nullptr;
}  // namespace

std::ostream& cli_out() {
  return t_out ? *t_out : std::cout;
}
std::ostream& cli_err() {
  return t_err ? *t_err : std::cerr;
}

EmbeddedRun::EmbeddedRun(std::ostream& o, std::ostream& e, const LoadedCluster* cluster)
    : out_(t_out), err_(t_err), cluster_(t_cluster) {
  t_out = &o;
  t_err = &e;
  t_cluster = cluster;
}

EmbeddedRun::~EmbeddedRun() {
  t_out = out_;
  t_err = err_;
  t_cluster = cluster_;
}

const LoadedCluster* lent_cluster(const std::string& topology, std::int32_t nodes) {
  if (t_cluster == nullptr || t_cluster->topology != topology || t_cluster->nodes != nodes)
    return nullptr;
  return t_cluster;
}

}  // namespace meshsim::cli
