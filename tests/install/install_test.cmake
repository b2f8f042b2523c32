# install_consumer (tests/install/run_install_test.sh): the installed library, built against from
# outside with pkg-config and with find_package. Included by tests/CMakeLists.txt.
add_test(NAME install_consumer
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_install_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR}
                 ${CMAKE_C_COMPILER} ${CUTRAIN_WITH_CUDA})
set_tests_properties(install_consumer PROPERTIES LABELS unit TIMEOUT 600)
