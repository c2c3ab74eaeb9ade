//! Packet callbacks (`ocsd_dt_attach_packet_callback`): the built-in
//! protocols' decoders are built here rather than by the registry's
//! factories, so that the library keeps a typed handle on each packet
//! pipeline and can attach a C packet sink or monitor to it later.

use std::ffi::{c_int, c_void};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use coresight_decode::datapath::{DatapathOp, DatapathResp, TrcIndex};
use coresight_decode::decoder::{DecodeContext, DecodeStats, PacketProcessor, Pipeline, SourceConfig, TraceComponent};
use coresight_decode::error::{ErrCode, Severity, TraceError};
use coresight_decode::index::StreamIndexer;
use coresight_decode::interfaces::{PktDataIn, PktRawDataMon, ResumeState, RunAddr, TrcDataIn};
use coresight_decode::logger::ErrLink;
use coresight_decode::printers::PacketPrinter;
use coresight_decode::shared::{Shared, shared};

use crate::abi::{self, OcsdErr, OcsdResp};
use crate::packets::CPacket;
use crate::tree::{PktAttach, TextOut};

/// `FnDefPktDataIn`.
pub type FnPktDataIn = unsafe extern "C" fn(
    p_context: *const c_void,
    op: c_int,
    index_sop: crate::abi::TrcIndex,
    p_packet_in: *const c_void,
) -> OcsdResp;
/// `FnDefPktDataMon`.
pub type FnPktDataMon = unsafe extern "C" fn(
    p_context: *const c_void,
    op: c_int,
    index_sop: crate::abi::TrcIndex,
    p_packet_in: *const c_void,
    size: u32,
    p_data: *const u8,
);

fn op_to_c(op: DatapathOp) -> c_int {
    match op {
        DatapathOp::Data => 0,
        DatapathOp::Eot => 1,
        DatapathOp::Flush => 2,
        DatapathOp::Reset => 3,
    }
}

/// A C packet sink: every packet, converted to the C struct.
struct CPktSink<P: CPacket> {
    f: FnPktDataIn,
    ctx: usize,
    c: Box<P::C>,
    text: TextOut,
}

impl<P: CPacket> PktDataIn<P> for CPktSink<P> {
    fn packet_data_in(&mut self, op: DatapathOp, index: TrcIndex, pkt: Option<&P>) -> DatapathResp {
        if self.text.has_reader() {
            self.text.flush();
        }
        let p: *const c_void = match pkt {
            Some(p) => {
                p.to_c(&mut self.c);
                (&*self.c as *const P::C).cast()
            }
            None => std::ptr::null(),
        };
        // SAFETY: the client registered `f` for `ctx`; the packet struct
        // lives in this sink across the call.
        let r = unsafe { (self.f)(self.ctx as *const c_void, op_to_c(op), index as crate::abi::TrcIndex, p) };
        crate::convert::resp_from_c(r)
    }
}

/// A C packet monitor: every packet with the bytes it was made from.
struct CPktMon<P: CPacket> {
    f: FnPktDataMon,
    ctx: usize,
    c: Box<P::C>,
    text: TextOut,
}

impl<P: CPacket> PktRawDataMon<P> for CPktMon<P> {
    fn raw_packet_data_mon(&mut self, op: DatapathOp, index: TrcIndex, pkt: Option<&P>, raw: &[u8]) {
        if self.text.has_reader() {
            self.text.flush();
        }
        let p: *const c_void = match pkt {
            Some(p) => {
                p.to_c(&mut self.c);
                (&*self.c as *const P::C).cast()
            }
            None => std::ptr::null(),
        };
        let data = if raw.is_empty() { std::ptr::null() } else { raw.as_ptr() };
        // SAFETY: as for the sink; `raw` lives across the call.
        unsafe {
            (self.f)(
                self.ctx as *const c_void,
                op_to_c(op),
                index as crate::abi::TrcIndex,
                p,
                raw.len() as u32,
                data,
            )
        };
    }
}

/// A full decoder that reads memory, on a tree with no memory map yet:
/// until one is made (the first `ocsd_dt_add_*_mem_acc` call), it refuses
/// every packet operation with `OCSD_RESP_FATAL_NOT_INIT`, as OpenCSD's
/// decoders do when no memory access interface is attached.
struct NeedsMemory<P> {
    inner: Box<dyn PktDataIn<P>>,
    mapped: Arc<AtomicBool>,
    err: ErrLink,
    ready: bool,
}

impl<P> NeedsMemory<P> {
    /// Whether the decoder may go on; logs the error when it may not.
    fn check(&mut self) -> bool {
        if !self.ready {
            if !self.mapped.load(Ordering::Relaxed) {
                self.err.log(
                    &TraceError::new(Severity::Error, ErrCode::NotInit)
                        .with_message("No memory access interface attached and enabled"),
                );
                return false;
            }
            self.ready = true;
        }
        true
    }
}

impl<P> PktDataIn<P> for NeedsMemory<P> {
    fn packet_data_in(&mut self, op: DatapathOp, index: TrcIndex, pkt: Option<&P>) -> DatapathResp {
        if !self.check() {
            return DatapathResp::FatalNotInit;
        }
        self.inner.packet_data_in(op, index, pkt)
    }
    fn packet_in(&mut self, index: TrcIndex, pkt: &P) -> DatapathResp {
        if !self.check() {
            return DatapathResp::FatalNotInit;
        }
        self.inner.packet_in(index, pkt)
    }
    // Until ready, runs are left to `packet_in`, which checks.
    fn packet_bytes_in(&mut self, index: TrcIndex, run: &[u8]) -> (DatapathResp, usize) {
        if !self.ready {
            return (DatapathResp::Cont, 0);
        }
        self.inner.packet_bytes_in(index, run)
    }
    fn packet_run_in(&mut self, index: TrcIndex, run: &[u8], addrs: &[RunAddr]) -> (DatapathResp, usize) {
        if !self.ready {
            return (DatapathResp::Cont, 0);
        }
        self.inner.packet_run_in(index, run, addrs)
    }
    fn resume(&mut self, state: &ResumeState) -> bool {
        self.inner.resume(state)
    }
}

/// `dec` behind a [`NeedsMemory`] gate named `name` when the tree has no
/// memory map yet.
fn gated<P: 'static>(
    dec: Option<Box<dyn PktDataIn<P>>>,
    ctx: &DecodeContext,
    name: &str,
    mapped: &Arc<AtomicBool>,
) -> Option<Box<dyn PktDataIn<P>>> {
    let dec = dec?;
    if mapped.load(Ordering::Relaxed) {
        return Some(dec);
    }
    Some(Box::new(NeedsMemory {
        inner: dec,
        mapped: mapped.clone(),
        err: ErrLink::new(&ctx.err_log, ctx.component_name(name)),
        ready: false,
    }))
}

/// One packet pipeline, shared between the tree (as its component) and
/// the C API's handle on it.
struct SharedPipe<PP: PacketProcessor> {
    name: &'static str,
    pipe: Shared<Pipeline<PP>>,
}

impl<PP: PacketProcessor> TrcDataIn for SharedPipe<PP> {
    fn trace_data_in(&mut self, op: DatapathOp, index: TrcIndex, data: &[u8]) -> (DatapathResp, usize) {
        self.pipe.borrow_mut().trace_data_in(op, index, data)
    }
}

impl<PP: PacketProcessor> TraceComponent for SharedPipe<PP> {
    fn protocol_name(&self) -> &str {
        self.name
    }
    fn attach_packet_printer(&mut self, printer: PacketPrinter, monitor: bool) -> Result<(), ErrCode> {
        let mut p = self.pipe.borrow_mut();
        if monitor {
            p.set_monitor(Some(Box::new(printer)));
            Ok(())
        } else {
            p.attach_packet_printer(printer, false)
        }
    }
    fn stats(&self) -> Option<DecodeStats> {
        self.pipe.borrow_mut().stats()
    }
    fn attach_indexer(&mut self, indexer: Box<dyn StreamIndexer>) -> Result<(), ErrCode> {
        self.pipe.borrow_mut().attach_indexer(indexer)
    }
    fn start_at_high_nibble(&mut self) -> Result<(), ErrCode> {
        self.pipe.borrow_mut().start_at_high_nibble()
    }
}

struct PipeHandle<PP: PacketProcessor> {
    pipe: Shared<Pipeline<PP>>,
    full_decode: bool,
}

impl<PP> PktAttach for PipeHandle<PP>
where
    PP: PacketProcessor,
    PP::Packet: CPacket,
{
    fn attach(&self, kind: c_int, f: *mut c_void, ctx: usize, text: TextOut) -> OcsdErr {
        let mut p = self.pipe.borrow_mut();
        match kind {
            abi::OCSD_C_API_CB_PKT_SINK => {
                // As OpenCSD: only a packet processor on its own takes a
                // packet sink (a full decoder's sink is its decoder).
                if self.full_decode {
                    return abi::OCSD_ERR_INVALID_PARAM_TYPE;
                }
                let sink = (!f.is_null()).then(|| {
                    // SAFETY: the client passes a `FnDefPktDataIn` for a sink.
                    let f = unsafe { std::mem::transmute::<*mut c_void, FnPktDataIn>(f) };
                    Box::new(CPktSink::<PP::Packet> {
                        f,
                        ctx,
                        c: Box::default(),
                        text,
                    }) as Box<dyn PktDataIn<PP::Packet>>
                });
                p.set_sink(sink);
                abi::OCSD_OK
            }
            abi::OCSD_C_API_CB_PKT_MON => {
                let mon = (!f.is_null()).then(|| {
                    // SAFETY: the client passes a `FnDefPktDataMon` for a monitor.
                    let f = unsafe { std::mem::transmute::<*mut c_void, FnPktDataMon>(f) };
                    Box::new(CPktMon::<PP::Packet> {
                        f,
                        ctx,
                        c: Box::default(),
                        text,
                    }) as Box<dyn PktRawDataMon<PP::Packet>>
                });
                p.set_monitor(mon);
                abi::OCSD_OK
            }
            _ => abi::OCSD_ERR_INVALID_PARAM_VAL,
        }
    }
}

/// A built decoder: the tree's component and the C API's handle on it.
pub type Built = (Box<dyn TraceComponent>, Box<dyn PktAttach>);

fn share<PP>(name: &'static str, pipe: Pipeline<PP>, full_decode: bool) -> Built
where
    PP: PacketProcessor + 'static,
    PP::Packet: CPacket,
{
    let pipe = shared(pipe);
    (
        Box::new(SharedPipe {
            name,
            pipe: pipe.clone(),
        }),
        Box::new(PipeHandle { pipe, full_decode }),
    )
}

/// Builds the decoder of the built-in protocol `name` for `cfg`, as the
/// registry's factory for it would, keeping a handle for packet
/// callbacks. `None` for a protocol that is not built in here; an error
/// for a configuration the decoder refuses. `mapped` says whether the tree
/// has a memory map (see [`NeedsMemory`]).
pub fn build_builtin(
    name: &str,
    cfg: &SourceConfig,
    ctx: &DecodeContext,
    mapped: &Arc<AtomicBool>,
) -> Option<Result<Built, TraceError>> {
    use coresight_decode::decoder::DecodeMode;
    use coresight_decode::{ete, etmv3, etmv4, itm, ptm, stm};
    let full = ctx.mode == DecodeMode::FullDecode;
    Some(Ok(match name {
        "ETMV4I" | "ETE" => {
            let (pname, c) = if name == "ETE" {
                ("ETE", ete::config_from_source(cfg))
            } else {
                ("ETMV4I", etmv4::EtmV4Config::from_source(cfg))
            };
            // Refused as the registry's factory refuses it (the reason logged).
            if full && let Err(e) = c.check_decode_support() {
                ErrLink::new(&ctx.err_log, ctx.component_name("DCD_ETMV4")).log(&e);
                return Some(Err(e));
            }
            let err = ErrLink::new(&ctx.err_log, ctx.component_name("PKTP_ETMV4I"));
            let mut proc = etmv4::EtmV4PktProc::new(c.clone(), Some(err));
            proc.set_opencsd_flow(ctx.options.opencsd_flow);
            let dec = gated(
                ctx.decoder_for_mode(|| etmv4::EtmV4Decoder::new(c, ctx)),
                ctx,
                "DCD_ETMV4",
                mapped,
            );
            share(pname, Pipeline::new(pname, proc, dec), full)
        }
        "ETMV3" => {
            let c = etmv3::Etmv3Config::from_source(cfg);
            let dec = gated(
                ctx.decoder_for_mode(|| etmv3::Etmv3Decoder::new(c, ctx)),
                ctx,
                "DCD_ETMV3",
                mapped,
            );
            share(
                "ETMV3",
                Pipeline::new("ETMV3", etmv3::Etmv3Processor::new(c, ctx), dec),
                full,
            )
        }
        "PTM" => {
            let c = ptm::PtmConfig::from_source(cfg);
            let dec = gated(
                ctx.decoder_for_mode(|| ptm::PtmDecoder::new(c, ctx)),
                ctx,
                "DCD_PTM",
                mapped,
            );
            share("PTM", Pipeline::new("PTM", ptm::PtmProcessor::new(c, ctx), dec), full)
        }
        "STM" => {
            let tcsr = cfg.reg_or("STMTCSR", 0) as u32;
            share("STM", stm::create_pipeline(stm::StmConfig { tcsr }, ctx), full)
        }
        "ITM" => {
            let tcr = cfg.reg_or("ITMTCR", 0) as u32;
            share("ITM", itm::create_pipeline(itm::ItmConfig { tcr }, ctx), full)
        }
        _ => return None,
    }))
}
