//! ITM (Instrumentation Trace Macrocell): packet processor and decoder.

use std::rc::Rc;

use crate::decoder::DecoderFactory;
use crate::protocols::{Undecoded, ITM};

/// The protocol's factory for the decoder registry.
pub fn factory() -> Rc<dyn DecoderFactory> {
    Rc::new(Undecoded(&ITM))
}
