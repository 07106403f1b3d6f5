// The translation unit the test targets' precompiled header is built with (tests/CMakeLists.txt).
