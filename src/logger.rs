//! Message and error logging.
//!
//! [`MsgLogger`] writes text to any of stdout, stderr and a file, as
//! OpenCSD's message logger does; printers and the lister write through it.
//! [`ErrorLogger`] names the components that raise errors and writes each
//! error as `NAME : 0x0019 (OCSD_ERR_...) [...]; TrcIdx=..; CS ID=..; msg`,
//! without a line break, exactly as OpenCSD's default error logger does.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::datapath::SerialKey;
use crate::errcode::{ErrCode, Severity, TraceError};

pub use crate::shared::{Shared, shared};

/// Where text output goes.
#[derive(Default)]
pub struct MsgLogger {
    stdout: Option<BufWriter<io::Stdout>>,
    stderr: bool,
    file: Option<BufWriter<File>>,
    /// Output kept in memory (tests, embedding).
    capture: Option<String>,
    /// With a capture: the tree position each piece of text was written
    /// at (parallel decode restores the serial order from it).
    keyed: Option<(Shared<SerialKey>, Vec<TextMark>)>,
}

/// Where a piece of captured text starts: the tree position it was
/// written at, and its byte offset in the capture.
pub type TextMark = (SerialKey, usize);

impl MsgLogger {
    /// A logger that writes nowhere.
    pub fn none() -> Self {
        MsgLogger::default()
    }

    /// A logger that keeps everything in memory; see [`MsgLogger::captured`].
    pub fn capture() -> Self {
        MsgLogger {
            stdout: None,
            stderr: false,
            file: None,
            capture: Some(String::new()),
            keyed: None,
        }
    }

    /// A capturing logger that also notes, for each piece of text, the
    /// tree position (`position`) it was written at; see
    /// [`take_keyed`](Self::take_keyed).
    pub fn capture_keyed(position: Shared<SerialKey>) -> Self {
        MsgLogger {
            stdout: None,
            stderr: false,
            file: None,
            capture: Some(String::new()),
            keyed: Some((position, Vec::new())),
        }
    }

    /// Takes the captured text and where each position's text starts in it.
    pub fn take_keyed(&mut self) -> (String, Vec<TextMark>) {
        let marks = self.keyed.as_mut().map(|(_, m)| std::mem::take(m)).unwrap_or_default();
        (self.take_captured(), marks)
    }

    /// Writes to standard output (buffered) when `on`.
    pub fn set_stdout(&mut self, on: bool) {
        self.stdout = on.then(|| BufWriter::with_capacity(1 << 16, io::stdout()));
    }

    /// Writes to standard error when `on`.
    pub fn set_stderr(&mut self, on: bool) {
        self.stderr = on;
    }

    /// Writes to `path` (created or truncated).
    pub fn set_file(&mut self, path: &Path) -> io::Result<()> {
        self.file = Some(BufWriter::with_capacity(1 << 16, File::create(path)?));
        Ok(())
    }

    /// Appends text (no line break is added).
    pub fn log_msg(&mut self, msg: &str) {
        if let Some(o) = self.stdout.as_mut() {
            let _ = o.write_all(msg.as_bytes());
        }
        if self.stderr {
            let _ = io::stderr().write_all(msg.as_bytes());
        }
        if let Some(f) = self.file.as_mut() {
            let _ = f.write_all(msg.as_bytes());
        }
        if let Some(c) = self.capture.as_mut() {
            if let Some((pos, marks)) = self.keyed.as_mut() {
                let key = *pos.borrow();
                if marks.last().is_none_or(|m| m.0 != key) {
                    marks.push((key, c.len()));
                }
            }
            c.push_str(msg);
        }
    }

    /// Text captured so far (empty unless made with [`MsgLogger::capture`]).
    pub fn captured(&self) -> &str {
        self.capture.as_deref().unwrap_or("")
    }

    /// Takes the captured text, leaving the capture empty.
    pub fn take_captured(&mut self) -> String {
        self.capture.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Flushes buffered output.
    pub fn flush(&mut self) {
        if let Some(o) = self.stdout.as_mut() {
            let _ = o.flush();
        }
        if let Some(f) = self.file.as_mut() {
            let _ = f.flush();
        }
    }
}

impl Drop for MsgLogger {
    fn drop(&mut self) {
        self.flush();
    }
}

/// Handle of a component registered with an [`ErrorLogger`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrSource(usize);

/// Collects errors from the components of a tree and prints them.
pub struct ErrorLogger {
    names: Vec<String>,
    verbosity: Severity,
    out: Option<Shared<MsgLogger>>,
    last: Option<TraceError>,
    count: usize,
}

impl Default for ErrorLogger {
    fn default() -> Self {
        ErrorLogger {
            names: Vec::new(),
            verbosity: Severity::Info,
            out: None,
            last: None,
            count: 0,
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

    /// Registers a component by name (e.g. `DCD_ETMV4_0016`).
    pub fn register_source(&mut self, name: impl Into<String>) -> ErrSource {
        self.names.push(name.into());
        ErrSource(self.names.len() - 1)
    }

    fn name(&self, src: ErrSource) -> &str {
        self.names.get(src.0).map(String::as_str).unwrap_or("unknown")
    }

    /// Logs an error raised by `src`.
    pub fn log_error(&mut self, src: ErrSource, err: &TraceError) {
        self.count += 1;
        if err.severity <= self.verbosity
            && err.severity != Severity::None
            && let Some(out) = &self.out
        {
            let mut s = String::with_capacity(160);
            s.push_str(self.name(src));
            s.push_str(" : ");
            err.write_details(&mut s);
            out.borrow_mut().log_msg(&s);
        }
        log::debug!("{} : {}", self.name(src), err);
        self.last = Some(err.clone());
    }

    /// Logs a message at a severity.
    pub fn log_message(&mut self, src: ErrSource, sev: Severity, msg: &str) {
        if sev <= self.verbosity
            && let Some(out) = &self.out
        {
            let line = format!("{} : {}", self.name(src), msg);
            out.borrow_mut().log_msg(&line);
        }
    }

    /// The most recent error.
    pub fn last_error(&self) -> Option<&TraceError> {
        self.last.as_ref()
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
    pub fn unlogged(mut self) -> Self {
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
        if !self.unlogged {
            self.logger.borrow_mut().log_error(self.src, err);
        }
    }

    /// Packet errors logged so far: (invalid headers, bad sequences).
    pub fn packet_error_counts(&self) -> (u64, u64) {
        (
            self.counts[0].load(Ordering::Relaxed),
            self.counts[1].load(Ordering::Relaxed),
        )
    }

    /// Logs a message from this component at severity `sev`.
    pub fn message(&self, sev: Severity, msg: &str) {
        if self.unlogged {
            return;
        }
        self.logger.borrow_mut().log_message(self.src, sev, msg);
    }
}
