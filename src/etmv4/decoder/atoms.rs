//! The fast path of atoms committed as they arrive: runs of atom packets
//! taken as their header bytes, each atom followed through the remembered
//! blocks of the program without the speculation stack (see
//! [`EtmV4Decoder::atoms_now`]).

use super::*;

/// Fills `o` as an instruction range whose last instruction is as `last`
/// describes (executed or not).
#[inline(always)]
pub(super) fn fill_range(o: &mut TraceElement, last: &InstrInfo, r: Range, executed: bool) {
    o.set_type(ElemType::InstrRange);
    o.last_instr_exec = executed;
    o.last_i_type = last.instr_type;
    o.last_i_subtype = last.sub_type;
    o.last_instr_sz = last.instr_size;
    o.isa = last.isa;
    o.last_instr_cond = last.is_conditional;
    o.st_addr = r.st;
    o.en_addr = r.en;
    o.num_instr_range = r.num;
}

/// The fused atom walk's state between atom packets (see
/// [`EtmV4Decoder::atom_bytes_fast`]).
pub(super) struct AtomWalk<'a> {
    /// Where the next atom's block starts, and its instruction set.
    addr: u64,
    isa: Isa,
    /// The last block committed: the instruction state it left.
    last: Option<&'a InstrInfo>,
    /// An indirect branch was taken: the next atom needs an address.
    need_addr: bool,
}

/// Where a run of atom packets is in its bytes and in the output slots.
pub(super) struct RunCursor {
    /// The next packet's header byte in the run.
    pub(super) i: usize,
    /// The next output slot.
    pub(super) slot: usize,
    /// The next of the run's address packets.
    pub(super) addr: usize,
}

/// The address packets of a run (see [`PktDataIn::packet_run_in`]), and
/// the instruction set of an address with IS 0 and with IS 1 in the
/// current context.
pub(super) struct RunAddrs<'r> {
    pub(super) list: &'r [RunAddr],
    pub(super) isa: [Isa; 2],
}

/// Commits the atom packets of `run` from `at.i` (the byte at `i` traced at
/// `index + i`) over remembered blocks, one range per atom into `elems`
/// from `at.slot`, and the address packets of `addrs` between them from
/// `at.addr`, until the run ends, a packet has no atoms and is not the
/// next address, an indirect branch wants an address, or a packet ends
/// at or past slot `slot_stop`.
/// `at` is left past the last packet whose atoms were all committed; a
/// packet stopped part way (a block not remembered) is returned with how
/// many of its atoms were committed. The whole run in one call, its
/// arguments apart (a struct of them costs loads in the loop), so the
/// walk's state stays in registers from one packet to the next.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub(super) fn walk_atom_packets<'a>(
    blocks: &WaypointBlocks<'a>,
    table: &[Atoms; 256],
    run: &[u8],
    index: TrcIndex,
    elems: &mut [(TrcIndex, TraceElement)],
    slot_stop: usize,
    ret_stack: &mut ReturnStack,
    walk: &mut AtomWalk<'a>,
    addrs: &RunAddrs<'_>,
    at: &mut RunCursor,
) -> Option<(Atoms, u8)> {
    // A copy field by field: with `Copy` derived, `*walk` compiled to a
    // loop 2 M instructions slower on bugfix-exact-match.
    let mut w = AtomWalk {
        last: walk.last,
        ..*walk
    };
    let (mut i, mut slot, mut k) = (at.i, at.slot, at.addr);
    let mut stopped = None;
    while let Some(&b) = run.get(i) {
        let atoms = table[b as usize];
        let n = atoms.num as usize;
        if n == 0 {
            // An address packet: committed as the atom packet after it
            // would commit it first.
            match addrs.list.get(k) {
                Some(a) if a.index == index + i as u64 => {
                    w.addr = a.addr;
                    w.isa = addrs.isa[usize::from(a.is & 1)];
                    w.need_addr = false;
                    ret_stack.pop_pending = false;
                    ret_stack.tinfo_wait_addr = false;
                    k += 1;
                    i += usize::from(a.len);
                    continue;
                }
                _ => break,
            }
        }
        let Some(slots) = elems.get_mut(slot..slot + n) else {
            break;
        };
        if w.need_addr {
            break;
        }
        let m = walk_atoms_inline(blocks, slots, ret_stack, &mut w, atoms.en_bits, index + i as u64);
        slot += m;
        if m < n {
            stopped = Some((atoms, m as u8));
            break;
        }
        i += 1;
        if slot >= slot_stop {
            break;
        }
    }
    *walk = w;
    *at = RunCursor { i, slot, addr: k };
    stopped
}

/// Commits atoms (`en_bits`, oldest in bit 0) of the packet at
/// `pkt_index` over remembered blocks, one range into each of `slots`
/// (which already hold the current PE context: see
/// `OutStack::fill_context`), until the slots are filled, a block is not
/// remembered, or an indirect branch is taken; returns how many. In line,
/// in a caller whose loop state is in registers.
#[inline(always)]
pub(super) fn walk_atoms_inline<'a>(
    blocks: &WaypointBlocks<'a>,
    slots: &mut [(TrcIndex, TraceElement)],
    ret_stack: &mut ReturnStack,
    walk: &mut AtomWalk<'a>,
    mut en_bits: u32,
    pkt_index: TrcIndex,
) -> usize {
    let (mut addr, mut isa, mut last) = (walk.addr, walk.isa, walk.last);
    let mut made = 0;
    for (idx, o) in slots.iter_mut() {
        let Some((num, a)) = blocks.get(addr, isa) else { break };
        // A block is walked in one instruction set, which it is keyed by:
        // its last instruction's is `isa` (not read again below).
        debug_assert_eq!(a.isa, isa);
        let taken = en_bits & 1 != 0;
        let next = a.instr_addr;
        *idx = pkt_index;
        fill_range(
            o,
            a,
            Range {
                st: addr,
                en: next,
                num,
            },
            taken,
        );
        en_bits >>= 1;
        made += 1;
        last = Some(a);
        if !taken {
            addr = next;
            continue;
        }
        let here = isa;
        isa = a.next_isa;
        match a.instr_type {
            InstrType::Branch => {
                addr = a.branch_addr;
                if a.is_link {
                    ret_stack.push(next, here);
                }
            }
            InstrType::BranchIndirect => {
                addr = next;
                if a.is_link {
                    ret_stack.push(next, here);
                }
                ret_stack.set_pop_pending();
                walk.need_addr = true;
                break;
            }
            _ => addr = next,
        }
    }
    walk.addr = addr;
    walk.isa = isa;
    walk.last = last;
    made
}

impl EtmV4Decoder {
    /// Commits atoms of `atoms` (oldest first) while commits are due; what
    /// is left of `atoms` stays with the caller. On an error `atoms` is
    /// part consumed and the caller leaves its stack element unchanged.
    #[inline(always)]
    pub(super) fn commit_atom_run(&mut self, atoms: &mut Atoms, index: TrcIndex) -> Step {
        while atoms.num > 0 && self.res.commit > 0 {
            if self.commit_atoms_fast(atoms, index) {
                continue;
            }
            let taken = atoms.en_bits & 1 != 0;
            atoms.num -= 1;
            atoms.en_bits >>= 1;
            self.return_stack_pop()?;
            if !self.need_ctxt && !self.need_addr {
                self.process_atom(taken, index)?;
            }
            self.res.commit -= 1;
        }
        Ok(())
    }

    /// Whether an atom packet now is committed as it arrives (see
    /// [`atoms_now`](Self::atoms_now)).
    #[inline(always)]
    pub(super) fn atoms_commit_now(&self) -> bool {
        self.state == State::DecodePackets
            && self.curr_spec_depth == self.max_spec_depth
            && !self.res.pending()
            && (self.stack.is_empty() || self.stack.iter().all(|e| e.kind == P0Kind::Addr))
    }

    /// An atom packet that is committed as it arrives: the speculation
    /// depth is at its maximum with nothing but addresses outstanding
    /// (always so when TRCIDR8.MAXSPEC is 0, as on most cores). Does what
    /// pushing it and resolving the stack would, without the stack.
    ///
    /// When the next packet is an atom packet too, or an address packet
    /// with one after it, with nothing to show between them (`continues`),
    /// the elements are held and sent with the next atom packet's: one
    /// send for a run of atom packets. Held elements never outlive the
    /// processor's block of data.
    pub(super) fn atoms_now(&mut self, pkt_atoms: Atoms, mut continues: bool) -> DatapathResp {
        let index = self.index_curr_pkt;
        let mut atoms = pkt_atoms;
        let num_req = atoms.num as i64;
        self.curr_spec_depth += num_req;
        self.res.commit = num_req;
        self.state = State::ResolveElements;
        self.no_sync_unreported = false;
        if self.out_stack.to_send == 0 {
            self.out_stack.reset();
            self.commit_addresses();
        } else {
            // An address may have come between the held atoms and these.
            self.commit_addresses();
            if !(self.commit_atoms_fast(&mut atoms, index) && atoms.num == 0) {
                match self.send_held(atoms, num_req, (pkt_atoms.num - atoms.num) as usize) {
                    Err(resp) => return resp,
                    Ok(sent) => continues &= !sent,
                }
            }
        }
        self.atoms_finish(pkt_atoms, atoms, num_req, continues)
    }

    /// An address packet with an atom packet after it (in a run given as
    /// bytes, or sent marked so): committed now, as that packet would
    /// commit it first thing (nothing reads what it changes in between).
    /// False, and nothing done, when the general path must take it.
    fn address_before_atoms(&mut self, a: &RunAddr) -> bool {
        if self.state != State::DecodePackets || self.elem_pending_addr || !self.stack.is_empty() {
            return false;
        }
        self.index_curr_pkt = a.index;
        self.last_is = a.is;
        self.commit_address(a.addr, a.is);
        true
    }

    /// An address packet (no context) that the processor sent between two
    /// runs of atom packets, with this decoder holding the first run's
    /// elements: taken, and the elements held on for the next run (nothing
    /// can be shown between them). `None` for any other packet, or a
    /// state the general path must take.
    pub(super) fn address_in_run(&mut self, pkt: &EtmV4Packet) -> Option<DatapathResp> {
        use crate::etmv4::packet::PktType as T;
        let plain = matches!(
            pkt.pkt_type,
            T::AddrMatch | T::AddrSIS0 | T::AddrSIS1 | T::AddrL32IS0 | T::AddrL32IS1 | T::AddrL64IS0 | T::AddrL64IS1
        );
        if !plain || self.state != State::DecodePackets || self.elem_pending_addr {
            return None;
        }
        let a = RunAddr {
            index: self.index_curr_pkt,
            addr: pkt.addr.val,
            is: pkt.addr_is,
            len: 0,
        };
        if pkt.atom_run_continues && self.address_before_atoms(&a) {
            self.in_atom_run = true;
            return Some(DatapathResp::Cont);
        }
        // What decode_packet does with it here.
        self.push_addr(P0Kind::Addr, false, pkt);
        if pkt.atom_run_continues {
            self.in_atom_run = true;
            return Some(DatapathResp::Cont);
        }
        Some(self.send_all())
    }

    /// Addresses that came before atoms committed on arrival are committed
    /// first, as commit_elements would.
    #[inline]
    pub(super) fn commit_addresses(&mut self) {
        while let Some(a) = self.stack.pop_front() {
            self.commit_address(a.addr, a.addr_is);
        }
    }

    /// What committing an address element does (resolving the stack, or
    /// before atoms committed on arrival).
    #[inline]
    pub(super) fn commit_address(&mut self, addr: u64, is: u8) {
        self.ret_stack.pop_pending = false;
        self.ret_stack.tinfo_wait_addr = false;
        self.set_instr_addr_isa(addr, is);
        self.need_addr = false;
    }

    /// Elements held from earlier atom packets, when the current one needs
    /// more than the fast path (which cannot fail) to commit `atoms` of its
    /// `num_req`: the rest needs the general walk, whose errors reset the
    /// output, so what is held is sent first. The newest `made`, the
    /// current packet's atoms the fast path committed, stay: an error later
    /// in the packet drops them, as it drops the elements of a packet not
    /// yet sent when each packet's elements are sent after it (a packet
    /// monitor attached, and OpenCSD). Returns whether any was sent.
    ///
    /// The packet's own elements are then sent at its end, not held for
    /// the next packet's: had the sink waited here, they would have gone
    /// out at the flush, and the next packet's elements would start the
    /// output again. Whether the sink waits must not change which output
    /// slot an element is made in, as a slot keeps what its last element
    /// left in the fields a new one does not set.
    pub(super) fn send_held(&mut self, atoms: Atoms, num_req: i64, made: usize) -> Result<bool, DatapathResp> {
        let sent = self.out_stack.to_send > made;
        while self.out_stack.to_send > made {
            let resp = self.out_stack.send_but(&self.out, self.trace_id, made);
            if !resp.is_cont() {
                // The sink waits: the atoms left are committed from the
                // stack at the flush, as any resolution would be, before
                // the packet's elements are sent.
                self.held_keep = made;
                self.curr_spec_depth -= num_req - atoms.num as i64;
                self.stack.push_back(P0Elem {
                    atoms,
                    ..P0Elem::new(P0Kind::Atom, true, self.index_curr_pkt)
                });
                return Err(resp);
            }
        }
        Ok(sent)
    }

    /// The rest of [`atoms_now`](Self::atoms_now): commits what is left of
    /// the packet's atoms (`pkt_atoms`, `num_req` of them), then holds the
    /// elements or sends them.
    #[inline(always)]
    pub(super) fn atoms_finish(
        &mut self,
        pkt_atoms: Atoms,
        mut atoms: Atoms,
        num_req: i64,
        continues: bool,
    ) -> DatapathResp {
        let index = self.index_curr_pkt;
        match self.commit_atom_run(&mut atoms, index) {
            Ok(()) => self.curr_spec_depth -= num_req - self.res.commit,
            Err(Fault::Fatal(_)) => {
                // Left as the stack would be: the packet's element, whole.
                self.stack.push_back(P0Elem {
                    atoms: pkt_atoms,
                    ..P0Elem::new(P0Kind::Atom, true, index)
                });
                return DatapathResp::FatalInvalidData;
            }
            // The decoder was reset: the packet goes on from there, as
            // process_packet takes an atom packet when not synchronised.
            Err(Fault::Resync) => return self.send_no_sync(),
        }
        if continues && self.out_stack.to_send < HELD_MAX && self.res.commit == 0 {
            self.state = State::DecodePackets;
            self.in_atom_run = true;
            return DatapathResp::Cont;
        }
        self.send_all()
    }

    /// What resolve_elements does after atoms committed on arrival: send,
    /// then decode on.
    pub(super) fn send_all(&mut self) -> DatapathResp {
        while self.out_stack.to_send > 0 {
            let resp = self.out_stack.send(&self.out, self.trace_id);
            if !resp.is_cont() {
                return resp;
            }
        }
        self.state = State::DecodePackets;
        DatapathResp::Cont
    }

    /// Atom packets given as their header bytes (`run[i]` at `index + i`),
    /// and the address packets `addrs` among them, each taken as
    /// [`on_packet`](PacketDecoder::on_packet) would take it; stops before
    /// a packet that would not be committed on arrival, which the
    /// processor then builds and sends.
    pub(super) fn atom_bytes(&mut self, index: TrcIndex, run: &[u8], addrs: &[RunAddr]) -> (DatapathResp, usize) {
        let mut i = 0;
        let mut k = 0;
        while i < run.len() {
            let atoms = self.atom_table[run[i] as usize];
            if atoms.num == 0 {
                match addrs.get(k) {
                    Some(a) if a.index == index + i as u64 && self.address_before_atoms(a) => {
                        k += 1;
                        i += usize::from(a.len);
                        continue;
                    }
                    _ => break,
                }
            }
            if !self.atoms_commit_now() {
                break;
            }
            self.index_curr_pkt = index + i as u64;
            if !std::mem::take(&mut self.in_atom_run) {
                self.sync_memory();
            }
            let from = i;
            if let Some(resp) = self.atom_bytes_fast(index, run, &mut i, addrs, &mut k) {
                if !resp.is_cont() {
                    return (resp, i);
                }
                continue;
            }
            if i > from {
                continue;
            }
            let resp = self.atoms_now(atoms, i + 1 < run.len());
            i += 1;
            if !resp.is_cont() {
                return (resp, i);
            }
        }
        (DatapathResp::Cont, i)
    }

    /// The fused path of a run of atom packets, from `run[*i]`: the
    /// packet's header byte straight to the remembered blocks its atoms
    /// walk, and on through the packets after it with the walk's state in
    /// locals, while every atom is the fast path's (see
    /// [`commit_atoms_fast`](Self::commit_atoms_fast)). Leaves the decoder
    /// as [`atoms_now`](Self::atoms_now) would for each packet taken.
    /// Returns `None` with `*i` at a packet that cannot start here
    /// (nothing of it done: the caller takes it the general way), or the
    /// response of the packet it ended with (sent, or finished the general
    /// way when an atom of it missed), `*i` past it.
    #[inline(always)]
    pub(super) fn atom_bytes_fast(
        &mut self,
        index: TrcIndex,
        run: &[u8],
        i: &mut usize,
        addrs: &[RunAddr],
        k: &mut usize,
    ) -> Option<DatapathResp> {
        if !self.fast_ok || self.need_ctxt {
            return None;
        }
        let carried = match self.carried {
            Some(c) => c,
            None => {
                let c = self.instr_dec.borrow().carried_state();
                self.carried = Some(c);
                c
            }
        };
        if carried != 0 {
            return None;
        }
        // What atoms_now does first; done again harmlessly if the packet
        // goes the general way.
        let started_empty = self.out_stack.to_send == 0;
        if started_empty {
            self.out_stack.reset();
        }
        self.commit_addresses();
        if self.need_addr || self.ret_stack.pop_pending() {
            return None;
        }
        self.check_memory();
        // The walk commits the run's addresses when the general path
        // would commit them the same way.
        let run_addrs = RunAddrs {
            list: if self.elem_pending_addr { &[] } else { addrs },
            isa: [self.calc_isa(self.is_64bit, 0), self.calc_isa(self.is_64bit, 1)],
        };
        let out = &mut self.out_stack;
        let first = if out.to_send > 0 { out.curr + 1 } else { out.curr };
        // Slots the walk may fill: up to HELD_MAX, and past it the rest of
        // the packet that reaches it.
        let end = first + HELD_MAX + 32;
        out.reserve(end);
        out.fill_context(first, end);
        let blocks = self.code.waypoint_blocks(self.space)?;
        let table = &self.atom_table;
        let mut walk = AtomWalk {
            addr: self.instr.instr_addr,
            isa: self.instr.isa,
            last: None,
            need_addr: false,
        };
        let mut at = RunCursor {
            i: *i,
            slot: first,
            addr: *k,
        };

        // The packet that stopped the run: its atoms, and how many of them
        // were committed.
        let stopped = walk_atom_packets(
            &blocks,
            table,
            run,
            index,
            &mut out.elems[..end],
            (first + HELD_MAX).saturating_sub(out.to_send),
            &mut self.ret_stack,
            &mut walk,
            &run_addrs,
            &mut at,
        );
        if at.i > *i {
            // Where the last packet taken starts.
            self.index_curr_pkt = index + (at.i - 1) as u64;
            if at.addr > *k
                && let Some(a) = addrs.get(at.addr - 1)
            {
                self.last_is = a.is;
                if a.index + u64::from(a.len) == index + at.i as u64 {
                    self.index_curr_pkt = a.index;
                }
            }
        }
        *i = at.i;
        *k = at.addr;
        let slot = at.slot;
        let AtomWalk {
            addr,
            isa,
            last,
            need_addr,
        } = walk;
        // Written back as commit_atoms_fast leaves them.
        let made = slot - first;
        if let Some(a) = last {
            out.curr = slot - 1;
            out.to_send += made;
            self.instr = *a;
            self.instr.instr_addr = addr;
            self.instr.isa = isa;
            self.need_addr = need_addr;
        }
        if let Some((atoms, m)) = stopped {
            // The rest of this packet the general way, from where
            // atoms_now is after its first fast attempt.
            let num_req = atoms.num as i64;
            let left = Atoms {
                en_bits: atoms.en_bits >> m,
                num: atoms.num - m,
            };
            self.index_curr_pkt = index + *i as u64;
            *i += 1;
            self.curr_spec_depth += num_req;
            self.res.commit = num_req - m as i64;
            self.state = State::ResolveElements;
            self.no_sync_unreported = false;
            // A packet started with nothing held goes straight on; one
            // after held elements sends them first.
            let first_of_call = made == m as usize;
            let mut sent = false;
            if !(started_empty && first_of_call) {
                match self.send_held(left, num_req, m as usize) {
                    Err(resp) => return Some(resp),
                    Ok(s) => sent = s,
                }
            }
            return Some(self.atoms_finish(atoms, left, num_req, *i < run.len() && !sent));
        }
        if made == 0 {
            return None;
        }
        self.no_sync_unreported = false;
        if *i < run.len() && self.out_stack.to_send < HELD_MAX {
            // Held for the next packet, which starts here again.
            self.in_atom_run = true;
            return None;
        }
        self.state = State::ResolveElements;
        Some(self.send_all())
    }

    /// Commits the oldest atoms of `atoms` that need nothing but a
    /// remembered block ending at a waypoint (within the range limit), no
    /// return-stack pop, and no check that could fail: the common case,
    /// without the general walk's calls and copies. Returns whether it
    /// committed any; the caller takes the next atom the general way. It
    /// leaves the state [`process_atom`](Self::process_atom) would.
    #[inline(always)]
    pub(super) fn commit_atoms_fast(&mut self, atoms: &mut Atoms, index: TrcIndex) -> bool {
        if !self.fast_ok || self.need_ctxt || self.need_addr || self.ret_stack.pop_pending() {
            return false;
        }
        let carried = match self.carried {
            Some(c) => c,
            None => {
                let c = self.instr_dec.borrow().carried_state();
                self.carried = Some(c);
                c
            }
        };
        if carried != 0 {
            return false;
        }
        self.check_memory();
        // Output slots as OutStack::add hands them out: the current one if
        // nothing waits to be sent, else the ones after it, one per atom
        // this call may commit. Each new range carries the PE context of
        // the element before it, which no range changes; its instruction
        // set is the range's own.
        let n = (atoms.num as i64).min(self.res.commit).max(0) as usize;
        let out = &mut self.out_stack;
        let first = if out.to_send > 0 { out.curr + 1 } else { out.curr };
        out.reserve(first + n);
        out.fill_context(first, first + n);
        // Blocks within the range limit, and for ETE not ending in an ERET
        // (see WalkOptions).
        let Some(blocks) = self.code.waypoint_blocks(self.space) else {
            return false;
        };
        let mut walk = AtomWalk {
            addr: self.instr.instr_addr,
            isa: self.instr.isa,
            last: None,
            need_addr: false,
        };
        let made = walk_atoms_inline(
            &blocks,
            &mut out.elems[first..first + n],
            &mut self.ret_stack,
            &mut walk,
            atoms.en_bits,
            index,
        );
        let AtomWalk {
            addr,
            isa,
            last,
            need_addr,
        } = walk;
        let Some(a) = last else { return false };
        self.out_stack.curr = first + made - 1;
        self.out_stack.to_send += made;
        self.instr = *a;
        self.instr.instr_addr = addr;
        self.instr.isa = isa;
        *atoms = Atoms {
            en_bits: atoms.en_bits >> made,
            num: atoms.num - made as u8,
        };
        self.res.commit -= made as i64;
        // `next_range_check` is only kept for the range-continuity check,
        // which leaves all atoms to the general path.
        self.need_addr = need_addr;
        true
    }
}
