//! The trace packet lister: lists and decodes the trace in an Arm
//! snapshot, taking OpenCSD's `trc_pkt_lister` options and writing its
//! listing format byte for byte. The `trc_pkt_lister` program is a thin
//! wrapper around [`run`]; `trc_regress` runs it in-process.

use std::fs::File;
use std::io::Read;
use std::path::PathBuf;
use std::time::Instant;

use coresight_decode::datapath::{DatapathOp, DatapathResp, TrcIndex};
use coresight_decode::error::{ErrCode, Severity, TraceError};
use std::sync::Arc;

use coresight_decode::builder::TreeBuilder;
use coresight_decode::decoder::{DecodeMode, DecoderOptions, DecoderRegistry};
use coresight_decode::format_pool::FormatPool;
use coresight_decode::interfaces::{TrcDataIn, TrcGenElemIn};
use coresight_decode::logger::MsgLogger;
use coresight_decode::memory::CacheConfig;
use coresight_decode::parallel::{ParallelOptions, ParallelSink, WorkerSetup, decode_parallel, worth_sharing};
use coresight_decode::printers::{GenElemPrinter, PacketPrinter, RawFramePrinter};
use coresight_decode::shared::{Shared, shared};
use coresight_decode::snapshot::{Snapshot, WarningKind};
use coresight_decode::tree::{DecodeTree, SourceFormat};

/// The log file OpenCSD's lister writes by default.
pub const DEFAULT_LOGFILE: &str = "trc_pkt_lister.ppl";

#[derive(Clone, Default)]
struct Opts {
    ss_dir: Option<String>,
    src_name: Option<String>,
    ids: Vec<u8>,
    multi_session: bool,
    decode: bool,
    decode_only: bool,
    pkt_mon: bool,
    dstream_format: bool,
    tpiu: bool,
    tpiu_hsync: bool,
    raw_packed: bool,
    raw_unpacked: bool,
    stats: bool,
    no_time_print: bool,
    profile: bool,
    test_waits: u32,
    dec: DecoderOptions,
    cache: CacheConfig,
    /// Worker threads for decoding trace IDs in parallel (`-threads`);
    /// 0: one per core.
    threads: usize,
}

struct Lister<'e> {
    out: Shared<MsgLogger>,
    /// Where failures are also reported in plain words (the program's
    /// standard error); `None` in-process.
    echo: Option<&'e dyn Fn(&str)>,
    /// Set when the run failed (exit status 1).
    failed: std::cell::Cell<bool>,
    registry: Arc<DecoderRegistry>,
    /// Makes the registry again on a worker thread; without it decode
    /// stays on this thread.
    make_registry: Option<fn() -> Arc<DecoderRegistry>>,
    opts: Opts,
    env: &'e dyn Fn(&str) -> Option<String>,
}

/// A number as C's `strtol(s, 0, 0)` reads a whole field (`0x` hex,
/// leading `0` octal, decimal, an optional `-`), held wide enough that no
/// value wraps: callers range-check or clamp it.
fn parse_c_number(s: &str) -> Option<i128> {
    let (neg, s) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s),
    };
    let v = coresight_decode::snapshot::parse_number(s)? as i128;
    Some(if neg { -v } else { v })
}

/// A count option: clamped to `0..=max`; text that is not a number is 0,
/// as C's `strtol` reads it.
fn parse_count(s: &str, max: u64) -> u64 {
    parse_c_number(s).unwrap_or(0).clamp(0, max as i128) as u64
}

fn help_text() -> String {
    let mut s = String::new();
    s.push_str("Trace Packet Lister - commands\n\n");
    s.push_str("Snapshot:\n\n");
    s.push_str("-ss_dir <dir>       Set the directory path to a trace snapshot\n");
    s.push_str("-ss_verbose         Verbose output when reading the snapshot\n");
    s.push_str("\nDecode:\n\n");
    s.push_str("-id <n>             Set an ID to list (may be used multiple times) - default if no id set is for all IDs to be printed\n");
    s.push_str("-src_name <name>    List packets from a given snapshot source name (defaults to first source found)\n");
    s.push_str("-multi_session      Decode all buffers listed in the snapshot in turn, with the configuration of the first (ignored with -src_name)\n");
    s.push_str("-dstream_format     Input is DSTREAM framed.\n");
    s.push_str("-tpiu               Input from TPIU - sync by FSYNC.\n");
    s.push_str("-tpiu_hsync         Input from TPIU - sync by FSYNC and HSYNC.\n");
    s.push_str("-decode             Full decode of the packets from the trace snapshot (default is to list undecoded packets only\n");
    s.push_str("-decode_only        Does not list the undecoded packets, just the trace decode.\n");
    s.push_str("-pkt_mon            Packet monitor output: list packets with their raw bytes, no decode.\n");
    s.push_str("-o_raw_packed       Output raw packed trace frames\n");
    s.push_str("-o_raw_unpacked     Output raw unpacked trace data per ID\n");
    s.push_str("-stats              Output packet processing statistics (if available).\n");
    s.push_str("-no_time_print      Do not print the elapsed time at the end of the buffer.\n");
    s.push_str("-src_addr_n         ETE protocol: Split source address ranges on N atoms\n");
    s.push_str("\nConsistency checks:\n\n");
    s.push_str("-aa64_opcode_chk    Check for correct AA64 opcodes (MSW != 0x0000)\n");
    s.push_str("-direct_br_cond     Check for N atoms on unconditional direct branches.\n");
    s.push_str("-strict_br_cond     Check for N atoms on all unconditional branches.\n");
    s.push_str("-range_cont         Check for address consistency between ranges after none taken branches.\n");
    s.push_str("-halt_err           Halt on packet/image errors - default is to reset and attempt to recover.\n");
    s.push_str("\nDevelopment:\n\n");
    s.push_str("-test_waits <N>     Force wait from packet printer for N packets - test the wait/flush mechanisms for the decoder\n");
    s.push_str("-profile            Mute logging output while profiling library performance.\n");
    s.push_str("-threads <N>        Decode trace IDs on N threads (default: one per core; 1: this thread only).\n");
    s.push_str("-macc_cache_disable Switch off caching on memory accessor.\n");
    s.push_str("-macc_cache_p_size <N> Set size of caching pages.\n");
    s.push_str("-macc_cache_p_num <N>  Set number of caching pages.\n");
    s.push_str("\nOutput:\n");
    s.push_str("   Setting any of these options cancels the default output to file & stdout,\n   using _only_ the options supplied.\n\n");
    s.push_str("-logstdout          Output to stdout -> console.\n");
    s.push_str("-logstderr          Output to stderr.\n");
    s.push_str(&format!(
        "-logfile            Output to default file - {DEFAULT_LOGFILE}\n"
    ));
    s.push_str("-logfilename <name> Output to file <name> \n");
    s.push_str("\nEnvironment:\n\n");
    s.push_str("OPENCSD_INSTR_RANGE_LIMIT=<N>       Error if more than N instructions are decoded in one range.\n");
    s.push_str("OPENCSD_ERR_ON_AA64_BAD_OPCODE=1    As -aa64_opcode_chk.\n");
    s.push_str("\nProgram:\n\n");
    s.push_str("-help, --help       Print this help and exit.\n");
    s.push_str("--version           Print the version and exit.\n");
    s.push_str("\nExit status: 0 listed; 1 failed (snapshot, source or trace file not found or\nunreadable, no supported protocol, fatal decode error); 2 bad option value.\nFailures are also reported on stderr. Unknown options are ignored with a warning.\n");
    s
}

/// The output the logging options select (default: stdout and
/// `trc_pkt_lister.ppl`); an error for a `-logfilename` without a name or
/// a file that cannot be created.
pub fn output_for_args(args: &[String]) -> Result<MsgLogger, String> {
    let (mut stdout, mut stderr, mut file) = (false, false, None::<String>);
    let mut changed = false;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "-logstdout" => {
                stdout = true;
                changed = true;
            }
            "-logstderr" => {
                stderr = true;
                changed = true;
            }
            "-logfile" => {
                file.get_or_insert_with(|| DEFAULT_LOGFILE.to_string());
                changed = true;
            }
            "-logfilename" => {
                i += 1;
                let name = args
                    .get(i)
                    .ok_or("Bad logger command line options\nProgram Exiting\n")?;
                file = Some(name.clone());
                changed = true;
            }
            _ => {}
        }
        i += 1;
    }
    if !changed {
        stdout = true;
        file = Some(DEFAULT_LOGFILE.to_string());
    }
    let mut log = MsgLogger::none();
    log.set_stdout(stdout);
    log.set_stderr(stderr);
    if let Some(f) = file
        && let Err(e) = log.set_file(&PathBuf::from(&f))
    {
        return Err(format!("Trace Packet Lister : Error: cannot open log file {f}: {e}\n"));
    }
    Ok(log)
}

/// How option parsing ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Parsed {
    /// Options read: list.
    Run,
    /// `-help`: the help text was written.
    Help,
    /// A bad option value (exit status 2).
    Usage,
}

/// Exit status: success.
pub const EXIT_OK: i32 = 0;
/// Exit status: the snapshot or a trace file could not be read, or the
/// decode stopped on a fatal error.
pub const EXIT_FAILURE: i32 = 1;
/// Exit status: bad command line.
pub const EXIT_USAGE: i32 = 2;

impl Lister<'_> {
    fn msg(&self, s: &str) {
        self.out.borrow_mut().log_msg(s);
    }

    /// A failure: `listing` goes into the listing as OpenCSD words it,
    /// `plain` to the echo (standard error) in plain words.
    fn fail(&self, listing: &str, plain: &str) {
        self.msg(listing);
        self.failed.set(true);
        self.echo_line(plain);
    }

    /// A line for standard error only (the listing has its own words).
    fn echo_line(&self, plain: &str) {
        if let Some(echo) = self.echo {
            echo(&format!("trc_pkt_lister: {plain}\n"));
        }
    }

    /// A bad option: the OpenCSD message in the listing and on stderr.
    fn usage_error(&self, listing: &str) -> Parsed {
        self.msg(listing);
        self.echo_line(&format!(
            "{} (see -help)",
            listing.trim_end().trim_start_matches("Trace Packet Lister : Error: ")
        ));
        Parsed::Usage
    }

    /// Parses the decode options.
    fn parse(&mut self, args: &[String]) -> Parsed {
        let mut i = 0;
        let value = |i: &mut usize| -> Option<String> {
            *i += 1;
            args.get(*i).cloned()
        };
        while i < args.len() {
            let a = args[i].as_str();
            match a {
                "-ss_dir" => match value(&mut i) {
                    Some(v) => self.opts.ss_dir = Some(v),
                    None => {
                        return self
                            .usage_error("Trace Packet Lister : Error: Missing directory string on -ss_dir option\n");
                    }
                },
                "-id" => match value(&mut i) {
                    Some(v) => {
                        // OpenCSD truncates the value to 8 bits first (0x105
                        // becomes ID 5); here a value out of range is refused,
                        // with OpenCSD's message.
                        let shown = match parse_c_number(&v) {
                            Some(id @ 1..0x70) => {
                                self.opts.ids.push(id as u8);
                                None
                            }
                            Some(n) if n < 0 => Some(format!("-0x{:x}", -n)),
                            Some(n) => Some(format!("0x{n:x}")),
                            None => Some(format!("'{v}'")),
                        };
                        if let Some(shown) = shown {
                            return self.usage_error(&format!(
                                "Trace Packet Lister : Error: invalid ID number {shown} on -id option\n"
                            ));
                        }
                    }
                    None => {
                        return self.usage_error("Trace Packet Lister : Error: No ID number on -id option\n");
                    }
                },
                "-src_name" => match value(&mut i) {
                    Some(v) => self.opts.src_name = Some(v),
                    None => {
                        return self.usage_error(
                            "Trace Packet Lister : Error: Missing source name string on -src_name option\n",
                        );
                    }
                },
                "-threads" => match value(&mut i).and_then(|v| parse_c_number(&v)) {
                    Some(n) if (1..=1024).contains(&n) => self.opts.threads = n as usize,
                    _ => {
                        return self.usage_error(
                            "Trace Packet Lister : Error: thread count (1 to 1024) expected after -threads\n",
                        );
                    }
                },
                "-test_waits" => match value(&mut i) {
                    Some(v) => self.opts.test_waits = parse_count(&v, u32::MAX as u64) as u32,
                    None => {
                        return self
                            .usage_error("Trace Packet Lister : Error: wait count value on -test_waits option\n");
                    }
                },
                "-macc_cache_p_size" | "-macc_cache_p_num" => match value(&mut i).and_then(|v| parse_c_number(&v)) {
                    Some(n) => {
                        let n = n.clamp(0, usize::MAX as i128) as usize;
                        if a == "-macc_cache_p_size" {
                            self.opts.cache.page_size = n.clamp(CacheConfig::MIN_PAGE_SIZE, CacheConfig::MAX_PAGE_SIZE);
                        } else {
                            self.opts.cache.num_pages = n.clamp(CacheConfig::MIN_PAGES, CacheConfig::MAX_PAGES);
                        }
                    }
                    None => {
                        return self.usage_error(&format!(
                            "Trace Packet Lister : Error: missing or bad value on {a} option\n"
                        ));
                    }
                },
                "-macc_cache_disable" => self.opts.cache.enabled = false,
                "-multi_session" => self.opts.multi_session = true,
                "-o_raw_packed" => self.opts.raw_packed = true,
                "-o_raw_unpacked" => self.opts.raw_unpacked = true,
                "-ss_verbose" => {}
                "-decode" => self.opts.decode = true,
                "-decode_only" => {
                    self.opts.decode_only = true;
                    self.opts.decode = true;
                }
                "-pkt_mon" => self.opts.pkt_mon = true,
                "-dstream_format" => self.opts.dstream_format = true,
                "-tpiu" => self.opts.tpiu = true,
                "-tpiu_hsync" => {
                    self.opts.tpiu = true;
                    self.opts.tpiu_hsync = true;
                }
                "-stats" => self.opts.stats = true,
                "-no_time_print" => self.opts.no_time_print = true,
                "-profile" => self.opts.profile = true,
                "-src_addr_n" => self.opts.dec.src_addr_n = true,
                "-aa64_opcode_chk" => self.opts.dec.aa64_opcode_check = true,
                "-direct_br_cond" => self.opts.dec.direct_br_cond = true,
                "-strict_br_cond" => self.opts.dec.strict_br_cond = true,
                "-range_cont" => self.opts.dec.range_cont = true,
                "-halt_err" => self.opts.dec.halt_on_error = true,
                "-help" | "--help" | "-h" => {
                    self.msg(&help_text());
                    return Parsed::Help;
                }
                "-logstdout" | "-logstderr" | "-logfile" => {}
                "-logfilename" => i += 1,
                other => {
                    // OpenCSD lists on without the option; so does this
                    // lister (scripts written for OpenCSD keep working),
                    // but says so on standard error too.
                    self.msg(&format!(
                        "Trace Packet Lister : Warning: Ignored unknown option {other}.\n"
                    ));
                    self.echo_line(&format!("warning: unknown option {other} ignored (see -help)"));
                }
            }
            i += 1;
        }
        if let Some(v) = (self.env)("OPENCSD_INSTR_RANGE_LIMIT")
            && let Some(n) = parse_c_number(v.trim())
        {
            self.opts.dec.instr_range_limit = n.clamp(0, u32::MAX as i128) as u32;
        }
        if (self.env)("OPENCSD_ERR_ON_AA64_BAD_OPCODE").is_some() {
            self.opts.dec.aa64_opcode_check = true;
        }
        if self.opts.src_name.is_some() {
            self.opts.multi_session = false;
        }
        Parsed::Run
    }

    /// A fatal decode error, on standard error, with its reason (which
    /// the listing may not show: see `ErrorLogger::last_reason`).
    fn fatal_echo(&self, index: TrcIndex, reason: Option<&str>) {
        self.failed.set(true);
        match reason.map(str::trim_end) {
            Some(e) => self.echo_line(&format!(
                "decode stopped by a fatal error after {index} bytes of trace: {e}"
            )),
            None => self.echo_line(&format!("decode stopped by a fatal error after {index} bytes of trace")),
        }
    }

    /// Checks that every trace file is a regular file, reporting the first
    /// that is not (OpenCSD's listing line, then the file and the problem).
    fn files_ok(&self, files: &[PathBuf]) -> bool {
        let Some((path, problem)) = files_problem(files) else {
            return true;
        };
        self.msg(&format!(
            "Trace Packet Lister : Error : {}: {problem}\n",
            path.display()
        ));
        self.fail(
            "Trace Packet Lister : Error : Unable to open trace buffer.\n",
            &format!("cannot read trace buffer file {}: {problem}", path.display()),
        );
        false
    }

    fn run(&mut self) {
        let ss_path = self.opts.ss_dir.clone().unwrap_or_else(|| "./".to_string());
        self.msg(&format!("Trace Packet Lister : reading snapshot from path {ss_path}\n"));
        if !std::path::Path::new(&ss_path).is_dir() {
            self.fail(
                &format!("Trace Packet Lister : Snapshot path{ss_path} not found\n"),
                &format!("snapshot directory {ss_path} not found"),
            );
            return;
        }
        let ss = match Snapshot::load(&ss_path) {
            Ok(s) => s,
            Err(e) => {
                self.msg(&format!("Trace Packet Lister : Error: {e}\n"));
                self.fail("Trace Packet Lister : Failed to read snapshot\n", &e.to_string());
                return;
            }
        };
        for w in ss.warnings() {
            // OpenCSD's reader logs a device file it cannot open, and goes
            // on; it has no line for the other warnings, which go to
            // stderr only.
            if let WarningKind::UnreadableDevice { path, .. } = &w.kind {
                let err = TraceError::new(Severity::Error, ErrCode::TestSnapshotRead)
                    .with_message(format!("Failed to open device file : {}\n", path.display()));
                self.msg(&format!("snapshot_reader : {err}"));
            }
            self.echo_line(&w.to_string());
        }
        let names: Vec<String> = ss.buffer_names().into_iter().map(str::to_string).collect();
        if names.is_empty() {
            self.fail(
                "Trace Packet Lister : No trace source buffer names found\n",
                &format!("the snapshot in {ss_path} names no trace buffer"),
            );
            return;
        }
        let source = match &self.opts.src_name {
            None => names[0].clone(),
            Some(n) if names.contains(n) => n.clone(),
            Some(n) => {
                self.msg(&format!("Trace Packet Lister : Trace source name {n} not found\n"));
                let mut s = String::from("Valid source names are:-\n");
                for n in &names {
                    s.push_str(n);
                    s.push('\n');
                }
                self.msg(&s);
                self.failed.set(true);
                self.echo_line(&format!(
                    "trace source {n} not found in {ss_path} (valid names: {})",
                    names.join(", ")
                ));
                return;
            }
        };
        self.msg(&format!("Using {source} as trace source\n"));
        self.list(&ss, &source, &names);
    }

    fn list(&mut self, ss: &Snapshot, source: &str, names: &[String]) {
        let (mut tree, notes) = match setup_tree(&self.opts, ss, source, self.registry.clone(), self.out.clone()) {
            Ok(Some(t)) => t,
            Ok(None) => {
                self.fail(
                    "Trace Packet Lister : No supported protocols found.\n",
                    &format!("no trace source of buffer {source} has a supported protocol"),
                );
                return;
            }
            Err(e) => {
                self.fail(&format!("Trace Packet Lister : Error: {e}\n"), &e.to_string());
                return;
            }
        };
        let mut printers = 0;
        for (id, proto, attached) in notes {
            if attached {
                printers += 1;
                self.msg(&format!(
                    "Trace Packet Lister : Protocol printer {proto} on Trace ID 0x{id:x}\n"
                ));
            } else {
                self.msg(&format!(
                    "Trace Packet Lister : Failed to Protocol printer {proto} on Trace ID 0x{id:x}\n"
                ));
            }
        }

        let mut elem_printer = None;
        if self.opts.decode {
            let p = shared(GenElemPrinter::new(self.out.clone()));
            p.borrow_mut().set_test_waits(self.opts.test_waits);
            p.borrow_mut().set_mute(self.opts.profile);
            tree.set_gen_elem_out(Box::new(p.clone()));
            elem_printer = Some(p);
            self.msg("Trace Packet Lister : Set trace element decode printer\n");
            let mut s = String::new();
            tree.describe_mapped_ranges(&mut s);
            self.msg(&s);
        }

        if !self.opts.decode && printers == 0 {
            self.fail(
                "Trace Packet Lister : No supported protocols found.\n",
                &format!("no trace source of buffer {source} has a supported protocol"),
            );
            return;
        }
        // -id takes 0x01 to 0x6f only, so the filter cannot be refused.
        let _ = tree.set_id_filter((!self.opts.ids.is_empty()).then_some(self.opts.ids.as_slice()));

        let Some(buf) = ss.buffer(source) else { return };
        if !self.opts.multi_session {
            let files = ss.buffer_paths(buf);
            if let Some(make_registry) = self.parallel_registry(&tree)
                && self.worth_sharing(&tree, &files)
            {
                self.process_buffer_parallel(&tree, ss, source, make_registry, &files, elem_printer.as_ref());
            } else {
                self.process_buffer(&mut tree, &files, elem_printer.as_ref());
            }
            return;
        }
        for (n, name) in names.iter().enumerate() {
            self.msg(&format!(
                "####### Multi Session decode: Buffer {} of {}; Source name = {}.\n\n",
                n + 1,
                names.len(),
                name
            ));
            let Some(b) = ss.buffer(name) else {
                self.fail(
                    &format!("Trace Packet Lister : ERROR : Multi-session decode for buffer {name} - buffer not found. Aborting.\n\n"),
                    &format!("multi-session decode: buffer {name} not found"),
                );
                break;
            };
            let ok = self.process_buffer(&mut tree, &ss.buffer_paths(b), elem_printer.as_ref());
            // Reset for the next buffer, as OpenCSD does after each, also
            // one whose decode failed (the reset shows in the listing).
            tree.trace_data_in(DatapathOp::Reset, 0, &[]);
            if !ok {
                self.msg(&format!(
                    "Trace Packet Lister : ERROR : Multi-session decode for buffer {name} failed. Aborting.\n\n"
                ));
                self.echo_line(&format!("multi-session decode stopped at buffer {name}"));
                break;
            }
            self.msg(&format!("####### Buffer {} : {} Complete\n\n", n + 1, name));
        }
    }

    /// The registry maker to decode on worker threads with, when this
    /// listing can be: more than one thread asked for, formatted trace with
    /// more than one trace ID to decode, and nothing that needs the one
    /// tree's state between blocks (DSTREAM footers, raw frames, -stats).
    fn parallel_registry(&self, tree: &DecodeTree) -> Option<fn() -> Arc<DecoderRegistry>> {
        let threads = match self.opts.threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        };
        let ids = self.ids(tree).len();
        let simple = !(self.opts.dstream_format || self.opts.raw_packed || self.opts.raw_unpacked || self.opts.stats);
        let formatted = matches!(tree.format(), SourceFormat::Formatted(_));
        (threads > 1 && ids > 1 && simple && formatted)
            .then_some(self.make_registry)
            .flatten()
    }

    /// The trace IDs to decode.
    fn ids(&self, tree: &DecodeTree) -> Vec<u8> {
        tree.elements()
            .map(|(id, _)| id)
            .filter(|id| self.opts.ids.is_empty() || self.opts.ids.contains(id))
            .collect()
    }

    /// Whether worker threads can pay for this buffer: not when one trace
    /// ID holds all but an eighth of the start of its trace (the parallel
    /// decode would use one worker, doing what this thread does, and
    /// more). Judged on the first 64 KiB, which costs a few percent of
    /// decoding them. Unreadable files are left to the parallel decode to
    /// report.
    fn worth_sharing(&self, tree: &DecodeTree, files: &[PathBuf]) -> bool {
        const SAMPLE: usize = 64 << 10;
        let mut sample = Vec::with_capacity(SAMPLE);
        for f in files {
            let Ok(file) = File::open(f) else { return true };
            if file
                .take((SAMPLE - sample.len()) as u64)
                .read_to_end(&mut sample)
                .is_err()
            {
                return true;
            }
            if sample.len() >= SAMPLE {
                break;
            }
        }
        worth_sharing(deformat_as_configured(tree), &sample, &self.ids(tree))
    }

    /// [`process_buffer`](Self::process_buffer) with the trace IDs decoded
    /// on worker threads, each with its own tree made as this one was; the
    /// listing is the same, line for line.
    fn process_buffer_parallel(
        &self,
        tree: &DecodeTree,
        ss: &Snapshot,
        source: &str,
        make_registry: fn() -> Arc<DecoderRegistry>,
        files: &[PathBuf],
        printer: Option<&Shared<GenElemPrinter>>,
    ) -> bool {
        let start = Instant::now();
        if !self.files_ok(files) {
            return false;
        }
        let ids = self.ids(tree);
        let threads = match self.opts.threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        };
        let opts = self.opts.clone();
        // Each worker prints its own elements into its text (forced waits
        // included).
        let build = |w: &WorkerSetup| -> coresight_decode::error::Result<DecodeTree> {
            let Some((mut t, _)) = setup_tree(&opts, ss, source, make_registry(), w.logger.clone())? else {
                return Err(coresight_decode::error::Error::code(
                    coresight_decode::error::ErrCode::Fail,
                    "no supported protocols",
                ));
            };
            if opts.decode {
                let mut p = GenElemPrinter::new(w.logger.clone());
                p.set_test_waits(opts.test_waits);
                p.set_mute(opts.profile);
                t.set_gen_elem_out(Box::new(WorkerPrinter { printer: p }));
            }
            Ok(t)
        };
        let mut input = FileSequence {
            files,
            next: 0,
            current: None,
            failed: None,
        };
        // With -profile the elements come back to this thread, merged in
        // serial order, and the muted printer counts them: after a fatal
        // error the count is then the serial decode's, not every element
        // the workers made before they stopped.
        let count_here = self.opts.profile && printer.is_some();
        let mut sink = ListerSink {
            out: &self.out,
            printer: if count_here { printer } else { None },
        };
        let options = ParallelOptions {
            threads,
            deliver_elements: count_here,
            ..ParallelOptions::default()
        };
        let format = deformat_as_configured(tree);
        let outcome = match decode_parallel(options, format, &ids, &mut input, &build, &mut sink) {
            Ok(o) => o,
            Err(e) => {
                self.fail(
                    &format!("Trace Packet Lister : Error: {e}\n"),
                    &format!("decode failed: {e}"),
                );
                return false;
            }
        };
        if outcome.resp.is_fatal() {
            self.msg("Trace Packet Lister : Data Path fatal error\n");
            // OpenCSD's lister logs the last error's string as it is: no
            // prefix, no line end (the next message follows on its line).
            if let Some(e) = &outcome.last_error {
                self.msg(e);
            }
            self.fatal_echo(outcome.processed, outcome.reason.as_deref());
        }
        self.buffer_done(&input, outcome.processed, start);
        if count_here && let Some(p) = printer {
            let n = p.borrow().element_count();
            self.msg(&format!("Trace Packet Lister : Profile : {n} generic elements.\n"));
        }
        !outcome.resp.is_fatal()
    }

    /// The end of a buffer: a file that could not be read, and the bytes
    /// processed (with the time taken, unless -no_time_print).
    fn buffer_done(&self, input: &FileSequence, index: TrcIndex, start: Instant) {
        if let Some((path, e)) = &input.failed {
            self.fail(
                &format!(
                    "Trace Packet Lister : Error : {}: {e}: the trace stops at byte {index}\n",
                    path.display()
                ),
                &format!(
                    "cannot read trace buffer file {}: {e} (the trace stops at byte {index})",
                    path.display()
                ),
            );
        }
        let mut s = format!("Trace Packet Lister : Trace buffer done, processed {index} bytes");
        if self.opts.no_time_print {
            s.push_str(".\n");
        } else {
            s.push_str(&format!(" in {:.8} seconds.\n", start.elapsed().as_secs_f64()));
        }
        self.msg(&s);
    }

    /// Pushes a block through the tree, flushing on waits, and leaves
    /// nothing held back at its end (so whatever the lister prints between
    /// blocks, such as DSTREAM footers, stays in place under forced waits).
    fn push(
        &self,
        tree: &mut DecodeTree,
        index: &mut TrcIndex,
        data: &[u8],
        printer: Option<&Shared<GenElemPrinter>>,
        resp: &mut DatapathResp,
    ) {
        let mut done = 0;
        while (done < data.len() || resp.is_wait()) && !resp.is_fatal() {
            if resp.is_cont() {
                let (r, used) = tree.trace_data_in(DatapathOp::Data, *index, &data[done..]);
                *resp = r;
                done += used;
                *index += used as TrcIndex;
                if let Some(p) = printer
                    && p.borrow().need_ack_wait()
                    && resp.is_cont()
                {
                    self.msg("Trace Packet Lister : WARNING : Data in; data Path expected WAIT response\n");
                }
            } else {
                if let Some(p) = printer {
                    p.borrow_mut().ack_wait();
                }
                *resp = tree.trace_data_in(DatapathOp::Flush, 0, &[]).0;
            }
        }
    }

    /// Decodes one buffer (its files in order). Returns false on failure.
    fn process_buffer(
        &self,
        tree: &mut DecodeTree,
        files: &[PathBuf],
        printer: Option<&Shared<GenElemPrinter>>,
    ) -> bool {
        let start = Instant::now();
        // Each file must be a regular file: a FIFO would block the open
        // until a writer came, and a directory reads as nothing. Files are
        // opened one at a time as the previous one ends, so thousands of
        // them neither nest readers nor hold thousands of descriptors.
        if !self.files_ok(files) {
            return false;
        }
        // Elements formatted on other threads (the listing unchanged),
        // when more than one thread is asked for by -threads (not by
        // default: on a loaded machine the hand-over can cost more than
        // it saves).
        let threads = self.opts.threads;
        if threads > 1 && self.opts.decode && !self.opts.profile {
            self.out
                .borrow_mut()
                .set_batcher(|dest| Box::new(FormatPool::new(threads - 1, dest)));
        }
        let ok = self.process_buffer_on(tree, files, printer, start);
        self.out.borrow_mut().end_batcher();
        ok
    }

    fn process_buffer_on(
        &self,
        tree: &mut DecodeTree,
        files: &[PathBuf],
        printer: Option<&Shared<GenElemPrinter>>,
        start: Instant,
    ) -> bool {
        let mut input = FileSequence {
            files,
            next: 0,
            current: None,
            failed: None,
        };
        let mut index: TrcIndex = 0;
        let mut resp = DatapathResp::Cont;
        let mut block = vec![0u8; 1024];
        let mut at_eof = false;
        while !at_eof && !resp.is_fatal() {
            let want = if self.opts.dstream_format { 512 - 8 } else { block.len() };
            let n = read_full(&mut input, &mut block[..want]);
            if n < want {
                at_eof = true;
            }
            self.push(tree, &mut index, &block[..n], printer, &mut resp);
            if self.opts.dstream_format {
                // As OpenCSD's lister, the footer is read into the start of
                // the data block: at the end of the file the bytes already
                // there (the last footer, or the last data) are shown again.
                if !at_eof && read_full(&mut input, &mut block[..8]) < 8 {
                    at_eof = true;
                }
                if self.opts.raw_packed {
                    let mut s = String::from("DSTREAM footer [");
                    for b in &block[..8] {
                        s.push_str(&format!("0x{b:x} "));
                    }
                    s.push_str("]\n");
                    self.msg(&s);
                }
            }
        }
        if resp.is_fatal() {
            self.msg("Trace Packet Lister : Data Path fatal error\n");
            let (last, reason) = {
                let log = tree.error_logger().borrow();
                (
                    log.last_error().map(|e| e.to_string()),
                    log.last_reason().map(|e| e.to_string()),
                )
            };
            if let Some(e) = &last {
                self.msg(e);
            }
            self.fatal_echo(index, reason.as_deref());
        } else {
            // Let a decoder that asked to wait on the last block finish it
            // before the end of trace goes in.
            while resp.is_wait() {
                if let Some(p) = printer {
                    p.borrow_mut().ack_wait();
                }
                resp = tree.trace_data_in(DatapathOp::Flush, 0, &[]).0;
            }
            let mut r = tree.trace_data_in(DatapathOp::Eot, 0, &[]).0;
            while r.is_wait() {
                if let Some(p) = printer {
                    p.borrow_mut().ack_wait();
                }
                r = tree.trace_data_in(DatapathOp::Flush, 0, &[]).0;
                if r.is_cont() {
                    r = tree.trace_data_in(DatapathOp::Eot, 0, &[]).0;
                }
            }
        }
        self.buffer_done(&input, index, start);
        if self.opts.stats {
            self.print_stats(tree);
        }
        if self.opts.profile
            && let Some(p) = printer
        {
            self.msg(&format!(
                "Trace Packet Lister : Profile : {} generic elements.\n",
                p.borrow().element_count()
            ));
        }
        !resp.is_fatal()
    }

    /// The `-stats` report, laid out as OpenCSD's lister lays it out.
    fn print_stats(&self, tree: &mut DecodeTree) {
        use std::fmt::Write as _;
        let mut s = String::from("\nReading packet decoder statistics....\n\n");
        // The frame demux totals come with a decoder's statistics: none
        // when no decoder keeps any, as in OpenCSD's lister.
        let mut any_stats = false;
        for (id, e) in tree.elements() {
            match e.component.stats() {
                Some(st) => {
                    any_stats = true;
                    let _ = write!(
                        s,
                        "Decode stats ID 0x{id:x}\nTotal Bytes: {}; Unsynced Bytes: {}\nBad Header Errors: {}; Bad Sequence Errors: {}\n",
                        st.channel_total, st.channel_unsynced, st.bad_header_errs, st.bad_sequence_errs
                    );
                }
                None => {
                    let _ = writeln!(s, "Decode stats unavailable on Trace ID 0x{id:x}");
                }
            }
        }
        if let Some(d) = tree.deformatter_mut().filter(|_| any_stats) {
            let st = d.stats();
            if st.frame_bytes > 0 {
                let total =
                    st.valid_id_bytes + st.no_id_bytes + st.unknown_id_bytes + st.reserved_id_bytes + st.frame_bytes;
                let _ = write!(
                    s,
                    "\nFrame Demux Stats\n\
                     Trace data bytes sent to registered ID decoders: {}\n\
                     Trace data bytes without registered ID decoders: {}\n\
                     Trace data bytes with unknown ID: {}\n\
                     Trace data bytes with reserved ID: {}\n\
                     Frame demux bytes, ID bytes and sync bytes: {}\n\
                     Total bytes processed by frame demux: {}\n\n",
                    st.valid_id_bytes, st.no_id_bytes, st.unknown_id_bytes, st.reserved_id_bytes, st.frame_bytes, total
                );
            }
        }
        self.msg(&s);
    }
}

/// What a file that is not a regular file is, for messages.
fn not_regular(meta: &std::fs::Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        return "is a directory, not a file";
    }
    // FIFOs, sockets and devices are Unix file types; elsewhere (Windows)
    // the generic message is all there is to say.
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "is a FIFO (named pipe), not a regular file";
        } else if t.is_socket() {
            return "is a socket, not a regular file";
        } else if t.is_block_device() || t.is_char_device() {
            return "is a device, not a regular file";
        }
    }
    "is not a regular file"
}

/// The first trace file that is not a regular file, and why.
fn files_problem(files: &[PathBuf]) -> Option<(&PathBuf, String)> {
    for f in files {
        let problem = match std::fs::metadata(f) {
            Ok(m) if m.is_file() => continue,
            Ok(m) => not_regular(&m).to_string(),
            Err(e) => e.to_string(),
        };
        return Some((f, problem));
    }
    None
}

/// The tree's source format, with the deformatter as the options
/// configured it.
fn deformat_as_configured(tree: &DecodeTree) -> SourceFormat {
    match (tree.format(), tree.deformatter()) {
        (SourceFormat::Formatted(_), Some(d)) => SourceFormat::Formatted(d.config()),
        (f, _) => f,
    }
}

/// Builds the tree for `source` as the options say, with packet printers
/// writing to `out`, and configures the deformatter. Returns the tree and,
/// per printer, its trace ID, protocol and whether it could be attached.
#[allow(clippy::type_complexity)]
fn setup_tree(
    opts: &Opts,
    ss: &Snapshot,
    source: &str,
    registry: Arc<DecoderRegistry>,
    out: Shared<MsgLogger>,
) -> coresight_decode::error::Result<Option<(DecodeTree, Vec<(u8, String, bool)>)>> {
    let mode = if opts.decode {
        DecodeMode::FullDecode
    } else {
        DecodeMode::PacketsOnly
    };
    // A configuration the decoder does not implement is listed as OpenCSD
    // lists it: the decoder stops at its first packet.
    let dec_opts = coresight_decode::decoder::DecoderOptions {
        opencsd_cfg_unsupp: true,
        ..opts.dec
    };
    let cache = opts.cache;
    let err_out = out.clone();
    let tree = TreeBuilder::with_registry(ss, registry).build(source, mode, |t| {
        t.set_error_output(Some(err_out));
        t.set_decoder_options(dec_opts);
        // The lister reproduces OpenCSD's listing, empty frame blocks
        // included.
        t.set_opencsd_empty_blocks(true);
        t.set_opencsd_deformatter(true);
        if let Some(m) = t.mem_mapper() {
            m.borrow_mut().set_cache_config(cache);
        }
    });
    let mut tree = match tree {
        Ok(t) => t,
        Err(coresight_decode::Error::NoDecoder { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };

    // Packet printers, in trace ID order.
    let mut notes = Vec::new();
    if !opts.decode_only {
        let ids: Vec<(u8, String)> = tree.elements().map(|(id, e)| (id, e.protocol.clone())).collect();
        for (id, proto) in ids {
            if !opts.ids.is_empty() && !opts.ids.contains(&id) {
                continue;
            }
            let monitor = opts.decode || opts.pkt_mon;
            let waits = if monitor { 0 } else { opts.test_waits };
            // Profiling mutes the packet lines: a muted monitor is not
            // attached at all, so no packet is shown to it.
            let attached = if monitor && opts.profile {
                Ok(())
            } else {
                let mut p = PacketPrinter::new(id, out.clone());
                p.set_test_waits(waits);
                p.set_mute(opts.profile);
                tree.attach_printer(id, p, monitor)
            };
            notes.push((id, proto, attached.is_ok()));
        }
    }

    // Deformatter input format and raw frame output.
    if let SourceFormat::Formatted(mut cfg) = tree.format() {
        if opts.tpiu {
            cfg.fsyncs = true;
            cfg.mem_aligned = false;
        }
        if opts.tpiu_hsync {
            cfg.hsyncs = true;
        }
        if !(cfg.fsyncs || cfg.hsyncs) {
            cfg.mem_aligned = true;
        }
        cfg.raw_packed = opts.raw_packed;
        cfg.raw_unpacked = opts.raw_unpacked;
        if let Some(d) = tree.deformatter_mut() {
            let _ = d.configure(cfg);
        }
        if (opts.raw_packed || opts.raw_unpacked) && !opts.profile {
            let _ = tree.set_raw_frame_monitor(Box::new(RawFramePrinter::new(out.clone())));
        }
    }
    Ok(Some((tree, notes)))
}

/// A worker's element printer. A forced wait is acknowledged when the
/// worker flushes.
struct WorkerPrinter {
    printer: GenElemPrinter,
}

impl TrcGenElemIn for WorkerPrinter {
    fn trace_elem_in(
        &mut self,
        index: TrcIndex,
        trace_id: u8,
        elem: &coresight_decode::element::TraceElement,
    ) -> DatapathResp {
        if self.printer.need_ack_wait() {
            self.printer.ack_wait();
        }
        self.printer.trace_elem_in(index, trace_id, elem)
    }
    fn trace_elems_in(
        &mut self,
        trace_id: u8,
        elems: &[(TrcIndex, coresight_decode::element::TraceElement)],
    ) -> (DatapathResp, usize) {
        if self.printer.need_ack_wait() {
            self.printer.ack_wait();
        }
        self.printer.trace_elems_in(trace_id, elems)
    }
}

/// The lister's output of a parallel decode: text to the log, elements to
/// the element printer (whose forced waits are acknowledged on flush).
struct ListerSink<'a> {
    out: &'a Shared<MsgLogger>,
    printer: Option<&'a Shared<GenElemPrinter>>,
}

impl ParallelSink for ListerSink<'_> {
    fn text(&mut self, text: &str) {
        self.out.borrow_mut().log_msg(text);
    }
    fn element(
        &mut self,
        index: TrcIndex,
        trace_id: u8,
        elem: &coresight_decode::element::TraceElement,
    ) -> DatapathResp {
        match self.printer {
            Some(p) => p.borrow_mut().trace_elem_in(index, trace_id, elem),
            None => DatapathResp::Cont,
        }
    }
    fn flush(&mut self) {
        if let Some(p) = self.printer {
            p.borrow_mut().ack_wait();
        }
    }
}

/// The files of one buffer read as one stream, opened one after another
/// (iteratively: a chain of `Read::chain` adapters nests one reader per
/// file, and thousands of files overflowed the stack).
struct FileSequence<'a> {
    files: &'a [PathBuf],
    next: usize,
    current: Option<File>,
    /// A file that could not be opened, with the error.
    failed: Option<(PathBuf, std::io::Error)>,
}

impl Read for FileSequence<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            if let Some(f) = self.current.as_mut() {
                let n = f.read(buf)?;
                if n > 0 || buf.is_empty() {
                    return Ok(n);
                }
                self.current = None;
            }
            let Some(path) = self.files.get(self.next) else {
                return Ok(0);
            };
            self.next += 1;
            match File::open(path) {
                Ok(f) => self.current = Some(f),
                Err(e) => {
                    let err = std::io::Error::new(e.kind(), e.to_string());
                    self.failed = Some((path.clone(), e));
                    return Err(err);
                }
            }
        }
    }
}

/// Reads until `buf` is full or the input ends; returns bytes read.
fn read_full(r: &mut dyn Read, buf: &mut [u8]) -> usize {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    n
}

/// Runs the lister with `argv` (`argv[0]` is the program name shown in the
/// banner), reading `OPENCSD_*` settings through `env`, writing to `out`.
/// Returns the process exit status.
pub fn run(argv: &[String], env: &dyn Fn(&str) -> Option<String>, out: Shared<MsgLogger>) -> i32 {
    run_with_registry_fn(argv, env, out, || Arc::new(DecoderRegistry::builtin()))
}

/// [`run`] with the protocols in `registry`: a program that lists trace of
/// a plug-in protocol registers the plug-in's factory (with
/// [`DecoderRegistry::register`]) in a [`DecoderRegistry::builtin`]
/// registry and passes it here. Snapshot sources whose device type a
/// registered factory claims are then listed and decoded like built-in ones.
/// Decode stays on this thread (a registry cannot be shared with others):
/// [`run_with_registry_fn`] decodes on worker threads too.
pub fn run_with_registry(
    argv: &[String],
    env: &dyn Fn(&str) -> Option<String>,
    out: Shared<MsgLogger>,
    registry: Arc<DecoderRegistry>,
) -> i32 {
    run_lister(argv, env, out, registry, None, None)
}

/// [`run_with_registry`] with a function that makes the registry, so that
/// worker threads (`-threads`) can each make their own.
pub fn run_with_registry_fn(
    argv: &[String],
    env: &dyn Fn(&str) -> Option<String>,
    out: Shared<MsgLogger>,
    make_registry: fn() -> Arc<DecoderRegistry>,
) -> i32 {
    run_lister(argv, env, out, make_registry(), Some(make_registry), None)
}

/// [`run_with_registry_fn`] as the `trc_pkt_lister` program runs it:
/// besides the listing, bad options and failures are reported in plain
/// words, one line each starting `trc_pkt_lister: `, through `echo` (the
/// program writes them to standard error).
///
/// Returns [`EXIT_OK`], [`EXIT_FAILURE`] (the snapshot, a trace file or
/// the source could not be read or found, no supported protocol, a fatal
/// decode error) or [`EXIT_USAGE`] (a bad option value). `-help` exits
/// with [`EXIT_OK`]; an unknown option is ignored with a warning, as
/// OpenCSD's lister does.
pub fn run_program(
    argv: &[String],
    env: &dyn Fn(&str) -> Option<String>,
    out: Shared<MsgLogger>,
    make_registry: fn() -> Arc<DecoderRegistry>,
    echo: &dyn Fn(&str),
) -> i32 {
    run_lister(argv, env, out, make_registry(), Some(make_registry), Some(echo))
}

fn run_lister(
    argv: &[String],
    env: &dyn Fn(&str) -> Option<String>,
    out: Shared<MsgLogger>,
    registry: Arc<DecoderRegistry>,
    make_registry: Option<fn() -> Arc<DecoderRegistry>>,
    echo: Option<&dyn Fn(&str)>,
) -> i32 {
    let args = argv.get(1..).unwrap_or(&[]);
    {
        let mut o = out.borrow_mut();
        o.log_msg("Trace Packet Lister: CS Decode library testing\n");
        o.log_msg("-----------------------------------------------\n\n");
        o.log_msg(&format!(
            "** Library Version : {} (coresight-decode)\n\n",
            env!("CARGO_PKG_VERSION")
        ));
        let mut cmd = String::from("Test Command Line:-\n");
        cmd.push_str(argv.first().map(String::as_str).unwrap_or("trc_pkt_lister"));
        cmd.push_str("   ");
        for a in args {
            cmd.push_str(a);
            cmd.push_str("  ");
        }
        cmd.push_str("\n\n");
        o.log_msg(&cmd);
    }
    let mut lister = Lister {
        out: out.clone(),
        echo,
        failed: std::cell::Cell::new(false),
        registry,
        make_registry,
        opts: Opts::default(),
        env,
    };
    let status = match lister.parse(args) {
        Parsed::Run => {
            lister.run();
            if lister.failed.get() { EXIT_FAILURE } else { EXIT_OK }
        }
        Parsed::Help => EXIT_OK,
        Parsed::Usage => EXIT_USAGE,
    };
    out.borrow_mut().flush();
    status
}
