# Warnings as an interface target: every meshsim target links meshsim_warnings.
add_library(meshsim_warnings INTERFACE)
target_compile_options(meshsim_warnings INTERFACE -Wall -Wextra -Wpedantic -Wshadow -Wconversion
                                                  -Wno-sign-conversion)
if(MESHSIM_WERROR)
  target_compile_options(meshsim_warnings INTERFACE -Werror)
endif()
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  # GCC 12 reports false -Wrestrict, -Wstringop-overflow and -Warray-bounds positives inside
  # std::string concatenation at -O3 (GCC bugs 105329, 105651, 107852; fixed in 13): the memcpy
  # of char_traits::copy inlined into `"text" + std::string`. The precompiled headers change
  # GCC's inlining enough to show the last two. Real out-of-bounds accesses are the ASan/UBSan
  # preset's to find.
  target_compile_options(meshsim_warnings INTERFACE -Wno-restrict -Wno-stringop-overflow
                                                    -Wno-array-bounds)
endif()
