//! ETMv4 instruction trace: packet processor and decoder.

use std::rc::Rc;

use crate::decoder::DecoderFactory;
use crate::protocols::{Undecoded, ETMV4};

/// The protocol's factory for the decoder registry.
pub fn factory() -> Rc<dyn DecoderFactory> {
    Rc::new(Undecoded(&ETMV4))
}
