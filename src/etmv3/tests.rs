//! ETMv3 tests.
