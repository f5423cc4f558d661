# The CLI and the benchmarks link gperftools' tcmalloc (Debian libgoogle-perftools-dev) when it is
# there and the build is not sanitized (ASan brings its own allocator). A search allocates and
# frees small vectors and strings by the million (trace ops, plans, routes): on the main job
# (tools/dev run) glibc's malloc/free were ~15 % of the CPU time and its heap trimming ~10 % of
# the run in system time (page faults); with tcmalloc the same search, byte-identical output,
# took 31 instead of 39 CPU-s (two cores, issue 17). Without it the build still works, slower.
set(MESHSIM_TCMALLOC AUTO CACHE STRING "Link tcmalloc_minimal into the CLI and benchmarks: ON, OFF, or AUTO")
set(MESHSIM_ALLOCATOR_LIB "")
if(NOT MESHSIM_TCMALLOC STREQUAL "OFF" AND NOT MESHSIM_SANITIZE)
  find_library(MESHSIM_TCMALLOC_LIBRARY NAMES tcmalloc_minimal)
  if(MESHSIM_TCMALLOC_LIBRARY)
    set(MESHSIM_ALLOCATOR_LIB ${MESHSIM_TCMALLOC_LIBRARY})
  elseif(MESHSIM_TCMALLOC STREQUAL "ON")
    message(FATAL_ERROR "MESHSIM_TCMALLOC=ON needs libtcmalloc_minimal (Debian: libgoogle-perftools-dev)")
  else()
    message(STATUS "meshsim: tcmalloc not found; the CLI uses glibc malloc (slower searches)")
  endif()
endif()

# Links the allocator into an executable (never into a library: a Python extension must not
# bring its own malloc).
function(meshsim_use_allocator target)
  if(MESHSIM_ALLOCATOR_LIB)
    target_link_libraries(${target} PRIVATE ${MESHSIM_ALLOCATOR_LIB})
  endif()
endfunction()
