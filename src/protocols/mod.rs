//! The built-in trace protocols, as a list: what
//! [`DecoderRegistry::builtin`] registers. Each protocol's folder holds its
//! identity ([`crate::factory::ProtocolInfo`]), packet processor and
//! decoder; this module only gathers them, from above.

use std::sync::Arc;

use crate::decoder::{DecoderFactory, DecoderRegistry};

/// The built-in protocol factories.
pub(crate) fn builtin_factories() -> Vec<Arc<dyn DecoderFactory>> {
    vec![
        crate::etmv4::factory(),
        crate::ete::factory(),
        crate::ptm::factory(),
        crate::etmv3::factory(),
        crate::stm::factory(),
        crate::itm::factory(),
    ]
}

impl DecoderRegistry {
    /// The built-in protocols.
    pub fn builtin() -> Self {
        let mut r = DecoderRegistry::empty();
        for f in builtin_factories() {
            // Built-in names are distinct.
            let _ = r.register(f);
        }
        r
    }
}

impl Default for DecoderRegistry {
    fn default() -> Self {
        DecoderRegistry::builtin()
    }
}
