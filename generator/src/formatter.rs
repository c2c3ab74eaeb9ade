//! CoreSight frame formatter: the inverse of the deformatter. Interleaves
//! per-ID byte streams into 16-byte frames as a trace funnel and formatter
//! would, optionally with TPIU frame and half-frame syncs. Used to make
//! snapshots and to test the deformatter.

/// Output layout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FormatterConfig {
    /// Insert an FSYNC before every `fsync_every` frames (0: never).
    pub fsync_every: usize,
    /// Insert an HSYNC after every `hsync_every` half-words of frame data
    /// (0: never), within frames.
    pub hsync_every: usize,
}

/// Builds formatted frames from (trace ID, byte) items.
pub struct FrameFormatter {
    cfg: FormatterConfig,
    out: Vec<u8>,
    pending: Vec<(u8, u8)>,
    cur_id: Option<u8>,
    frames: usize,
    halfwords: usize,
}

/// The ID used to pad the last frame (the null trace source).
pub const PAD_ID: u8 = 0x00;

impl FrameFormatter {
    /// A formatter with configuration `cfg` and no frames yet.
    pub fn new(cfg: FormatterConfig) -> Self {
        FrameFormatter {
            cfg,
            out: Vec::new(),
            pending: Vec::new(),
            cur_id: None,
            frames: 0,
            halfwords: 0,
        }
    }

    /// Queues bytes of trace for `id` (1..=0x6f).
    pub fn push(&mut self, id: u8, bytes: &[u8]) {
        assert!((1..0x70).contains(&id), "trace ID 0x{id:x} is reserved");
        // A frame at a time, so that little is queued: a frame takes its
        // bytes from the front of the queue. (Frames are the same however
        // the bytes come: one is made only with 16 items queued, and looks
        // at most one item past the 15 it can hold.)
        for piece in bytes.chunks(16) {
            self.pending.extend(piece.iter().map(|&b| (id, b)));
            while self.pending.len() >= 16 {
                self.emit_frame(false);
            }
        }
    }

    /// Writes out everything queued (padding the last frame) and returns
    /// the formatted bytes.
    pub fn finish(mut self) -> Vec<u8> {
        self.pad();
        self.out
    }

    /// The frames made so far, handed to `w` and forgotten: a long stream
    /// is formatted in bounded memory.
    pub fn write_frames(&mut self, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        w.write_all(&self.out)?;
        self.out.clear();
        Ok(())
    }

    /// [`FrameFormatter::finish`] into `w`, after the frames written by
    /// [`FrameFormatter::write_frames`].
    pub fn finish_into(mut self, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        self.pad();
        w.write_all(&self.out)
    }

    fn pad(&mut self) {
        while !self.pending.is_empty() {
            self.emit_frame(true);
        }
    }

    fn emit_frame(&mut self, pad: bool) {
        let mut f = [0u8; 16];
        let mut aux = 0u8;
        let mut items = std::mem::take(&mut self.pending).into_iter().peekable();
        let mut i = 0;
        while i < 15 {
            let next = items.peek().copied();
            let Some((id, b)) = next.or(if pad { Some((PAD_ID, 0)) } else { None }) else {
                break;
            };
            let real = next.is_some();
            if i == 14 {
                // Last even byte: data for the current ID, or an ID change
                // that takes effect in the next frame.
                if Some(id) == self.cur_id {
                    f[14] = b & 0xfe;
                    aux |= (b & 1) << 7;
                    if real {
                        items.next();
                    }
                } else {
                    f[14] = (id << 1) | 1;
                    self.cur_id = Some(id);
                }
                i += 1;
                continue;
            }
            let pair = i / 2;
            if Some(id) != self.cur_id {
                // New ID here; its first byte follows.
                f[i] = (id << 1) | 1;
                self.cur_id = Some(id);
                f[i + 1] = b;
                if real {
                    items.next();
                }
            } else {
                if real {
                    items.next();
                }
                let after = items.peek().copied().or(if pad { Some((PAD_ID, 0)) } else { None });
                match after {
                    Some((nid, _)) if Some(nid) != self.cur_id => {
                        // ID change at the odd byte: write the new ID here
                        // with the flag set, so the odd byte stays with the
                        // old ID, and the new ID's data starts next pair.
                        f[i] = (nid << 1) | 1;
                        aux |= 1 << pair;
                        f[i + 1] = b;
                        self.cur_id = Some(nid);
                    }
                    Some((_, b2)) => {
                        f[i] = b & 0xfe;
                        aux |= (b & 1) << pair;
                        f[i + 1] = b2;
                        if items.peek().is_some() {
                            items.next();
                        }
                    }
                    None => {
                        // Not padding and nothing follows: cannot happen,
                        // frames are only emitted with 16 items queued.
                        f[i] = b & 0xfe;
                        aux |= (b & 1) << pair;
                    }
                }
            }
            i += 2;
        }
        f[15] = aux;
        self.pending = items.collect();
        if self.cfg.fsync_every > 0 && self.frames.is_multiple_of(self.cfg.fsync_every) {
            self.out.extend_from_slice(&[0xff, 0xff, 0xff, 0x7f]);
        }
        for (n, hw) in f.chunks(2).enumerate() {
            self.out.extend_from_slice(hw);
            self.halfwords += 1;
            // HSYNCs go inside frames only: one right before an FSYNC
            // would put the FSYNC out of frame alignment.
            if n < 7 && self.cfg.hsync_every > 0 && self.halfwords.is_multiple_of(self.cfg.hsync_every) {
                self.out.extend_from_slice(&[0xff, 0x7f]);
            }
        }
        self.frames += 1;
    }
}
