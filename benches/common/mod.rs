//! What the decode benchmarks share.

use coresight_decode::datapath::{DatapathResp, TrcIndex};
use coresight_decode::element::TraceElement;
use coresight_decode::interfaces::TrcGenElemIn;

/// Counts elements and their instructions, as a client that looks at each
/// would.
pub struct Count(pub u64);

impl TrcGenElemIn for Count {
    fn trace_elem_in(&mut self, _index: TrcIndex, _trace_id: u8, elem: &TraceElement) -> DatapathResp {
        self.0 += elem.num_instr_range as u64 + 1;
        DatapathResp::Cont
    }
}

/// OpenCSD's `bugfix-exact-match` capture (1 MiB of ETMv4 from six cores),
/// in `../shared` beside the project.
pub const BUGFIX: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../shared/corpus/opencsd-1.8.0/snapshots/bugfix-exact-match"
);

/// True when `../shared` is not beside the project: the benches on
/// `bugfix-exact-match` are then shown as `(ignored)` in divan's table, and
/// `-- --include-ignored` makes them fail with [`bugfix_dir`]'s message.
pub fn no_shared() -> bool {
    !std::path::Path::new(BUGFIX).is_dir()
}

/// The `bugfix-exact-match` directory; panics (the bench run exits non-zero)
/// when it is not there, rather than measuring nothing.
pub fn bugfix_dir() -> &'static std::path::Path {
    assert!(
        !no_shared(),
        "{BUGFIX}: not present; the bugfix-exact-match benches need ../shared"
    );
    std::path::Path::new(BUGFIX)
}

/// Says on stderr, once at the start, which benches `../shared`'s absence
/// leaves out.
pub fn say_if_no_shared() {
    if no_shared() {
        eprintln!("../shared is not beside the project: the bugfix-exact-match benches are (ignored)");
    }
}
