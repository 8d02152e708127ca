# Every test runs with its own HOME, XDG_RUNTIME_DIR, XDG_STATE_HOME and
# EJOB_STATE_DIR under build/testenv/TEST/, never the user's: a daemon or
# command a test starts without a state directory of its own cannot write
# into the user's default one ($XDG_RUNTIME_DIR/ejob or /tmp/ejob-$UID, the
# history.db there).
#
# ej_isolate_tests() in a directory that registers tests (ej_unit_test and
# ej_integration_test call it): at the end of that directory, every test it
# registered gets those variables (appended to its ENVIRONMENT, so a later
# set_tests_properties(... ENVIRONMENT ...) does not drop them) and the
# fixture ej_testenv:
#   testenv.setup  makes the directories afresh before the tests run
#   testenv.check  runs after them and fails when a test has no such
#                  environment (registered without ej_isolate_tests) or
#                  wrote into its default state directory (it must give its
#                  daemons and commands a directory of its own, in its temp
#                  dir: --state-dir or EJOB_STATE_DIR)
# (tests/support/testenv.py). ctest adds both to any selection (ctest -R X)
# of a test that requires the fixture.
set(EJ_TESTENV_DIR ${PROJECT_BINARY_DIR}/testenv)

function(_ej_isolate_directory_tests)
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(t ${tests})
    if(t MATCHES "^testenv\\.")
      continue()
    endif()
    set(d ${EJ_TESTENV_DIR}/${t})
    set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT
                 "HOME=${d}/home" "XDG_RUNTIME_DIR=${d}/run"
                 "XDG_STATE_HOME=${d}/home/.local/state" "EJOB_STATE_DIR=${d}/state")
    set_property(TEST ${t} APPEND PROPERTY FIXTURES_REQUIRED ej_testenv)
  endforeach()
endfunction()

function(ej_isolate_tests)
  get_property(done DIRECTORY PROPERTY EJ_TESTS_ISOLATED)
  if(NOT done)
    set_property(DIRECTORY PROPERTY EJ_TESTS_ISOLATED TRUE)
    cmake_language(DEFER CALL _ej_isolate_directory_tests)
  endif()
endfunction()

# The fixture's two tests (registered once, from the top directory).
function(ej_testenv_fixture)
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  foreach(step setup check)
    add_test(NAME testenv.${step}
             COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/support/testenv.py
                     ${step} ${CMAKE_CTEST_COMMAND} ${PROJECT_BINARY_DIR} ${EJ_TESTENV_DIR})
  endforeach()
  set_tests_properties(testenv.setup PROPERTIES FIXTURES_SETUP ej_testenv TIMEOUT 120
                       LABELS testenv)
  set_tests_properties(testenv.check PROPERTIES FIXTURES_CLEANUP ej_testenv TIMEOUT 120
                       LABELS testenv)
endfunction()
