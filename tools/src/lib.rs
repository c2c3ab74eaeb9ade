//! The machinery of coresight-decode's command-line programs, shared by
//! them and their tests: the lister behind `trc_pkt_lister` and `trc_regress`
//! ([`lister`]), option conventions ([`cli`]), decoded elements as
//! JSON Lines ([`json`]), lcov tracefiles from coverage ([`lcov`]), raw
//! buffers' configurations ([`rawcfg`]), function names from ELF symbols
//! ([`elfsym`]), and the regression runner `trc_regress` (expected
//! listings compared with the lister's, in-process; [`regress`]).
//!
//! Not a stable API: it changes with the programs.

pub mod cli;
pub mod elfsym;
pub mod json;
pub mod lcov;
pub mod lister;
pub mod rawcfg;
pub mod regress;
