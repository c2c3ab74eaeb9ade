//! Instruction classification for program-flow following (A64, A32, T32).
