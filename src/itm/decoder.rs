//! ITM packet decoder: packets to ITMTRACE generic elements.
//!
//! Software (stimulus port) and hardware (DWT) source packets become
//! elements with their payload; the stimulus port number takes the page
//! set by the last stimulus-page extension packet. Local timestamps are
//! accumulated (times the prescaler) and sent with their relation to the
//! source packets; global timestamps are assembled from GTS1 (low bits)
//! and GTS2 (high bits) packets and sent once complete. An overflow
//! packet marks the next element sent.

use crate::datapath::{DatapathResp, TrcIndex};
use crate::decoder::{ElemRouter, GateStep, PacketDecoder, SyncGate};
use crate::element::{ElemType, ItmInfo, ItmPktKind, TraceElement, UnsyncInfo};
use crate::interfaces::TrcGenElemIn;
use crate::shared::Shared;

use super::packet::{ItmPacket, ItmPktType};

/// Masks of the global timestamp bits a GTS1 packet of 1 to 4 payload
/// bytes carries.
const GTS1_LOW_MASK: [u64; 4] = [0x7f, 0x3fff, 0x1f_ffff, 0x3ff_ffff];

/// The ITM decoder.
pub struct ItmDecoder {
    /// The end-of-trace element went out (see [`PacketDecoder`]).
    eot_sent: bool,
    trace_id: u8,
    prescale: u32,
    out: Shared<ElemRouter>,
    sync: SyncGate,
    elem: TraceElement,
    index: TrcIndex,

    local_ts: u64,
    global_ts: u64,
    stim_page: u8,
    need_gts2: bool,
    prev_overflow: bool,
    gts_freq_change: bool,
}

impl ItmDecoder {
    /// A decoder for CoreSight trace ID `trace_id` whose local timestamps
    /// count in units of `prescale` clocks.
    pub(crate) fn new(trace_id: u8, prescale: u32, out: Shared<ElemRouter>) -> Self {
        let mut d = ItmDecoder {
            eot_sent: false,
            trace_id,
            prescale,
            out,
            sync: SyncGate::new(),
            elem: TraceElement::default(),
            index: 0,
            local_ts: 0,
            global_ts: 0,
            stim_page: 0,
            need_gts2: true,
            prev_overflow: false,
            gts_freq_change: false,
        };
        d.reset_decoder();
        d
    }

    fn reset_decoder(&mut self) {
        self.elem = TraceElement::default();
        self.sync.lose_sync();
        self.local_ts = 0;
        self.global_ts = 0;
        self.stim_page = 0;
        self.need_gts2 = true;
        self.prev_overflow = false;
        self.gts_freq_change = false;
    }

    fn send(&mut self) -> DatapathResp {
        self.out
            .borrow_mut()
            .trace_elem_in(self.index, self.trace_id, &self.elem)
    }

    fn decode(&mut self, pkt: &ItmPacket) -> DatapathResp {
        let mut info = ItmInfo::default();
        let mut send = false;
        let mut ts = None;
        match pkt.pkt_type {
            ItmPktType::NotSync => {
                self.reset_decoder();
                return DatapathResp::Cont;
            }
            ItmPktType::Async | ItmPktType::IncompleteEot => return DatapathResp::Cont,
            ItmPktType::Dwt | ItmPktType::Swit => {
                info.kind = if pkt.pkt_type == ItmPktType::Dwt {
                    ItmPktKind::Dwt
                } else {
                    ItmPktKind::Swit
                };
                info.payload_size = pkt.val_sz;
                info.value = pkt.value;
                info.channel_or_desc = if pkt.pkt_type == ItmPktType::Swit {
                    (pkt.src_id & 0x1f) | (self.stim_page << 5)
                } else {
                    pkt.src_id
                };
                send = true;
            }
            ItmPktType::Extension => {
                // Only the stimulus port page (software source, N = 2) is known.
                if pkt.src_id & 0x80 == 0 && pkt.src_id & 0x1f == 2 {
                    self.stim_page = pkt.value as u8;
                }
            }
            ItmPktType::Overflow => {
                self.local_ts = 0;
                self.prev_overflow = true;
            }
            ItmPktType::TsGlobal1 => {
                // A wrap means the high bits changed: wait for the GTS2.
                if !self.need_gts2 {
                    self.need_gts2 = pkt.src_id & 2 != 0;
                }
                if !self.gts_freq_change {
                    self.gts_freq_change = pkt.src_id & 1 != 0;
                }
                let mask = GTS1_LOW_MASK[(pkt.val_sz.clamp(1, 4) - 1) as usize];
                self.global_ts = (self.global_ts & !mask) | pkt.value as u64;
                if !self.need_gts2 {
                    info.kind = ItmPktKind::TsGlobal;
                    ts = Some(self.global_ts);
                    self.gts_freq_change = false;
                    send = true;
                }
            }
            ItmPktType::TsGlobal2 => {
                info.kind = ItmPktKind::TsGlobal;
                self.global_ts &= GTS1_LOW_MASK[3];
                self.global_ts |= pkt.ext_value() << 26;
                ts = Some(self.global_ts);
                self.gts_freq_change = false;
                self.need_gts2 = false;
                send = true;
            }
            ItmPktType::TsLocal => {
                info.kind = ItmPktKind::TsLocal;
                info.ts_relation = pkt.src_id & 3;
                info.payload_size = pkt.val_sz;
                info.value = pkt.value;
                self.local_ts = self.local_ts.wrapping_add(pkt.value as u64 * self.prescale as u64);
                ts = Some(self.local_ts);
                send = true;
            }
            ItmPktType::BadSequence | ItmPktType::Reserved | ItmPktType::NoErrType => {
                self.sync.unsync = UnsyncInfo::BadPacket;
                self.reset_decoder();
                return DatapathResp::FatalInvalidData;
            }
        }
        if !send {
            return DatapathResp::Cont;
        }
        if self.prev_overflow {
            info.overflow = true;
            self.prev_overflow = false;
        }
        self.elem.set_type(ElemType::ItmTrace);
        self.elem.itm = info;
        if let Some(t) = ts {
            self.elem.timestamp = t;
            self.elem.has_ts = true;
        }
        self.send()
    }

    fn process_packet(&mut self, pkt: &ItmPacket) -> DatapathResp {
        match self.sync.step(pkt.pkt_type == ItmPktType::Async) {
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

impl PacketDecoder for ItmDecoder {
    type Packet = ItmPacket;
    fn eot_done(&mut self) -> &mut bool {
        &mut self.eot_sent
    }
    fn on_packet(&mut self, index: TrcIndex, pkt: &ItmPacket) -> DatapathResp {
        self.index = index;
        self.process_packet(pkt)
    }
    fn on_eot(&mut self) -> DatapathResp {
        self.elem.set_type(ElemType::EoTrace);
        self.elem.unsync_info = UnsyncInfo::Eot;
        self.send()
    }
    // As OpenCSD: a reset only changes the reason given when the decoder
    // next reports it is not synchronised.
    fn on_reset(&mut self, _index: TrcIndex) -> DatapathResp {
        self.sync.unsync = UnsyncInfo::ResetDecoder;
        DatapathResp::Cont
    }
}
