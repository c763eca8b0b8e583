# Build helpers for the lab. A chapter's CMakeLists.txt is the line lab_chapter(chNN) (and, after
# it, any extra targets of the chapter's own, as ch02's SASS listing): every
# baseline_*.cu, optimized_*.cu and library_*.cu file in the folder, or in its subfolders, becomes
# a program of the same name, its variant joins the chapter's test binary, and the program is
# recorded in the manifest (build/manifest.json) that compare reads. Nothing lists variants by hand.
#
# A ladder: a subfolder whose variant files begin with a number (`03_optimized_attention_fused.cu`)
# holds one topic's steps in the order `ls` shows them. The number is only a sort key: the program
# drops it (`optimized_attention_fused`), and a step's number is its place among the folder's
# optimized files, which the build hands the file as LAB_STEP. So the file names are the one list
# of the order: a step inserted between 03 and 04 is a file `03a_...`, and no other file changes.

# find_package that fails with the Debian package to install.
macro(lab_require_package pkg debian_pkg)
  find_package(${pkg} QUIET)
  if(NOT ${pkg}_FOUND)
    message(FATAL_ERROR "${pkg} not found: install the Debian package ${debian_pkg} "
                        "(sudo apt-get install ${debian_pkg}), or point CMAKE_PREFIX_PATH at an install.")
  endif()
endmacro()

# A source that needs Hopper's architecture-specific instructions (wgmma, setmaxnreg) says so in
# its file, on a line "// lab-arch: sm_90a". When the build is for sm_90 its target is compiled for
# sm_90a and sees LAB_SM90A; otherwise it is compiled as the others are and reports N/A (its
# supports()). The target should hold that one source (a variant's OBJECT library, or the package's
# sm_90a part).
function(lab_arch_from_source target src)
  file(STRINGS "${src}" arch_line REGEX "^// lab-arch: sm_90a$" LIMIT_COUNT 1)
  if(arch_line AND CMAKE_CUDA_ARCHITECTURES STREQUAL "90")
    set_property(TARGET ${target} PROPERTY CUDA_ARCHITECTURES OFF)
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CUDA>:--generate-code=arch=compute_90a,code=[compute_90a,sm_90a]>)
    target_compile_definitions(${target} PRIVATE LAB_SM90A)
  endif()
endfunction()

# Warnings and line info for device code (profilers map SASS back to source lines).
function(lab_target_defaults target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>
    $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo -Xcompiler=-Wall,-Wextra>)
endfunction()

# Sources of which some say `// lab-arch: sm_90a`, for a target of several sources (a kernel test
# binary, the package's closure): lab_arch_from_source wants a target of one source, so each that
# says so is compiled on its own, as an OBJECT library <PREFIX><file name> for sm_90a with the
# INCLUDES and LINK given (PIC: position-independent, for a shared library). <objects_var> gets
# those objects, <others_var> the other sources, as they were.
#
#   lab_sm90a_objects(objects others PREFIX ch04_kernels_ SOURCES a.cu b.cu INCLUDES dir LINK lib [PIC])
function(lab_sm90a_objects objects_var others_var)
  cmake_parse_arguments(PARSE_ARGV 2 arg "PIC" "PREFIX" "SOURCES;INCLUDES;LINK")
  set(objects "")
  set(others "")
  foreach(src IN LISTS arg_SOURCES)
    file(STRINGS "${src}" arch_line REGEX "^// lab-arch: sm_90a$" LIMIT_COUNT 1)
    if(NOT arch_line)
      list(APPEND others "${src}")
      continue()
    endif()
    get_filename_component(name "${src}" NAME_WE)
    set(target ${arg_PREFIX}${name})
    add_library(${target} OBJECT "${src}")
    if(arg_INCLUDES)
      target_include_directories(${target} PRIVATE ${arg_INCLUDES})
    endif()
    if(arg_LINK)
      target_link_libraries(${target} PRIVATE ${arg_LINK})
    endif()
    if(arg_PIC)
      set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
    endif()
    lab_target_defaults(${target})
    lab_arch_from_source(${target} "${src}")
    list(APPEND objects $<TARGET_OBJECTS:${target}>)
  endforeach()
  set(${objects_var} "${objects}" PARENT_SCOPE)
  set(${others_var} "${others}" PARENT_SCOPE)
endfunction()

# lab_chapter(ch01 [LINK lib...]): the programs, the test binary, and the `ch01` target of the
# current folder. LINK: libraries every target of the chapter links besides lab (ch04: lab_jit).
# Programs are built into the chapter's build folder whichever subfolder holds their source, so
# `make ch04 && ./ch04_compile_vs_fused/optimized_attention_fused` works wherever the file lives.
function(lab_chapter short)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "LINK")
  set(extra ${arg_LINK})
  get_filename_component(folder "${CMAKE_CURRENT_SOURCE_DIR}" NAME)
  string(REGEX REPLACE "^ch0*" "" number "${short}")
  set(root "${CMAKE_CURRENT_SOURCE_DIR}")
  # Every source of the chapter but its tests' and results': the folder and its subfolders.
  file(GLOB_RECURSE all_sources CONFIGURE_DEPENDS RELATIVE "${root}" "${root}/*.cu" "${root}/*.cpp")
  list(FILTER all_sources EXCLUDE REGEX "^(tests|results)/")
  list(SORT all_sources)
  set(variant_sources "")
  set(support_sources "")
  set(demo_sources "")
  foreach(rel IN LISTS all_sources)
    get_filename_component(name "${rel}" NAME)
    if(name MATCHES "^([0-9]+[a-z]*_)?(baseline|optimized|library)_.*\\.cu$")
      list(APPEND variant_sources "${root}/${rel}")
    elseif(name MATCHES "^demo_.*\\.cu$")
      list(APPEND demo_sources "${root}/${rel}")
    else()
      # Code that several variants share, compiled once into the chapter's library, chNN_shared;
      # each file is named for what it holds (rows.cu, mlp.cu, gpt2_reference.cpp).
      list(APPEND support_sources "${root}/${rel}")
    endif()
  endforeach()
  if(support_sources)
    add_library(${short}_shared STATIC ${support_sources})
    target_link_libraries(${short}_shared PUBLIC lab ${extra})
    target_include_directories(${short}_shared PUBLIC "${root}")
    lab_target_defaults(${short}_shared)
    set(support ${short}_shared)
  else()
    set(support "")
  endif()
  set_property(GLOBAL PROPERTY LAB_SUPPORT_${short} "${support};${extra}")
  file(GLOB test_sources CONFIGURE_DEPENDS "${root}/tests/*.cu" "${root}/tests/*.cpp")
  add_custom_target(${short})
  set(objects "")
  set(ladder_folder "")
  foreach(src IN LISTS variant_sources)
    get_filename_component(file "${src}" NAME_WE)
    get_filename_component(dir "${src}" DIRECTORY)
    # The program's name: the file's, less a ladder's sort key.
    string(REGEX REPLACE "^[0-9]+[a-z]*_" "" program "${file}")
    # A ladder's step: the file's place among its folder's optimized files (sorted above).
    set(step_definition "")
    # A ladder step that changes a step other than the one numbered before it names that one on a
    # line "// lab-after: PROGRAM" (the folder's baseline, or an optimized step before it): compare
    # sets it against that program in its "vs previous step" row (none where it names the baseline,
    # whose row is "vs baseline"), not against its neighbour in the list.
    file(STRINGS "${src}" after_line REGEX "^// lab-after: " LIMIT_COUNT 1)
    string(REPLACE "// lab-after: " "" after "${after_line}")
    string(STRIP "${after}" after)
    if(NOT file STREQUAL program)
      if(NOT dir STREQUAL ladder_folder)
        set(ladder_folder "${dir}")
        set(ladder_step 0)
        set(ladder_programs "")
      endif()
      if(program MATCHES "^optimized_")
        math(EXPR ladder_step "${ladder_step} + 1")
        set(step_definition "LAB_STEP=${ladder_step}")
      endif()
      if(after AND NOT (program MATCHES "^optimized_" AND after IN_LIST ladder_programs))
        file(RELATIVE_PATH rel_src "${PROJECT_SOURCE_DIR}" "${src}")
        message(FATAL_ERROR "${rel_src}: lab-after names '${after}', which is not a program of this ladder before "
                            "this step (${ladder_programs}); only an optimized step names one")
      endif()
      list(APPEND ladder_programs "${program}")
    elseif(after)
      file(RELATIVE_PATH rel_src "${PROJECT_SOURCE_DIR}" "${src}")
      message(FATAL_ERROR "${rel_src}: lab-after is for a ladder's numbered step files")
    endif()
    # Its storage twins: a line "// lab-storage: bf16 fp16" compiles the same file once more for each
    # storage it names, with the topic's tensors in that type (LAB_STORAGE_BF16, LAB_STORAGE_FP16;
    # common/lab/storage.hpp), as its own program, <program>_bf16 and <program>_fp16 (the variant's
    # name in the registry gets the same suffix). A program named for bf16 (optimized_gelu_bf16, its
    # tensors lab::Stored16) may name fp16 only, and its twin says fp16 where it said bf16
    # (optimized_gelu_fp16; lab::storage_twin_name in common/lab/registry.hpp names it alike).
    file(STRINGS "${src}" storage_line REGEX "^// lab-storage: " LIMIT_COUNT 1)
    string(REPLACE "// lab-storage: " "" storages "${storage_line}")
    separate_arguments(storages UNIX_COMMAND "${storages}")
    file(RELATIVE_PATH rel "${PROJECT_SOURCE_DIR}" "${src}")
    foreach(storage IN ITEMS float ${storages})
      if(storage STREQUAL "float")
        set(twin ${program})
        set(storage_definition "")
      elseif(program MATCHES "_bf16(_|$)")
        if(NOT storage STREQUAL "fp16")
          message(FATAL_ERROR "${rel}: lab-storage names '${storage}': a program named for bf16 has one twin, fp16")
        endif()
        string(REGEX REPLACE "_bf16(_|$)" "_fp16\\1" twin "${program}")
        set(storage_definition "LAB_STORAGE_FP16=1")
      elseif(storage STREQUAL "bf16" OR storage STREQUAL "fp16")
        set(twin ${program}_${storage})
        string(TOUPPER "${storage}" upper)
        set(storage_definition "LAB_STORAGE_${upper}=1")
      else()
        message(FATAL_ERROR "${rel}: lab-storage names '${storage}': the storages are bf16 and fp16")
      endif()
      # The variant is compiled once and linked into its program and into the chapter's tests.
      add_library(${twin}_variant OBJECT "${src}")
      target_link_libraries(${twin}_variant PUBLIC lab ${support} ${extra})
      target_include_directories(${twin}_variant PUBLIC "${root}")
      if(step_definition OR storage_definition)
        target_compile_definitions(${twin}_variant PRIVATE ${step_definition} ${storage_definition})
      endif()
      lab_target_defaults(${twin}_variant)
      lab_arch_from_source(${twin}_variant "${src}")
      add_executable(${twin} $<TARGET_OBJECTS:${twin}_variant> $<TARGET_OBJECTS:lab_main>)
      target_link_libraries(${twin} PRIVATE lab ${support} ${extra})
      set_target_properties(${twin} PROPERTIES LINKER_LANGUAGE CXX)
      add_dependencies(${short} ${twin})
      list(APPEND objects $<TARGET_OBJECTS:${twin}_variant>)
      set(twin_after "")
      if(after AND twin STREQUAL program)
        set(twin_after "${after}")
      elseif(after)
        message(FATAL_ERROR "${rel}: lab-after and lab-storage in one file: a twin's step has no ladder")
      endif()
      lab_manifest_entry(${twin} variant ${number} ${folder} ${rel} ${short} "${twin_after}")
      lab_program_contract_tests(${twin} ${short})
    endforeach()
  endforeach()

  # demo_*.cu: programs with their own main that show something no pair can (listed by compare,
  # run directly). They link the chapter's variants, so a demo can run them from the registry.
  foreach(src IN LISTS demo_sources)
    get_filename_component(program "${src}" NAME_WE)
    add_executable(${program} "${src}" ${objects})
    target_link_libraries(${program} PRIVATE lab ${support} ${extra} CLI11::CLI11 nlohmann_json::nlohmann_json)
    target_include_directories(${program} PRIVATE "${root}")
    set_target_properties(${program} PROPERTIES LINKER_LANGUAGE CXX)
    lab_target_defaults(${program})
    add_dependencies(${short} ${program})
    file(RELATIVE_PATH rel "${PROJECT_SOURCE_DIR}" "${src}")
    lab_manifest_entry(${program} demo ${number} ${folder} ${rel} ${short})
    set(script "${PROJECT_SOURCE_DIR}/cmake/expect_exit.cmake")
    add_test(NAME ${short}.${program}.help
             COMMAND ${CMAKE_COMMAND} -DPROG=$<TARGET_FILE:${program}> -DARGS=--help -DEXPECT=0 "-DMATCH=Exit status" -P ${script})
    add_test(NAME ${short}.${program}.unknown_flag
             COMMAND ${CMAKE_COMMAND} -DPROG=$<TARGET_FILE:${program}> -DARGS=--no-such-flag -DEXPECT=2 -P ${script})
    set_tests_properties(${short}.${program}.help ${short}.${program}.unknown_flag PROPERTIES LABELS "cpu;${short}")
    # A demo's GPU smoke run takes the arguments its source names on a line "// ctest-args: ...".
    file(STRINGS "${src}" ctest_args_line REGEX "^// ctest-args: " LIMIT_COUNT 1)
    string(REPLACE "// ctest-args: " "" ctest_args "${ctest_args_line}")
    separate_arguments(ctest_args UNIX_COMMAND "${ctest_args}")
    # Its time limit: a line "// ctest-timeout: seconds" (default 120).
    set(ctest_timeout 120)
    file(STRINGS "${src}" ctest_timeout_line REGEX "^// ctest-timeout: [0-9]+$" LIMIT_COUNT 1)
    if(ctest_timeout_line)
      string(REPLACE "// ctest-timeout: " "" ctest_timeout "${ctest_timeout_line}")
    endif()
    add_test(NAME ${short}.${program}.run COMMAND ${program} ${ctest_args})
    set_tests_properties(${short}.${program}.run PROPERTIES LABELS "gpu;${short}" SKIP_RETURN_CODE 3
                         TIMEOUT ${ctest_timeout})
  endforeach()

  # The chapter's test binary: every variant on every check shape, plus the chapter's own tests.
  if(variant_sources OR test_sources)
    lab_chapter_gtest_binary(${short} tests lab_chapter_test_main "gpu;${short}" 300 ${objects} ${test_sources})
  endif()
  # The chapter's kernel tests (tests/kernels/*.cu): GPU unit tests of kernels that several variants
  # share, each against a double reference of its own contract, in a binary of their own
  # (chNN_kernels, without the variants) so that a planted bug there rebuilds one file.
  # A kernel test that says `// lab-arch: sm_90a` (one of the Hopper kernels) is compiled on its own
  # for sm_90a, as a variant that says so is, and joins the binary as objects.
  file(GLOB kernel_test_sources CONFIGURE_DEPENDS "${root}/tests/kernels/*.cu")
  if(kernel_test_sources)
    get_property(kernel_support GLOBAL PROPERTY LAB_SUPPORT_${short})
    lab_sm90a_objects(kernel_test_objects kernel_test_others PREFIX ${short}_kernels_ SOURCES ${kernel_test_sources}
                      INCLUDES "${CMAKE_CURRENT_SOURCE_DIR}" LINK lab_testing ${kernel_support})
    lab_chapter_gtest_binary(${short} kernels lab_chapter_test_main "gpu;${short}" 300 ${kernel_test_others}
                             ${kernel_test_objects})
  endif()
  # The chapter's CPU tests (tests/cpu/*): its host-side pieces (tiles, plans, references, the
  # checks' own arithmetic), which need neither a GPU nor a variant, in a binary labelled cpu
  # (chNN_cpu): CI runs them, and a GPU machine's `ctest -L gpu` does not spend device time on them.
  file(GLOB cpu_test_sources CONFIGURE_DEPENDS "${root}/tests/cpu/*.cu" "${root}/tests/cpu/*.cpp")
  if(cpu_test_sources)
    lab_chapter_gtest_binary(${short} cpu lab_chapter_cpu_main "cpu;${short}" 300 ${cpu_test_sources})
  endif()
  # The chapter's fuzz binary: every variant on random shapes near its check shapes, under fresh
  # seeds (LAB_FUZZ_CASES a variant, default 60). `ctest -L fuzz` runs them all.
  if(variant_sources)
    lab_chapter_gtest_binary(${short} fuzz lab_chapter_fuzz_main "gpu;fuzz;${short}" 900 ${objects})
  endif()
  # The README's table of programs is the registry's, never typed by hand (a CPU test).
  add_test(NAME ${short}.readme_programs
           COMMAND ${CMAKE_COMMAND} -DCOMPARE=$<TARGET_FILE:compare> -DMANIFEST=${PROJECT_BINARY_DIR}/manifest.json
                   -DCHAPTER=${short} -DREADME=${CMAKE_CURRENT_SOURCE_DIR}/README.md
                   -DOUT=${CMAKE_CURRENT_BINARY_DIR}/programs.md
                   -P ${PROJECT_SOURCE_DIR}/cmake/check_readme_programs.cmake)
  set_tests_properties(${short}.readme_programs PROPERTIES LABELS "cpu;${short}" TIMEOUT 120)
  # A subfolder's README with a table of programs (ch04's attention/README.md) lists its own.
  file(GLOB sub_readmes CONFIGURE_DEPENDS "${root}/*/README.md")
  foreach(readme IN LISTS sub_readmes)
    file(STRINGS "${readme}" has_table REGEX "<!-- results:programs:begin -->" LIMIT_COUNT 1)
    if(NOT has_table)
      continue()
    endif()
    get_filename_component(sub_dir "${readme}" DIRECTORY)
    get_filename_component(sub "${sub_dir}" NAME)
    add_test(NAME ${short}.readme_programs.${sub}
             COMMAND ${CMAKE_COMMAND} -DCOMPARE=$<TARGET_FILE:compare> -DMANIFEST=${PROJECT_BINARY_DIR}/manifest.json
                     -DCHAPTER=${short} -DSUBFOLDER=${sub} -DREADME=${readme}
                     -DOUT=${CMAKE_CURRENT_BINARY_DIR}/programs_${sub}.md
                     -P ${PROJECT_SOURCE_DIR}/cmake/check_readme_programs.cmake)
    set_tests_properties(${short}.readme_programs.${sub} PROPERTIES LABELS "cpu;${short}" TIMEOUT 120)
  endforeach()
endfunction()

# Registers a GoogleTest binary's tests with CTest, listed when ctest runs (PRE_TEST). The listing
# loads the binary and its libraries (cuBLAS alone is over 500 MB): on a cold disk that can take
# longer than GoogleTest's 5 s default, and a listing cut off fails the whole ctest run, so it has
# the time a slow machine needs.
#
#   lab_discover_tests(target TEST_PREFIX prefix LABELS label... [PROPERTIES name value...])
#
# The labels are set by a script of our own, included after the listing: gtest_discover_tests
# flattens its PROPERTIES into one list, so "LABELS gpu;fuzz;ch02" there gave the tests the label
# gpu alone (and a property named fuzz), and `ctest -L fuzz` found nothing. tools/check_test_labels.py
# (the CPU test tools.test_labels) holds every test to its labels.
function(lab_discover_tests target)
  cmake_parse_arguments(arg "" "TEST_PREFIX" "LABELS;PROPERTIES" ${ARGN})
  if(NOT arg_LABELS)
    message(FATAL_ERROR "lab_discover_tests(${target}): LABELS is required (cpu or gpu, and the chapter's)")
  endif()
  set(properties)
  if(arg_PROPERTIES)
    set(properties PROPERTIES ${arg_PROPERTIES})
  endif()
  gtest_discover_tests(${target} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 300 TEST_PREFIX "${arg_TEST_PREFIX}"
                       TEST_LIST ${target}_TESTS ${properties})
  set(script "${CMAKE_CURRENT_BINARY_DIR}/${target}_labels.cmake")
  file(WRITE "${script}"
       "if(${target}_TESTS)\n  set_tests_properties(\${${target}_TESTS} PROPERTIES LABELS \"${arg_LABELS}\")\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${script}")
endfunction()

# A chapter's GoogleTest binary, chNN_<suffix>: the chapter's variant objects (and sources) with a
# main from common/, its tests registered with CTest under `labels`, built by the chapter target.
function(lab_chapter_gtest_binary short suffix main labels timeout)
  set(target ${short}_${suffix})
  add_executable(${target} ${ARGN} $<TARGET_OBJECTS:${main}>)
  get_property(support GLOBAL PROPERTY LAB_SUPPORT_${short})
  target_link_libraries(${target} PRIVATE lab_testing ${support})
  target_include_directories(${target} PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}")
  set_target_properties(${target} PROPERTIES LINKER_LANGUAGE CXX)
  lab_target_defaults(${target})
  lab_discover_tests(${target} TEST_PREFIX "${short}." LABELS ${labels} PROPERTIES TIMEOUT ${timeout})
  add_dependencies(${short} ${target})
endfunction()

# A CPU test that PROGRAM, given ARGS ('|'-separated), exits 2 (bad usage) with output matching
# MATCH: a value refused before the device is touched (where there is no GPU, a check made after
# the device's would answer 3 instead).
function(lab_expect_usage name program args match)
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} -DPROG=$<TARGET_FILE:${program}> "-DARGS=${args}" -DEXPECT=2 "-DMATCH=${match}"
                   -P ${PROJECT_SOURCE_DIR}/cmake/expect_exit.cmake)
  string(REGEX MATCH "^ch[0-9]+" chapter_label "${name}")
  set_tests_properties(${name} PROPERTIES LABELS "cpu;${chapter_label}")
endfunction()

# A run of a demo that must exit 0: its output matches MATCH (cmake/expect_exit.cmake), or, with
# ROWS, each of ROWS ('@@'-separated regular expressions) matches a whole line of FILE, which the run
# writes (cmake/expect_rows.cmake). ARGS are '|'-separated. Labelled cpu, or gpu: then skipped where
# the demo finds no GPU, with the time limit the GPU runs need.
#
#   lab_expect_run(name program args LABEL cpu|gpu MATCH regex)
#   lab_expect_run(name program args LABEL cpu|gpu FILE path ROWS regex@@regex...)
function(lab_expect_run name program args)
  cmake_parse_arguments(PARSE_ARGV 3 run "" "LABEL;MATCH;FILE;ROWS" "")
  if(DEFINED run_ROWS)
    add_test(NAME ${name}
             COMMAND ${CMAKE_COMMAND} -DPROG=$<TARGET_FILE:${program}> "-DARGS=${args}" -DEXPECT=0
                     -DFILE=${run_FILE} "-DROWS=${run_ROWS}" -P ${PROJECT_SOURCE_DIR}/cmake/expect_rows.cmake)
  else()
    set(limit 60)
    if(run_LABEL STREQUAL "gpu")
      set(limit 300)  # the test's own TIMEOUT, below
    endif()
    add_test(NAME ${name}
             COMMAND ${CMAKE_COMMAND} -DPROG=$<TARGET_FILE:${program}> "-DARGS=${args}" -DEXPECT=0
                     "-DMATCH=${run_MATCH}" -DTIMEOUT=${limit} -P ${PROJECT_SOURCE_DIR}/cmake/expect_exit.cmake)
  endif()
  string(REGEX MATCH "^ch[0-9]+" chapter_label "${name}")
  set_tests_properties(${name} PROPERTIES LABELS "${run_LABEL};${chapter_label}")
  if(run_LABEL STREQUAL "gpu")
    set_tests_properties(${name} PROPERTIES TIMEOUT 300 SKIP_REGULAR_EXPRESSION "no usable CUDA device")
  endif()
endfunction()

# CPU tests of the program contract on the real binary (flags, exit statuses), and one GPU test
# that runs the program's verification (reported as skipped, exit 3, where there is no GPU).
function(lab_program_contract_tests program short)
  set(p "$<TARGET_FILE:${program}>")
  set(script "${PROJECT_SOURCE_DIR}/cmake/expect_exit.cmake")
  add_test(NAME ${short}.${program}.help
           COMMAND ${CMAKE_COMMAND} -DPROG=${p} -DARGS=--help -DEXPECT=0 "-DMATCH=--shape.*Exit status" -P ${script})
  add_test(NAME ${short}.${program}.describe
           COMMAND ${CMAKE_COMMAND} -DPROG=${p} -DARGS=--describe -DEXPECT=0 "-DMATCH=program.: .${program}" -P ${script})
  add_test(NAME ${short}.${program}.unknown_flag
           COMMAND ${CMAKE_COMMAND} -DPROG=${p} -DARGS=--no-such-flag -DEXPECT=2 "-DMATCH=no-such-flag" -P ${script})
  add_test(NAME ${short}.${program}.bad_shapes
           COMMAND ${CMAKE_COMMAND} -DPROG=${p} -DARGS=--shape|0x5 -DEXPECT=2 "-DMATCH=positive" -P ${script})
  add_test(NAME ${short}.${program}.bad_cache
           COMMAND ${CMAKE_COMMAND} -DPROG=${p} -DARGS=--cache|warm -DEXPECT=2 "-DMATCH=cache" -P ${script})
  # Flags are checked before the device: exit 2 on any machine, GPU or not.
  add_test(NAME ${short}.${program}.bad_seed
           COMMAND ${CMAKE_COMMAND} -DPROG=${p} -DARGS=--seed|-1 -DEXPECT=2 "-DMATCH=--seed" -P ${script})
  add_test(NAME ${short}.${program}.bad_benchmark_flag
           COMMAND ${CMAKE_COMMAND} -DPROG=${p} -DARGS=--benchmark_repetitions=abc -DEXPECT=2
                   "-DMATCH=benchmark_repetitions" -P ${script})
  # Google Benchmark's values it would take badly, and an output file that could not be written:
  # refused by the lab before the device (Google Benchmark 1.7.1 prints its usage and exits 0 on
  # a format it does not write, aborts on a negative repetition count, runs nothing on 0).
  lab_expect_usage(${short}.${program}.bad_benchmark_format ${program} "--benchmark_format=xml"
                   "--benchmark_format=xml: not a format")
  lab_expect_usage(${short}.${program}.bad_benchmark_repetitions ${program} "--benchmark_repetitions=0"
                   "--benchmark_repetitions=0: not a whole number of at least 1")
  lab_expect_usage(${short}.${program}.bad_benchmark_out ${program} "--benchmark_out=/nonexistent/x.json"
                   "--benchmark_out /nonexistent/x.json: the folder /nonexistent does not exist")
  lab_expect_usage(${short}.${program}.bad_trace ${program} "--trace|/nonexistent/t.json"
                   "--trace /nonexistent/t.json: the folder /nonexistent does not exist")
  set_tests_properties(${short}.${program}.help ${short}.${program}.describe ${short}.${program}.unknown_flag
                       ${short}.${program}.bad_shapes ${short}.${program}.bad_cache ${short}.${program}.bad_seed
                       ${short}.${program}.bad_benchmark_flag
                       PROPERTIES LABELS "cpu;${short}")
  add_test(NAME ${short}.${program}.check_only COMMAND ${program} --check-only)
  set_tests_properties(${short}.${program}.check_only PROPERTIES LABELS "gpu;${short}" SKIP_RETURN_CODE 3 TIMEOUT 300)
endfunction()

# One program in the two manifests: the build tree's (its path in the build) and the install's
# (bin/PROGRAM, relative to PREFIX/share/cuda-perf-lab), and the program installed to PREFIX/bin.
# ARGV6, where given and not empty: the step it comes after (a ladder file's "// lab-after: PROGRAM").
function(lab_manifest_entry program kind number folder rel short)
  set(common "\"program\": \"${program}\", \"kind\": \"${kind}\", \"chapter\": ${number}, \"folder\": \"${folder}\", \"source\": \"${rel}\", \"make_target\": \"${program}\", \"chapter_target\": \"${short}\"")
  if(ARGC GREATER 6 AND NOT "${ARGV6}" STREQUAL "")
    string(APPEND common ", \"after\": \"${ARGV6}\"")
  endif()
  set_property(GLOBAL APPEND PROPERTY LAB_MANIFEST_ENTRIES "{${common}, \"path\": \"$<TARGET_FILE:${program}>\"}")
  set_property(GLOBAL APPEND PROPERTY LAB_INSTALL_MANIFEST_ENTRIES "{${common}, \"path\": \"../../bin/${program}\"}")
  install(TARGETS ${program} RUNTIME DESTINATION bin)
endfunction()

# build/manifest.json: every program with its chapter, source and path; and the installed copy,
# build/manifest.install.json -> PREFIX/share/cuda-perf-lab/manifest.json (cmake --install).
function(lab_write_manifest)
  foreach(which IN ITEMS build install)
    if(which STREQUAL "build")
      get_property(entries GLOBAL PROPERTY LAB_MANIFEST_ENTRIES)
      set(out "${PROJECT_BINARY_DIR}/manifest.json")
    else()
      get_property(entries GLOBAL PROPERTY LAB_INSTALL_MANIFEST_ENTRIES)
      set(out "${PROJECT_BINARY_DIR}/manifest.install.json")
    endif()
    list(JOIN entries ",\n    " body)
    file(GENERATE OUTPUT "${out}" CONTENT
"{
  \"format\": 1,
  \"project\": \"cuda-perf-lab\",
  \"build_dir\": \"${PROJECT_BINARY_DIR}\",
  \"source_dir\": \"${PROJECT_SOURCE_DIR}\",
  \"cuda_architectures\": \"${CMAKE_CUDA_ARCHITECTURES}\",
  \"programs\": [
    ${body}
  ]
}
")
  endforeach()
  install(FILES "${PROJECT_BINARY_DIR}/manifest.install.json" DESTINATION share/cuda-perf-lab RENAME manifest.json)
endfunction()
