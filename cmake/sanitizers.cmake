# ASan + UBSan as an interface target, switched on by MESHSIM_SANITIZE (the `debug` preset).
add_library(meshsim_sanitizers INTERFACE)
if(MESHSIM_SANITIZE)
  set(_san -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  target_compile_options(meshsim_sanitizers INTERFACE ${_san})
  target_link_options(meshsim_sanitizers INTERFACE ${_san})
  # GCC's sanitizer instrumentation makes -W(maybe-)uninitialized report false positives inside
  # Boost.Graph's optional members; the release preset keeps these warnings on.
  target_compile_options(meshsim_sanitizers INTERFACE -Wno-uninitialized -Wno-maybe-uninitialized)
endif()
