# Warnings for every target; -Werror unless ENABLE_WERROR is off.
add_compile_options(-Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes
                    -Wpointer-arith -Wformat=2 -Wvla -Wno-unused-parameter)
if(ENABLE_WERROR)
  add_compile_options(-Werror)
endif()
add_compile_definitions(_POSIX_C_SOURCE=200809L _DEFAULT_SOURCE)
if(SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
if(BUILD_FUZZERS)
  if(NOT CMAKE_C_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "BUILD_FUZZERS needs clang: CC=clang cmake ...")
  endif()
  # coverage for libFuzzer in every object; the fuzz targets link the runtime
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
