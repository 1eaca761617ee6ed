# Installs an ember build tree into a scratch prefix, then configures, builds and runs the
# consumer project in this folder against it with find_package(ember). Run by CTest as the
# test `install.consumer`; by hand:
#   cmake -DEMBER_BUILD_DIR=build -DCONSUMER_SOURCE_DIR=tests/install_consumer \
#         -DWORK_DIR=/tmp/ember-consumer -P tests/install_consumer/run.cmake
# Optional: -DGENERATOR=Ninja -DCXX_COMPILER=/usr/bin/c++ -DBUILD_TYPE=Release
#           -DINSTALLED_CLI=bin/ember: the `ember` command's path under the prefix; when set,
#           the installed command must start with no LD_LIBRARY_PATH (its relative RPATH).
cmake_minimum_required(VERSION 3.25)

foreach(var EMBER_BUILD_DIR CONSUMER_SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "install consumer: -D${var}=... is required")
  endif()
endforeach()
if(NOT BUILD_TYPE)
  set(BUILD_TYPE Release)
endif()

get_filename_component(WORK_DIR "${WORK_DIR}" ABSOLUTE)
set(prefix "${WORK_DIR}/prefix")
set(build "${WORK_DIR}/build")
# Start clean, so a stale install can never satisfy find_package.
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

# Runs one step, stopping with its name when it fails. Prints the step's output on failure,
# and the consumer program's output always.
function(run_step name)
  execute_process(COMMAND ${ARGN}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0 OR name STREQUAL "run consumer")
    message("${out}")
  endif()
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install consumer: ${name} failed (exit ${rc})")
  endif()
  message(STATUS "install consumer: ${name} ok")
endfunction()

run_step("cmake --install" ${CMAKE_COMMAND} --install "${EMBER_BUILD_DIR}"
  --prefix "${prefix}" --config ${BUILD_TYPE})

set(configure_args -S "${CONSUMER_SOURCE_DIR}" -B "${build}"
  -DCMAKE_BUILD_TYPE=${BUILD_TYPE} "-DCMAKE_PREFIX_PATH=${prefix}"
  # Only the scratch prefix may provide ember, never a system-wide install.
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
if(GENERATOR)
  list(APPEND configure_args -G "${GENERATOR}")
endif()
if(CXX_COMPILER)
  list(APPEND configure_args "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
endif()
run_step("configure consumer" ${CMAKE_COMMAND} ${configure_args})
run_step("build consumer" ${CMAKE_COMMAND} --build "${build}" --config ${BUILD_TYPE})

# The consumer has a build RPATH to the installed library; LD_LIBRARY_PATH is a fallback.
if(EXISTS "${build}/app")
  set(app "${build}/app")
elseif(EXISTS "${build}/${BUILD_TYPE}/app")
  set(app "${build}/${BUILD_TYPE}/app")  # multi-config generators
else()
  message(FATAL_ERROR "install consumer: no `app` executable under ${build}")
endif()
file(GLOB_RECURSE libs LIST_DIRECTORIES false "${prefix}/libember.so*")
set(lib_dirs "")
foreach(lib IN LISTS libs)
  get_filename_component(dir "${lib}" DIRECTORY)
  list(APPEND lib_dirs "${dir}")
endforeach()
list(REMOVE_DUPLICATES lib_dirs)
string(REPLACE ";" ":" lib_path "${lib_dirs}")
run_step("run consumer" ${CMAKE_COMMAND} -E env "LD_LIBRARY_PATH=${lib_path}:$ENV{LD_LIBRARY_PATH}"
  "${app}")

# The installed `ember` command starts on its own: RUNPATH $ORIGIN/../lib, no LD_LIBRARY_PATH.
if(INSTALLED_CLI)
  set(cli "${prefix}/${INSTALLED_CLI}")
  if(NOT EXISTS "${cli}")
    message(FATAL_ERROR "install consumer: the ember command was not installed (expected ${cli})")
  endif()
  foreach(args IN ITEMS "info" "--help")
    execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH "${cli}" ${args}
      RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
    if(NOT rc EQUAL 0)
      message("${out}")
      message(FATAL_ERROR "install consumer: the installed `ember ${args}` did not run (exit ${rc}); "
                          "is its RPATH missing? (readelf -d ${cli})")
    endif()
    message(STATUS "install consumer: installed `ember ${args}` ok")
  endforeach()
  if(NOT out MATCHES "SUBCOMMAND")
    message(FATAL_ERROR "install consumer: `ember --help` printed no usage:\n${out}")
  endif()
endif()
