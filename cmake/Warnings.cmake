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
