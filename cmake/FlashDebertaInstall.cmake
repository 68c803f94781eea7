# Installs the headers and exports the INTERFACE targets for find_package(FlashDeberta CONFIG COMPONENTS ...).
include(CMakePackageConfigHelpers)

install(DIRECTORY include/flashdeberta DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(FLASHDEBERTA_WITH_EIGEN)
  install(DIRECTORY backends/eigen/include/flashdeberta DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endif()
if(FLASHDEBERTA_WITH_ONEDNN)
  install(DIRECTORY backends/onednn/include/flashdeberta DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endif()
if(FLASHDEBERTA_WITH_KOKKOS)
  install(DIRECTORY backends/kokkos/include/flashdeberta DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endif()

install(TARGETS ${FLASHDEBERTA_EXPORTED_TARGETS} EXPORT FlashDebertaTargets)
install(EXPORT FlashDebertaTargets NAMESPACE flashdeberta:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/FlashDeberta)

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/FlashDebertaConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/FlashDebertaConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/FlashDeberta)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/FlashDebertaConfigVersion.cmake
  COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/FlashDebertaConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/FlashDebertaConfigVersion.cmake
              ${CMAKE_CURRENT_LIST_DIR}/FlashDebertaCudaStandard.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/FlashDeberta)
