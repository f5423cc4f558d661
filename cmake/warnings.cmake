# Warnings as an interface target: every meshsim target links meshsim_warnings.
add_library(meshsim_warnings INTERFACE)
target_compile_options(meshsim_warnings INTERFACE -Wall -Wextra -Wpedantic -Wshadow -Wconversion
                                                  -Wno-sign-conversion)
if(MESHSIM_WERROR)
  target_compile_options(meshsim_warnings INTERFACE -Werror)
endif()
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  # GCC 12 reports false -Wrestrict positives inside std::string concatenation at -O3
  # (GCC bug 105329); the code involved is the standard library's.
  target_compile_options(meshsim_warnings INTERFACE -Wno-restrict)
endif()
