# Install rules: the ejob binary, the library (libejob.so.N and libejob.a,
# both made of every module in EJ_MODULES), the public headers, ejob.pc, a
# CMake package (ejob::ejob, ejob::ejob_static), man pages, systemd units
# and the sample configuration. Included from the top CMakeLists.txt after
# every module folder, so EJ_MODULES is complete here.
#
# The libraries are built only without sanitizers and fuzzing: a library
# compiled with -fsanitize would need the sanitizer runtime in every program
# that links it. EJ_LIBRARY says whether they exist in this build.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(EJ_SYSTEMD_UNIT_DIR "lib/systemd/system" CACHE STRING
    "where the systemd units go (relative to the install prefix, or absolute)")

if(EJ_SANITIZE STREQUAL "" AND NOT EJ_FUZZ)
  set(EJ_LIBRARY ON)
else()
  set(EJ_LIBRARY OFF)
endif()

if(TARGET ejob)
  install(TARGETS ejob RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

if(EJ_LIBRARY)
  get_property(ej_all_modules GLOBAL PROPERTY EJ_MODULES)
  set(ej_lib_objects "")
  foreach(m ${ej_all_modules})
    list(APPEND ej_lib_objects $<TARGET_OBJECTS:${m}>)
  endforeach()
  # What the modules link outside the project: what libejob.so links and
  # the link interface of libejob.a in the build tree. cmake/ejob.pc.in
  # and cmake/ejobConfig.cmake.in name the same libraries for installed
  # copies (tests/install links libejob.a through each of them).
  set(ej_lib_deps "")
  foreach(m ${ej_all_modules})
    get_target_property(libs ${m} LINK_LIBRARIES)
    foreach(l ${libs})
      if(NOT l IN_LIST ej_all_modules)
        list(APPEND ej_lib_deps ${l})
      endif()
    endforeach()
  endforeach()
  list(REMOVE_DUPLICATES ej_lib_deps)

  # The shared library exports only EJ_EXTERN declarations (the modules are
  # compiled with -fvisibility=hidden); -z defs makes a missing dependency a
  # link error here rather than in the program that loads the library.
  add_library(ejob_shared SHARED ${ej_lib_objects})
  set_target_properties(ejob_shared PROPERTIES
    OUTPUT_NAME ejob EXPORT_NAME ejob
    VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
    LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/lib)
  target_link_libraries(ejob_shared PRIVATE ${ej_lib_deps})
  target_link_options(ejob_shared PRIVATE -Wl,-z,defs)

  add_library(ejob_static STATIC ${ej_lib_objects})
  set_target_properties(ejob_static PROPERTIES
    OUTPUT_NAME ejob EXPORT_NAME ejob_static
    ARCHIVE_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/lib)
  # Installed, the dependencies are ejob::deps, which ejobConfig.cmake
  # defines from pkg-config and the ZooKeeper library it finds.
  foreach(d ${ej_lib_deps})
    target_link_libraries(ejob_static INTERFACE $<BUILD_INTERFACE:${d}>)
  endforeach()
  target_link_libraries(ejob_static INTERFACE $<INSTALL_INTERFACE:ejob::deps>)

  foreach(t ejob_shared ejob_static)
    target_include_directories(${t} INTERFACE
      $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
      $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  endforeach()

  install(TARGETS ejob_shared ejob_static EXPORT ejobTargets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ejob
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")

  set(ej_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/ejob)
  install(EXPORT ejobTargets NAMESPACE ejob:: DESTINATION ${ej_cmake_dir})
  configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ejobConfig.cmake.in
    ${PROJECT_BINARY_DIR}/ejobConfig.cmake INSTALL_DESTINATION ${ej_cmake_dir})
  write_basic_package_version_file(${PROJECT_BINARY_DIR}/ejobConfigVersion.cmake
    VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
  install(FILES ${PROJECT_BINARY_DIR}/ejobConfig.cmake
                ${PROJECT_BINARY_DIR}/ejobConfigVersion.cmake
          DESTINATION ${ej_cmake_dir})

  # ejob.pc is written at install time: the prefix is then the one given
  # to `cmake --install --prefix`, not the one of the configure step.
  # The first pass fills in everything but the prefix.
  set(EJ_PC_PREFIX "@EJ_PC_PREFIX@")
  foreach(d LIBDIR INCLUDEDIR)
    if(IS_ABSOLUTE "${CMAKE_INSTALL_${d}}")
      set(EJ_PC_${d} "${CMAKE_INSTALL_${d}}")
    else()
      set(EJ_PC_${d} "\${prefix}/${CMAKE_INSTALL_${d}}")
    endif()
  endforeach()
  configure_file(${PROJECT_SOURCE_DIR}/cmake/ejob.pc.in ${PROJECT_BINARY_DIR}/ejob.pc.in @ONLY)
  install(CODE "
    set(EJ_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
    configure_file(\"${PROJECT_BINARY_DIR}/ejob.pc.in\"
                   \"${PROJECT_BINARY_DIR}/ejob.pc\" @ONLY)")
  install(FILES ${PROJECT_BINARY_DIR}/ejob.pc
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()

# Files other parts of the tree provide, each installed when it exists.
# OPTIONAL checks at install time, so a file added after the configure step
# is installed too.
foreach(page ejob.1 ejob-run.1 ejob-console.1 ejob.yaml.5)
  string(REGEX REPLACE ".*\\." "" section ${page})
  install(FILES ${PROJECT_SOURCE_DIR}/man/${page}
          DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section} OPTIONAL)
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/dist/systemd/ejob.service
              ${PROJECT_SOURCE_DIR}/dist/systemd/ejob@.service
        DESTINATION ${EJ_SYSTEMD_UNIT_DIR} OPTIONAL)
install(FILES ${PROJECT_SOURCE_DIR}/dist/ejob.yaml
        DESTINATION ${CMAKE_INSTALL_SYSCONFDIR}/ejob OPTIONAL)
# The documentation the help texts, units and sample file point to
# (EJ_DOC_DIR in src/cli is the same directory): README.md, LICENSE, and
# docs/*.md under docs/ so that README's links keep working.
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/LICENSE
        DESTINATION ${CMAKE_INSTALL_DOCDIR} OPTIONAL)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs
        FILES_MATCHING PATTERN "*.md")
# Prometheus alerting rules (docs/metrics.md), for rule_files.
install(FILES ${PROJECT_SOURCE_DIR}/dist/prometheus/ejob-alerts.yml
        DESTINATION ${CMAKE_INSTALL_DATADIR}/ejob/prometheus OPTIONAL)
