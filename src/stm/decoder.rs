//! STM packet decoder: packets to SWTRACE generic elements.
//!
//! The decoder keeps the current master and channel and joins them with
//! each payload, marker, trigger, frequency or error packet into one
//! `OCSD_GEN_TRC_ELEM_SWTRACE` element, as OpenCSD does. Packets before
//! the first ASYNC give one NO_SYNC element; a bad packet is fatal to the
//! data path (OpenCSD's choice), and the decoder restarts from NO_SYNC.

use crate::datapath::{DatapathResp, TrcIndex};
use crate::decoder::{ElemRouter, GateStep, PacketDecoder, SyncGate};
use crate::element::{ElemType, SwTraceInfo, TraceElement, UnsyncInfo};
use crate::interfaces::TrcGenElemIn;
use crate::shared::Shared;

use super::packet::{StmPacket, StmPktType};

/// The STM decoder.
pub struct StmDecoder {
    /// The end-of-trace element went out (see [`PacketDecoder`]).
    eot_sent: bool,
    trace_id: u8,
    out: Shared<ElemRouter>,
    sync: SyncGate,
    /// Persistent software trace info: ids, and the id-valid flag.
    swt: SwTraceInfo,
    elem: TraceElement,
    index: TrcIndex,
}

impl StmDecoder {
    /// A decoder giving elements for CoreSight trace ID `trace_id` to `out`.
    pub(crate) fn new(trace_id: u8, out: Shared<ElemRouter>) -> Self {
        let mut d = StmDecoder {
            eot_sent: false,
            trace_id,
            out,
            sync: SyncGate::new(),
            swt: SwTraceInfo::default(),
            elem: TraceElement::default(),
            index: 0,
        };
        d.reset_decoder();
        d
    }

    fn reset_decoder(&mut self) {
        self.sync.lose_sync();
        self.elem = TraceElement::default();
        self.swt = SwTraceInfo::default();
    }

    fn send(&mut self) -> DatapathResp {
        self.out
            .borrow_mut()
            .trace_elem_in(self.index, self.trace_id, &self.elem)
    }

    /// Clears the per-packet flags, keeping ids and the id-valid flag.
    fn clear_per_packet(&mut self) {
        self.swt = SwTraceInfo {
            master_id: self.swt.master_id,
            channel_id: self.swt.channel_id,
            id_valid: self.swt.id_valid,
            ..SwTraceInfo::default()
        };
    }

    /// Loads the payload of `pkt` into the element.
    fn payload(&mut self, pkt: &StmPacket) {
        self.swt.payload_num_packets = 1;
        let (bits, value, mask) = match pkt.pkt_type {
            StmPktType::D4 => (4, pkt.d8() as u64 & 0xf, 0xff),
            StmPktType::D8 | StmPktType::Trig | StmPktType::Gerr | StmPktType::Merr => (8, pkt.d8() as u64, 0xff),
            StmPktType::D16 => (16, pkt.d16() as u64, 0xffff),
            StmPktType::D32 | StmPktType::Freq => (32, pkt.d32() as u64, 0xffff_ffff),
            _ => (64, pkt.d64(), !0),
        };
        self.swt.payload_bits = bits;
        // One 64-bit payload buffer: smaller payloads overwrite its low bytes.
        self.elem.sw_payload = (self.elem.sw_payload & !mask) | value;
        if pkt.marker {
            self.swt.marker = true;
        }
    }

    fn decode(&mut self, pkt: &StmPacket) -> DatapathResp {
        let mut resp = DatapathResp::Cont;
        let mut send = false;
        self.elem.set_type(ElemType::SwTrace);
        self.clear_per_packet();
        match pkt.pkt_type {
            StmPktType::BadSequence | StmPktType::Reserved => {
                self.sync.unsync = UnsyncInfo::BadPacket;
                self.reset_decoder();
                return DatapathResp::FatalInvalidData;
            }
            StmPktType::NotSync => {
                self.reset_decoder();
                return resp;
            }
            StmPktType::Version => {
                self.swt.master_id = pkt.master as u16;
                self.swt.channel_id = pkt.channel;
            }
            StmPktType::Async | StmPktType::IncompleteEot | StmPktType::NoErrType => {}
            StmPktType::Null => send = pkt.has_ts,
            StmPktType::Freq => {
                self.swt.frequency = true;
                self.payload(pkt);
                send = true;
            }
            StmPktType::Trig => {
                self.swt.trigger = true;
                self.payload(pkt);
                send = true;
            }
            StmPktType::Gerr => {
                self.swt.master_id = pkt.master as u16;
                self.swt.channel_id = pkt.channel;
                self.swt.global_err = true;
                self.swt.id_valid = false;
                self.payload(pkt);
                send = true;
            }
            StmPktType::Merr => {
                self.swt.channel_id = pkt.channel;
                self.swt.master_err = true;
                self.payload(pkt);
                send = true;
            }
            StmPktType::M8 => {
                self.swt.master_id = pkt.master as u16;
                self.swt.channel_id = pkt.channel;
                self.swt.id_valid = true;
            }
            StmPktType::C8 | StmPktType::C16 => self.swt.channel_id = pkt.channel,
            StmPktType::Flag => {
                self.swt.marker = true;
                send = true;
            }
            StmPktType::D4 | StmPktType::D8 | StmPktType::D16 | StmPktType::D32 | StmPktType::D64 => {
                self.payload(pkt);
                send = true;
            }
        }
        if send {
            if pkt.has_ts {
                self.elem.timestamp = pkt.timestamp;
                self.elem.has_ts = true;
                self.swt.has_timestamp = true;
            }
            self.elem.sw_trace = self.swt;
            resp = self.send();
        }
        resp
    }

    fn process_packet(&mut self, pkt: &StmPacket) -> DatapathResp {
        match self.sync.step(pkt.pkt_type == StmPktType::Async) {
            GateStep::Decode => self.decode(pkt),
            GateStep::Hold => DatapathResp::Cont,
            GateStep::ReportNoSync(reason) => {
                self.elem.set_type(ElemType::NoSync);
                self.elem.unsync_info = reason;
                self.send()
            }
        }
    }
}

impl PacketDecoder for StmDecoder {
    type Packet = StmPacket;
    fn eot_done(&mut self) -> &mut bool {
        &mut self.eot_sent
    }
    fn on_packet(&mut self, index: TrcIndex, pkt: &StmPacket) -> DatapathResp {
        self.index = index;
        self.process_packet(pkt)
    }
    fn on_eot(&mut self) -> DatapathResp {
        self.elem.set_type(ElemType::EoTrace);
        self.elem.unsync_info = UnsyncInfo::Eot;
        self.send()
    }
    // (No flush handler: every packet's element goes out with it, so
    // nothing is ever held back.)
    fn on_reset(&mut self, _index: TrcIndex) -> DatapathResp {
        self.sync.unsync = UnsyncInfo::ResetDecoder;
        self.reset_decoder();
        DatapathResp::Cont
    }
}
