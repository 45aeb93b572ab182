# The wheel's version story, for everything this project compiles.
#
# hiraishin_read_stack(<stack.json> <recipe>) reads the stack description that
# `hiraishin sdist` writes (the sdist has no .git) and sets, in the caller's scope:
#   LLAMA_BUILD_NUMBER        upstream build number (the pinned commit's commit count, as llama.cpp
#                             counts it; not read from the tag's name), for llama.cpp's own --version
#   LLAMA_BUILD_COMMIT        the patched commit, abbreviated as llama.cpp shows it
#   HIRAISHIN_PATCHED_COMMIT  the patched commit in full
#   HIRAISHIN_WHEEL_VERSION   the version the repaired wheel carries: the public
#                             version plus the recipe's label (cu13-sm90 -> +cu13.sm90),
#                             as `hiraishin wheel` writes it; without a recipe, the public version
# Without a stack.json (a build outside the sdist) nothing is set.
function(hiraishin_read_stack stack_json recipe)
    if (NOT EXISTS "${stack_json}")
        return()
    endif()
    file(READ "${stack_json}" _stack)
    string(JSON _build_number GET "${_stack}" upstream build_number)
    string(JSON _patched_commit GET "${_stack}" patched_commit)
    string(JSON _version GET "${_stack}" version)
    set(LLAMA_BUILD_NUMBER "${_build_number}" PARENT_SCOPE)
    string(SUBSTRING "${_patched_commit}" 0 8 _short)
    set(LLAMA_BUILD_COMMIT "${_short}" PARENT_SCOPE)
    set(HIRAISHIN_PATCHED_COMMIT "${_patched_commit}" PARENT_SCOPE)
    if (recipe STREQUAL "" OR recipe STREQUAL "unnamed")
        set(HIRAISHIN_WHEEL_VERSION "${_version}" PARENT_SCOPE)
    else()
        string(REPLACE "-" "." _label "${recipe}")
        set(HIRAISHIN_WHEEL_VERSION "${_version}+${_label}" PARENT_SCOPE)
    endif()
endfunction()
