//! The P0 elements that are not atoms: exceptions, Q elements (counted
//! instructions with no waypoint) and source addresses, each followed
//! through the program to where the trace says it went.

use super::*;

impl EtmV4Decoder {
    /// After an error that reset the decoder while an exception was being
    /// committed (its address missing), OpenCSD still counts the exception
    /// as committed, which leaves its count of elements to commit at -1:
    /// it commits once more at once, finds no element and logs a second
    /// error, at index 0, before the `NO_SYNC` (its speculation depth is
    /// left at 1).
    #[cold]
    fn commit_again_after_reset(&mut self, r: Step) -> Step {
        if r != Err(Fault::Resync) {
            return r;
        }
        let r = self.seq_err(ErrCode::CommitPktOverrun, Some(0), "Not enough elements to commit");
        self.curr_spec_depth = 1;
        r
    }

    pub(super) fn process_exception(&mut self, excep: &P0Elem) -> Step {
        let excep_index = excep.index;
        let branch_target = excep.prev_same;
        // The exception is followed by an optional context and its
        // preferred return address.
        let mut idx = 1;
        let mut ctxt: Option<P0Elem> = None;
        if let Some(e) = self.stack.get(idx)
            && e.kind == P0Kind::Ctxt
        {
            ctxt = Some(*e);
            idx += 1;
        }
        let addr = match self.stack.get(idx) {
            Some(e) if e.kind == P0Kind::Addr => *e,
            _ => {
                let i = Some(self.index_curr_pkt);
                let r = self.seq_err(ErrCode::BadPacketSeq, i, "Address missing in exception packet.");
                return self.commit_again_after_reset(r);
            }
        };
        let used = idx;
        let ret_addr = addr.addr;
        if branch_target {
            let b64 = match &ctxt {
                Some(c) => c.context.sf,
                None => self.instr.isa == Isa::Aarch64,
            };
            self.instr.instr_addr = ret_addr;
            self.instr.isa = self.calc_isa(b64, addr.addr_is);
            self.need_addr = false;
        }

        self.out_stack.add(excep_index);
        if let Some(c) = &ctxt {
            self.update_context(c);
            self.out_stack.add(excep_index);
        }

        let tail_chain = self.m_profile && ret_addr == 0xFFFF_FFFE;
        let mut wp = WpResult::NotFound;
        if self.instr.instr_addr < ret_addr && !tail_chain {
            let mut range_out = false;
            let (range, w) = match self.trace_to_waypoint(Some(ret_addr)) {
                Ok(v) => v,
                Err(ErrCode::UnsupportedIsa) => {
                    self.need_addr = true;
                    self.need_ctxt = true;
                    self.log(
                        Severity::Warn,
                        ErrCode::UnsupportedIsa,
                        Some(excep_index),
                        "Warning: unsupported instruction set processing exception packet.",
                    );
                    return Ok(());
                }
                // Unlike an atom's, an exception's walk error (a range
                // limit overrun, a bad opcode...) ends the decode, as
                // OpenCSD's does.
                Err(code) => {
                    self.log(
                        Severity::Error,
                        code,
                        Some(excep_index),
                        "Error processing exception packet.",
                    );
                    return Err(Fault::Fatal(code));
                }
            };
            wp = w;
            if wp == WpResult::Found {
                self.set_range(range, true);
                range_out = true;
            } else {
                self.need_addr = true;
                if range.st != range.en {
                    self.set_range(range, true);
                    range_out = true;
                }
            }
            if range_out {
                self.out_stack.add(excep_index);
            }
        }
        if wp == WpResult::Nacc {
            let a = self.instr.instr_addr;
            self.set_nacc(a);
            self.out_stack.add(excep_index);
        }

        let o = self.out_stack.cur();
        o.set_type(ElemType::Exception);
        o.en_addr = ret_addr;
        o.excep_ret_addr = !tail_chain;
        o.excep_ret_addr_br_tgt = branch_target;
        o.exception_number = excep.excep_num as u32;
        // The exception interrupts any T32 IT block: the handler's
        // instructions are not in it (as OpenCSD clears it here).
        self.instr_dec.borrow_mut().clear_carried_state();

        // Drop the context and address elements used (the exception itself
        // is removed by the caller).
        for _ in 0..used {
            self.stack.remove(1);
        }
        Ok(())
    }

    pub(super) fn process_q(&mut self, q: &P0Elem) -> Step {
        self.carried = None;
        let (q_addr, q_is) = if q.q_has_addr {
            (q.addr, q.addr_is)
        } else {
            let mut idx = 1;
            let mut ctxt = None;
            if let Some(e) = self.stack.get(idx)
                && e.kind == P0Kind::Ctxt
            {
                ctxt = Some(*e);
                idx += 1;
            }
            let addr = match self.stack.get(idx) {
                Some(e) if e.kind == P0Kind::Addr => *e,
                _ => {
                    let i = Some(q.index);
                    return self.seq_err(ErrCode::BadPacketSeq, i, "Address missing in Q packet.");
                }
            };
            for _ in 0..idx {
                self.stack.remove(1);
            }
            if let Some(c) = ctxt {
                // The context is processed after the Q element.
                self.stack.insert(1, c);
            }
            (addr.addr, addr.addr_is)
        };

        self.out_stack.add(q.index);
        let mut range = Range {
            st: self.instr.instr_addr,
            en: self.instr.instr_addr,
            num: 0,
        };
        let mut is_branch = false;
        let space = self.mem_space();
        if let Some(mem) = self.mem.clone() {
            let mut mem = mem.borrow_mut();
            let dec = self.instr_dec.clone();
            let mut dec = dec.borrow_mut();
            for _ in 0..q.q_count {
                let Some(op) = self.code.read4(&mut *mem, self.instr.instr_addr, self.trace_id, space) else {
                    break;
                };
                self.instr.opcode = op;
                if dec.decode_instruction(&mut self.instr).is_err() {
                    break;
                }
                self.instr.instr_addr = self.instr.instr_addr.wrapping_add(self.instr.instr_size as u64);
                range.num += 1;
                is_branch = matches!(self.instr.instr_type, InstrType::Branch | InstrType::BranchIndirect);
                if is_branch {
                    break;
                }
            }
        }
        let mut incomplete = true;
        if q.q_count > 0 && range.num == q.q_count && (self.instr.instr_addr == q_addr || is_branch) {
            incomplete = false;
            range.en = self.instr.instr_addr;
            self.set_range(range, true);
        }
        if incomplete {
            let isa = self.calc_isa(self.is_64bit, q_is);
            let o = self.out_stack.cur();
            o.set_type(ElemType::IRangeNoPath);
            o.st_addr = range.st;
            o.en_addr = q_addr;
            o.num_instr_range = q.q_count;
            o.isa = isa;
        }
        self.set_instr_addr_isa(q_addr, q_is);
        self.need_addr = false;
        Ok(())
    }

    /// ETE source address: the address of the last instruction of a range.
    pub(super) fn process_source_address(&mut self, e: &P0Elem) -> Step {
        self.carried = None;
        let src = e.addr;
        let curr = self.instr.instr_addr;
        let space = self.mem_space();
        let Some(mem) = self.mem.clone() else {
            self.out_stack.add_type(e.index, ElemType::AddrNacc);
            self.set_nacc(src);
            return Ok(());
        };
        // The instruction set is the current one: the packet's IS bit is
        // not used (as in OpenCSD).
        let opcode = self.code.read4(&mut *mem.borrow_mut(), src, self.trace_id, space);
        let Some(op) = opcode else {
            self.out_stack.add_type(e.index, ElemType::AddrNacc);
            self.set_nacc(src);
            return Ok(());
        };
        self.instr.opcode = op;
        self.instr.instr_addr = src;
        if let Err(code) = self.instr_dec.clone().borrow_mut().decode_instruction(&mut self.instr) {
            return self.seq_err(
                code,
                Some(e.index),
                "Instruction decode error processing source address packet.",
            );
        }
        self.instr.instr_addr = src.wrapping_add(self.instr.instr_size as u64);
        let mut range = Range {
            st: src,
            en: self.instr.instr_addr,
            num: 1,
        };
        if !self.need_addr && curr <= src {
            range.st = curr;
        }
        self.need_addr = false;
        let size = self.instr.instr_size as u64;
        // The range may end at the very top of the address space, where its
        // end address wraps to 0: lengths and bounds are taken as if the
        // end were 2^64 (u128), never by subtracting wrapped addresses.
        let end = src as u128 + size as u128;
        let span = end - range.st as u128;
        if span > size as u128 {
            if self.instr.isa != Isa::Thumb2 && !self.options.src_addr_n {
                range.num = (span / 4) as u32;
            } else {
                // Count (and with src_addr_n, split on) the instructions.
                let mut info = self.instr;
                info.instr_addr = range.st;
                range.num = 0;
                let mut m = mem.borrow_mut();
                let dec = self.instr_dec.clone();
                let mut dec = dec.borrow_mut();
                while (info.instr_addr as u128) < end {
                    let Some(op) = self.code.read4(&mut *m, info.instr_addr, self.trace_id, space) else {
                        drop(m);
                        drop(dec);
                        self.out_stack.add_type(e.index, ElemType::AddrNacc);
                        self.set_nacc(src);
                        range = Range {
                            st: src,
                            en: self.instr.instr_addr,
                            num: 1,
                        };
                        break;
                    };
                    info.opcode = op;
                    if dec.decode_instruction(&mut info).is_err() {
                        break;
                    }
                    let next = info.instr_addr as u128 + info.instr_size as u128;
                    info.instr_addr = next as u64;
                    range.num += 1;
                    if next >= end {
                        break;
                    }
                    if self.options.src_addr_n && info.instr_type != InstrType::Other {
                        let mid = Range {
                            st: range.st,
                            en: info.instr_addr,
                            num: range.num,
                        };
                        self.out_stack.add(e.index);
                        let saved = self.instr;
                        self.instr = info;
                        self.set_range(mid, false);
                        self.instr = saved;
                        range.st = mid.en;
                        range.num = 0;
                    }
                }
            }
        }
        let next = self.instr.instr_addr;
        match self.instr.instr_type {
            InstrType::Branch => {
                if self.instr.is_link {
                    self.ret_stack.push(next, self.instr.isa);
                }
                self.instr.instr_addr = self.instr.branch_addr;
            }
            InstrType::BranchIndirect => {
                self.need_addr = true;
                if self.instr.is_link {
                    self.ret_stack.push(next, self.instr.isa);
                }
                self.ret_stack.set_pop_pending();
            }
            _ => {}
        }
        // The range is reported in the instruction set that follows it.
        self.instr.isa = self.instr.next_isa;
        self.out_stack.add(e.index);
        self.set_range(range, true);
        Ok(())
    }
}
