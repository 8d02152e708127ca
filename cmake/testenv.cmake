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

# Seconds the long tests take on a 2-core machine (plain build). A fresh
# build directory has no CTestCostData.txt, so without these `ctest -j`
# starts tests in the order they were registered and a 140 s test started
# last makes the run's tail; with them the longest start first.
set(EJ_TEST_COSTS
  integration.coord_takeover=141 integration.coord_leaderbusy=86
  shell.daemon_retry_failover_test=68 integration.coord_console=65
  shell.console_security_test=47
  shell.daemon_http_flood_test=45 unit.schedule=43 shell.console_api_test=41
  shell.fire_ledger_test=40 integration.coord_large=38 integration.coord_notrun=35
  shell.daemon_reload_test=32 shell.daemon_metrics_test=30
  shell.daemon_loglevel_test=25 install.layout=23 shell.console_history_test=20
  shell.console_browser_test=20 integration.coord_listeners=20)

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
    foreach(cost ${EJ_TEST_COSTS})
      if(cost MATCHES "^${t}=([0-9]+)$")
        set_property(TEST ${t} PROPERTY COST ${CMAKE_MATCH_1})
      endif()
    endforeach()
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
