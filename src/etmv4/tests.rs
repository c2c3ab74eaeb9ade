//! Unit tests for the ETMv4 packet processor and decoder.
