//! ETMv4 instruction trace: packet processor and decoder.
//!
//! - [`EtmV4Config`]: the trace unit's registers, interpreted.
//! - [`EtmV4Packet`]: one packet (with the state packets build on)
//!   and its printed form.
//! - [`EtmV4PktProc`]: bytes to packets.
//! - [`EtmV4Decoder`]: packets to generic trace elements, following
//!   the program through target memory.
//!
//! ETE (Armv9) is a superset of ETMv4: the same processor and decoder
//! handle it when the configuration says so (`EtmV4Config::is_ete`).

pub(crate) mod config;
pub(crate) mod decoder;
pub(crate) mod packet;
pub(crate) mod processor;

#[cfg(test)]
pub(crate) mod tests;

use std::sync::Arc;

use crate::datapath::{DatapathOp, DatapathResp, TrcIndex};
use crate::decoder::RegSpec;
use crate::decoder::{DecodeContext, DecodeMode, DecoderFactory, Pipeline, TraceComponent};
use crate::errcode::{ErrCode, Severity, TraceError};
use crate::factory::{ProtocolFactory, ProtocolInfo};
use crate::interfaces::PktDataIn;
use crate::logger::ErrLink;

pub use config::EtmV4Config;
pub use decoder::{EtmV4Decoder, SPEC_DEPTH_LIMIT};
pub use packet::{Atoms, EtmV4Packet, ExceptionInfo, PktContext, PktType, QInfo, TraceInfo, VAddr};
pub use processor::EtmV4PktProc;

const ETMV4_REGS: &[RegSpec] = &[
    RegSpec::required("TRCCONFIGR"),
    RegSpec::required("TRCTRACEIDR"),
    RegSpec::required("TRCIDR0"),
    RegSpec::optional("TRCIDR1", 0x4100_F403),
    RegSpec::required("TRCIDR2"),
    RegSpec::optional("TRCIDR8", 0),
    RegSpec::optional("TRCIDR9", 0),
    RegSpec::optional("TRCIDR10", 0),
    RegSpec::optional("TRCIDR11", 0),
    RegSpec::optional("TRCIDR12", 0),
    RegSpec::optional("TRCIDR13", 0),
];

/// ETMv4 instruction trace (`ETM4` devices).
pub(crate) const ETMV4: ProtocolInfo = ProtocolInfo {
    name: "ETMV4I",
    device_types: &["ETM4"],
    registers: ETMV4_REGS,
    trace_id_reg: ("TRCTRACEIDR", 0),
    pe_trace: true,
};

/// Builds the component for one source: the packet processor, and in full
/// decode mode the decoder behind it. `name` is the protocol name; ETE
/// shares ETMv4's processor and decoder, and so (as in OpenCSD) their
/// error-log names, `PKTP_ETMV4I_nnnn` and `DCD_ETMV4_nnnn`. A full decode
/// of a configuration the decoder does not implement
/// ([`EtmV4Config::check_decode_support`]) fails here, its reason logged,
/// unless the options ask for OpenCSD's behaviour.
pub(crate) fn create_component(
    name: &'static str,
    cfg: EtmV4Config,
    ctx: &DecodeContext,
) -> Result<Box<dyn TraceComponent>, TraceError> {
    let pkt_err = ctx.packet_processor_err_link("PKTP_ETMV4I");
    let mut proc = EtmV4PktProc::new(cfg.clone(), Some(pkt_err));
    proc.set_opencsd_flow(ctx.options.opencsd_flow);
    if ctx.mode == DecodeMode::FullDecode
        && let Err(e) = cfg.check_decode_support()
    {
        let err = ErrLink::new(&ctx.err_log, ctx.component_name("DCD_ETMV4"));
        if ctx.options.opencsd_cfg_unsupp {
            let dec: Box<dyn PktDataIn<EtmV4Packet>> = Box::new(Unconfigured { err });
            return Ok(Box::new(Pipeline::new(name, proc, Some(dec))));
        }
        err.log(&e);
        return Err(e);
    }
    let decoder = ctx.decoder_for_mode(|| EtmV4Decoder::new(cfg, ctx));
    Ok(Box::new(Pipeline::new(name, proc, decoder)))
}

/// OpenCSD's decoder for a configuration it refuses: made all the same
/// (its refusal is not returned to the tree), it stops the data path at
/// its first packet.
struct Unconfigured {
    err: ErrLink,
}

impl PktDataIn<EtmV4Packet> for Unconfigured {
    fn packet_data_in(&mut self, _op: DatapathOp, _index: TrcIndex, _pkt: Option<&EtmV4Packet>) -> DatapathResp {
        self.err.log(
            &TraceError::new(Severity::Error, ErrCode::NotInit).with_message("No decoder configuration information"),
        );
        DatapathResp::FatalNotInit
    }
}

/// The protocol's factory for the decoder registry.
pub(crate) fn factory() -> Arc<dyn DecoderFactory> {
    Arc::new(ProtocolFactory::new(&ETMV4, |info, cfg, ctx| {
        create_component(info.name, EtmV4Config::from_source(cfg), ctx)
    }))
}
