//! Message and error logging.
//!
//! [`MsgLogger`] writes text to any of stdout, stderr and a file, as
//! OpenCSD's message logger does; printers and the lister write through it.
//! [`ErrorLogger`] names the components that raise errors and writes each
//! error as `NAME : 0x0019 (OCSD_ERR_...) [...]; TrcIdx=..; CS ID=..; msg`,
//! without a line break, exactly as OpenCSD's default error logger does.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::datapath::SerialKey;
use crate::errcode::{ErrCode, Severity, TraceError};
use crate::text::TextBuf;

use crate::shared::Shared;

/// Where text output goes.
///
/// Text is gathered in one large buffer and written
/// out when it holds `MsgLogger::CHUNK` bytes or is flushed, so printers
/// write their lines straight into it, with no buffer or system call of
/// their own per line.
#[derive(Default)]
pub struct MsgLogger {
    dest: Destinations,
    /// Takes the text instead of `text` when set: see
    /// [`set_batcher`](Self::set_batcher).
    batcher: Option<Box<dyn TextBatcher>>,
    /// Keep everything written in memory (tests, embedding).
    capture: bool,
    /// Text not yet written out; with a capture, everything captured.
    text: TextBuf,
    /// Bytes of `text` already written out (only with a capture: without,
    /// written text is dropped).
    sent: usize,
    /// With a capture: the tree position each piece of text was written
    /// at (parallel decode restores the serial order from it).
    keyed: Option<(Shared<SerialKey>, Vec<TextMark>)>,
}

/// Where a piece of captured text starts: the tree position it was
/// written at, and its byte offset in the capture.
pub(crate) type TextMark = (SerialKey, usize);

/// Where a logger's text goes out: any of standard output, standard
/// error, a file and a writer of the user's.
#[derive(Default)]
pub struct Destinations {
    stdout: Option<io::Stdout>,
    stderr: bool,
    file: Option<File>,
    writer: Option<Box<dyn Write + Send>>,
}

impl Destinations {
    /// Writes `b` to each destination.
    pub(crate) fn write_all(&mut self, b: &[u8]) {
        if b.is_empty() {
            return;
        }
        if let Some(o) = self.stdout.as_mut() {
            let _ = o.lock().write_all(b);
        }
        if self.stderr {
            let _ = io::stderr().write_all(b);
        }
        if let Some(f) = self.file.as_mut() {
            let _ = f.write_all(b);
        }
        if let Some(w) = self.writer.as_mut() {
            let _ = w.write_all(b);
        }
    }

    /// Flushes the destinations that buffer.
    pub(crate) fn flush(&mut self) {
        if let Some(o) = self.stdout.as_mut() {
            let _ = o.flush();
        }
        if let Some(f) = self.file.as_mut() {
            let _ = f.flush();
        }
        if let Some(w) = self.writer.as_mut() {
            let _ = w.flush();
        }
    }
}

/// Something that takes a logger's text in its place and puts it out to
/// the logger's destinations itself (a listing formatted on other
/// threads, in `format_pool`). Installed with
/// [`MsgLogger::set_batcher`].
pub trait TextBatcher: Send {
    /// Where the next text goes (the buffer `MsgLogger` writes into).
    fn text(&mut self) -> &mut TextBuf;
    /// Returns once everything taken so far is written out and flushed.
    fn flush(&mut self);
    /// Writes out everything, stops and gives the destinations back.
    fn finish(&mut self) -> Option<Destinations>;
    /// The batcher, for its owner to reach its own methods.
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any;
}

impl MsgLogger {
    /// Text gathered before it is written out.
    pub(crate) const CHUNK: usize = 1 << 16;

    /// A logger that writes nowhere.
    pub fn none() -> Self {
        MsgLogger::default()
    }

    /// A logger that keeps everything in memory; see [`MsgLogger::captured`].
    pub fn capture() -> Self {
        let mut l = MsgLogger::default();
        l.capture = true;
        l
    }

    /// A capturing logger that also notes, for each piece of text, the
    /// tree position (`position`) it was written at; see
    /// [`take_keyed`](Self::take_keyed).
    pub(crate) fn capture_keyed(position: Shared<SerialKey>) -> Self {
        let mut l = MsgLogger::capture();
        l.keyed = Some((position, Vec::new()));
        l
    }

    /// Takes the captured text and where each position's text starts in it.
    pub(crate) fn take_keyed(&mut self) -> (String, Vec<TextMark>) {
        let marks = self.keyed.as_mut().map(|(_, m)| std::mem::take(m)).unwrap_or_default();
        (self.take_captured(), marks)
    }

    /// Writes to standard output when `on`.
    pub fn set_stdout(&mut self, on: bool) {
        self.dest.stdout = on.then(io::stdout);
        self.make_room();
    }

    /// Writes to standard error when `on`.
    pub fn set_stderr(&mut self, on: bool) {
        self.dest.stderr = on;
        self.make_room();
    }

    /// Writes to `path` (created or truncated).
    pub fn set_file(&mut self, path: &Path) -> io::Result<()> {
        self.dest.file = Some(File::create(path)?);
        self.make_room();
        Ok(())
    }

    /// Writes to `writer` too (None: no longer), in pieces of up to about
    /// a chunk (64 KiB) as the text is made; a printer's line is never
    /// split between two pieces. Its errors are not reported here: a
    /// writer that must report them keeps them for its owner.
    pub fn set_writer(&mut self, writer: Option<Box<dyn Write + Send>>) {
        self.dest.writer = writer;
        self.make_room();
    }

    /// Sizes the buffer for the first lines. It grows (doubling) to a
    /// chunk and the line that ends it only if that much is written: a
    /// short run (a few header lines) does not clear 68 KB it never uses.
    fn make_room(&mut self) {
        self.text.reserve(4096);
    }

    /// Hands the destinations to a batcher made by `make`, which takes
    /// all text from now on, until [`end_batcher`](Self::end_batcher).
    /// Refused (false, `make` not called) on a capturing logger or one
    /// with a batcher already.
    pub fn set_batcher(&mut self, make: impl FnOnce(Destinations) -> Box<dyn TextBatcher>) -> bool {
        if self.capture || self.batcher.is_some() {
            return false;
        }
        self.write_out();
        self.batcher = Some(make(std::mem::take(&mut self.dest)));
        true
    }

    /// Stops the batcher, if any, once it has written everything, and
    /// takes the destinations back.
    pub fn end_batcher(&mut self) {
        if let Some(mut b) = self.batcher.take()
            && let Some(d) = b.finish()
        {
            self.dest = d;
        }
    }

    /// The batcher, while one is set.
    pub(crate) fn batcher_mut(&mut self) -> Option<&mut (dyn TextBatcher + 'static)> {
        self.batcher.as_deref_mut()
    }

    /// The buffer to append text to: whole lines, written out in order
    /// with everything else written to this logger. Writing more than a
    /// chunk before calling this or [`log_msg`](Self::log_msg) again only
    /// grows the buffer.
    #[inline]
    pub(crate) fn text(&mut self) -> &mut TextBuf {
        if self.batcher.is_some() {
            return self.batched_text();
        }
        if self.text.len() - self.sent >= Self::CHUNK {
            self.write_out();
        }
        if self.keyed.is_some() {
            self.mark();
        }
        &mut self.text
    }

    /// [`text`](Self::text) with a batcher.
    fn batched_text(&mut self) -> &mut TextBuf {
        match self.batcher.as_mut() {
            Some(b) => b.text(),
            None => &mut self.text,
        }
    }

    /// Notes where the text of a new tree position starts.
    #[cold]
    fn mark(&mut self) {
        if let Some((pos, marks)) = self.keyed.as_mut() {
            let key = *pos.borrow();
            if marks.last().is_none_or(|m| m.0 != key) {
                marks.push((key, self.text.len()));
            }
        }
    }

    /// Appends text (no line break is added).
    pub fn log_msg(&mut self, msg: &str) {
        self.text().put_str(msg);
    }

    /// Writes the buffered text out to the destinations.
    #[inline(never)]
    fn write_out(&mut self) {
        self.dest.write_all(&self.text.as_bytes()[self.sent..]);
        if self.capture {
            self.sent = self.text.len();
        } else {
            self.text.clear();
        }
    }

    /// Text captured so far (empty unless made with [`MsgLogger::capture`]).
    pub fn captured(&self) -> &str {
        if self.capture { self.text.as_str() } else { "" }
    }

    /// Takes the captured text, leaving the capture empty.
    pub fn take_captured(&mut self) -> String {
        if !self.capture {
            return String::new();
        }
        self.write_out();
        let s = self.text.as_str().to_string();
        self.text.clear();
        self.sent = 0;
        s
    }

    /// Writes out buffered text and flushes the destinations.
    pub fn flush(&mut self) {
        if let Some(b) = self.batcher.as_mut() {
            b.flush();
            return;
        }
        self.write_out();
        self.dest.flush();
    }
}

impl Drop for MsgLogger {
    fn drop(&mut self) {
        self.end_batcher();
        self.flush();
    }
}

/// Handle of a component registered with an [`ErrorLogger`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ErrSource(usize);

/// Collects errors from the components of a tree and prints them.
pub struct ErrorLogger {
    names: Vec<String>,
    verbosity: Severity,
    out: Option<Shared<MsgLogger>>,
    last: Option<TraceError>,
    count: usize,
    line_breaks: bool,
    /// The latest error a link counted without logging, and whether it is
    /// newer than `last`: a fatal error's reason even when OpenCSD's
    /// listing would not show it.
    unlogged: Option<TraceError>,
    unlogged_newer: bool,
}

impl Default for ErrorLogger {
    fn default() -> Self {
        ErrorLogger {
            names: Vec::new(),
            verbosity: Severity::Info,
            out: None,
            last: None,
            unlogged: None,
            unlogged_newer: false,
            count: 0,
            line_breaks: false,
        }
    }
}

impl ErrorLogger {
    /// An error logger keeping messages up to `verbosity` and writing them to `out`.
    pub fn new(verbosity: Severity, out: Option<Shared<MsgLogger>>) -> Self {
        ErrorLogger {
            verbosity,
            out,
            ..Default::default()
        }
    }

    /// Sets where logged errors are written (`None`: only to the `log` crate).
    pub fn set_output(&mut self, out: Option<Shared<MsgLogger>>) {
        self.out = out;
    }

    /// Ends each message written with a line break when `on`. OpenCSD's
    /// logger writes none (a message runs on into the text written after
    /// it); a program that shows each message on its own line, as perf's
    /// dump does, turns this on.
    pub fn set_line_breaks(&mut self, on: bool) {
        self.line_breaks = on;
    }

    /// Registers a component by name (e.g. `DCD_ETMV4_0016`).
    pub(crate) fn register_source(&mut self, name: impl Into<String>) -> ErrSource {
        self.names.push(name.into());
        ErrSource(self.names.len() - 1)
    }

    fn name(&self, src: ErrSource) -> &str {
        self.names.get(src.0).map(String::as_str).unwrap_or("unknown")
    }

    /// Logs an error raised by `src`.
    pub(crate) fn log_error(&mut self, src: ErrSource, err: &TraceError) {
        self.count += 1;
        if err.severity <= self.verbosity
            && err.severity != Severity::None
            && let Some(out) = &self.out
        {
            let mut s = String::with_capacity(160);
            s.push_str(self.name(src));
            s.push_str(" : ");
            err.write_details(&mut s);
            if self.line_breaks {
                s.push('\n');
            }
            out.borrow_mut().log_msg(&s);
        }
        log::debug!("{} : {}", self.name(src), err);
        self.last = Some(err.clone());
        self.unlogged_newer = false;
    }

    /// Keeps an error a link counted without logging (see
    /// [`ErrLink::unlogged`]) as the latest reason, printing nothing.
    fn note_unlogged(&mut self, err: &TraceError) {
        // The message's buffer is reused: a damaged trace can raise one
        // of these per packet.
        match &mut self.unlogged {
            Some(u) => {
                u.severity = err.severity;
                u.code = err.code;
                u.index = err.index;
                u.trace_id = err.trace_id;
                u.message.clear();
                u.message.push_str(&err.message);
            }
            None => self.unlogged = Some(err.clone()),
        }
        self.unlogged_newer = true;
    }

    /// Logs a message at a severity.
    pub(crate) fn log_message(&mut self, src: ErrSource, sev: Severity, msg: &str) {
        if sev <= self.verbosity
            && let Some(out) = &self.out
        {
            let mut line = format!("{} : {}", self.name(src), msg);
            if self.line_breaks {
                line.push('\n');
            }
            out.borrow_mut().log_msg(&line);
        }
    }

    /// The most recent error logged (what OpenCSD's logger calls its last
    /// error, and its lister prints after a fatal error).
    pub fn last_error(&self) -> Option<&TraceError> {
        self.last.as_ref()
    }

    /// The most recent error, also one that was not logged: in full
    /// decode a packet processor's errors are counted, not logged (as in
    /// OpenCSD), yet one of them (`Zero length data block`) can be what
    /// stopped the data path. The reason to give for a fatal response.
    pub fn last_reason(&self) -> Option<&TraceError> {
        if self.unlogged_newer {
            self.unlogged.as_ref()
        } else {
            self.last.as_ref()
        }
    }

    /// How many errors were logged.
    pub fn error_count(&self) -> usize {
        self.count
    }
}

/// A component's link to the tree's error logger.
#[derive(Clone)]
pub struct ErrLink {
    logger: Shared<ErrorLogger>,
    src: ErrSource,
    /// Packet errors logged through this link: (bad headers, bad sequences).
    counts: Arc<[AtomicU64; 2]>,
    /// Errors are counted but not logged (see [`ErrLink::unlogged`]).
    unlogged: bool,
}

impl ErrLink {
    /// Registers a component called `name` with `logger`.
    pub fn new(logger: &Shared<ErrorLogger>, name: impl Into<String>) -> Self {
        let src = logger.borrow_mut().register_source(name);
        ErrLink {
            logger: logger.clone(),
            src,
            counts: Arc::default(),
            unlogged: false,
        }
    }

    /// This link counting packet errors without logging them or their
    /// messages: OpenCSD attaches the tree's error logger to the decoder
    /// alone when a packet processor feeds one, so in full decode the
    /// processor's errors are neither printed nor the last error.
    pub(crate) fn unlogged(mut self) -> Self {
        self.unlogged = true;
        self
    }

    /// Logs an error raised by this component (and counts packet errors).
    pub fn log(&self, err: &TraceError) {
        match err.code {
            ErrCode::InvalidPcktHdr => self.counts[0].fetch_add(1, Ordering::Relaxed),
            ErrCode::BadPacketSeq => self.counts[1].fetch_add(1, Ordering::Relaxed),
            _ => 0,
        };
        if self.unlogged {
            self.logger.borrow_mut().note_unlogged(err);
        } else {
            self.logger.borrow_mut().log_error(self.src, err);
        }
    }

    /// Keeps an error as the latest reason without logging it (see
    /// [`ErrorLogger::last_reason`]).
    pub(crate) fn note(&self, err: &TraceError) {
        self.logger.borrow_mut().note_unlogged(err);
    }

    /// Packet errors logged so far: (invalid headers, bad sequences).
    pub(crate) fn packet_error_counts(&self) -> (u64, u64) {
        (
            self.counts[0].load(Ordering::Relaxed),
            self.counts[1].load(Ordering::Relaxed),
        )
    }

    /// Logs a message from this component at severity `sev`.
    pub(crate) fn message(&self, sev: Severity, msg: &str) {
        if self.unlogged {
            return;
        }
        self.logger.borrow_mut().log_message(self.src, sev, msg);
    }
}
