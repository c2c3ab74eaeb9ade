//! perf script lines (to come).
