# ASan + UBSan, switched on by MESHSIM_SANITIZE (the `debug` preset). What they find bugs in is
# the product code: `meshsim_sanitizers` instruments the simulation library and the CLI (linked
# PRIVATE by both). The tests' own code is not instrumented (issue 18, CI within 20 minutes:
# instrumenting the doctest-heavy test files made them 2.5× slower to compile for checks of code
# that only calls the library); `meshsim_sanitizer_runtime` links the runtimes into every binary
# that links the library, so the library's checks run under every test.
add_library(meshsim_sanitizers INTERFACE)
add_library(meshsim_sanitizer_runtime INTERFACE)
if(MESHSIM_SANITIZE)
  set(_san -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  target_compile_options(meshsim_sanitizers INTERFACE ${_san})
  target_link_options(meshsim_sanitizers INTERFACE ${_san})
  target_link_options(meshsim_sanitizer_runtime INTERFACE ${_san})
  if(MESHSIM_FUZZ)
    # The loaders' libFuzzer harnesses (tests/fuzz/) link this same library, so it carries the
    # fuzzer's coverage instrumentation (clang); the tests and the CLI, linked without libFuzzer,
    # get the sanitizer runtime's empty coverage callbacks. One sanitized build instead of two
    # (issue 18, CI within 20 minutes).
    if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
      message(FATAL_ERROR "MESHSIM_FUZZ needs clang (libFuzzer): the `debug` preset sets it")
    endif()
    target_compile_options(meshsim_sanitizers INTERFACE -fsanitize=fuzzer-no-link)
  endif()
  # For code that must know (the tests run the CLI without an address-space limit then).
  target_compile_definitions(meshsim_sanitizer_runtime INTERFACE MESHSIM_SANITIZED=1)
  # GCC's sanitizer instrumentation makes -W(maybe-)uninitialized report false positives inside
  # Boost.Graph's optional members; the release preset keeps these warnings on.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(meshsim_sanitizers INTERFACE -Wno-uninitialized
                                                        -Wno-maybe-uninitialized)
  endif()
endif()
