# Precompiled headers (issue 18, CI within 20 minutes): the header-only libraries nearly every
# translation unit parses — nlohmann/json and fmt everywhere, CLI11 in the CLI, doctest in the
# tests — and the standard headers most files include are parsed once per target instead of once
# per file. `-DMESHSIM_PCH=OFF` builds without them (a file that forgets an include fails there).
option(MESHSIM_PCH "Precompile the common headers" ON)
set(MESHSIM_PCH_HEADERS
    <algorithm> <cmath> <cstdint> <filesystem> <fstream> <functional> <map> <memory> <optional>
    <set> <sstream> <string> <string_view> <vector> <fmt/format.h> <nlohmann/json.hpp>
    # Through topology/topology.hpp nearly every file parses Boost.Graph's adjacency_list too:
    # precompiled, a library file compiles in ~1.4 s less (link_usage.cpp 2.2 -> 0.8 s).
    <boost/graph/adjacency_list.hpp>)

# meshsim_pch(TARGET [EXTRA HEADERS...])
function(meshsim_pch target)
  if(MESHSIM_PCH)
    target_precompile_headers(${target} PRIVATE ${MESHSIM_PCH_HEADERS} ${ARGN})
  endif()
endfunction()

# meshsim_pch_reuse(TARGET FROM): TARGET compiles with FROM's precompiled header (same flags).
function(meshsim_pch_reuse target from)
  if(MESHSIM_PCH)
    target_precompile_headers(${target} REUSE_FROM ${from})
  endif()
endfunction()
