//! Error codes and error records: the foundation every layer reports in.
//!
//! [`ErrCode`] is the decode library's error vocabulary, numbered and named
//! as OpenCSD numbers and names them, so that logged errors read the same.
//! [`TraceError`] is one logged error: severity, code, optional trace index
//! and trace ID, and a message: the decode layer's error. The crate's
//! aggregate error, [`Error`](crate::error::Error), wraps it with the
//! errors of the layers above.

use std::fmt::{self, Write as _};

use crate::datapath::TrcIndex;

macro_rules! err_codes {
    ($( $(#[$m:meta])* $var:ident = $val:expr, $name:expr, $desc:expr; )*) => {
        /// Error codes (OpenCSD's `ocsd_err_t`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u16)]
        pub enum ErrCode { $( $(#[$m])* #[doc = $desc] $var = $val, )* }

        impl ErrCode {
            /// Numeric value.
            pub fn code(self) -> u16 { self as u16 }
            /// Symbolic name, e.g. `OCSD_ERR_NOT_INIT`.
            pub fn name(self) -> &'static str { match self { $( ErrCode::$var => $name, )* } }
            /// One-line description.
            pub fn description(self) -> &'static str { match self { $( ErrCode::$var => $desc, )* } }
        }
    };
}

err_codes! {
    Ok = 0x00, "OCSD_OK", "No Error.";
    Fail = 0x01, "OCSD_ERR_FAIL", "General failure.";
    Mem = 0x02, "OCSD_ERR_MEM", "Internal memory allocation error.";
    NotInit = 0x03, "OCSD_ERR_NOT_INIT", "Component not initialised.";
    InvalidId = 0x04, "OCSD_ERR_INVALID_ID", "Invalid CoreSight Trace Source ID.";
    BadHandle = 0x05, "OCSD_ERR_BAD_HANDLE", "Invalid handle passed to component.";
    InvalidParamVal = 0x06, "OCSD_ERR_INVALID_PARAM_VAL", "Invalid value parameter passed to component.";
    InvalidParamType = 0x07, "OCSD_ERR_INVALID_PARAM_TYPE", "Type mismatch on abstract interface.";
    FileError = 0x08, "OCSD_ERR_FILE_ERROR", "File access error";
    NoProtocol = 0x09, "OCSD_ERR_NO_PROTOCOL", "Trace protocol unsupported";
    AttachTooMany = 0x0a, "OCSD_ERR_ATTACH_TOO_MANY", "Cannot attach - attach device limit reached.";
    AttachInvalidParam = 0x0b, "OCSD_ERR_ATTACH_INVALID_PARAM", " Cannot attach - invalid parameter.";
    AttachCompNotFound = 0x0c, "OCSD_ERR_ATTACH_COMP_NOT_FOUND", "Cannot detach - component not found.";
    RdrFileNotFound = 0x0d, "OCSD_ERR_RDR_FILE_NOT_FOUND", "source reader - file not found.";
    RdrInvalidInit = 0x0e, "OCSD_ERR_RDR_INVALID_INIT", "source reader - invalid initialisation parameter.";
    RdrNoDecoder = 0x0f, "OCSD_ERR_RDR_NO_DECODER", "source reader - not trace decoder set.";
    DataDecodeFatal = 0x10, "OCSD_ERR_DATA_DECODE_FATAL", "A decoder in the data path has returned a fatal error.";
    DfmtrNotContTrace = 0x11, "OCSD_ERR_DFMTR_NOTCONTTRACE", "Trace input to deformatter none-continuous";
    DfmtrBadFhSync = 0x12, "OCSD_ERR_DFMTR_BAD_FHSYNC", "Bad frame or half frame sync in trace deformatter";
    BadPacketSeq = 0x13, "OCSD_ERR_BAD_PACKET_SEQ", "Bad packet sequence";
    InvalidPcktHdr = 0x14, "OCSD_ERR_INVALID_PCKT_HDR", "Invalid packet header";
    PktInterpFail = 0x15, "OCSD_ERR_PKT_INTERP_FAIL", "Interpreter failed - cannot recover - bad data or sequence";
    UnsupportedIsa = 0x16, "OCSD_ERR_UNSUPPORTED_ISA", "ISA not supported in decoder";
    HwCfgUnsupp = 0x17, "OCSD_ERR_HW_CFG_UNSUPP", "Programmed trace configuration not supported by decoder.";
    UnsuppDecodePkt = 0x18, "OCSD_ERR_UNSUPP_DECODE_PKT", "Packet not supported in decoder";
    BadDecodePkt = 0x19, "OCSD_ERR_BAD_DECODE_PKT", "Reserved or unknown packet in decoder.";
    CommitPktOverrun = 0x1a, "OCSD_ERR_COMMIT_PKT_OVERRUN", "Overrun in commit packet stack - tried to commit more than available";
    MemNacc = 0x1b, "OCSD_ERR_MEM_NACC", "Unable to access required memory address.";
    RetStackOverflow = 0x1c, "OCSD_ERR_RET_STACK_OVERFLOW", "Internal return stack overflow checks failed - popped more than we pushed.";
    DcdtNoFormatter = 0x1d, "OCSD_ERR_DCDT_NO_FORMATTER", "No formatter in use - operation not valid.";
    MemAccOverlap = 0x1e, "OCSD_ERR_MEM_ACC_OVERLAP", "Attempted to set an overlapping range in memory access map.";
    MemAccFileNotFound = 0x1f, "OCSD_ERR_MEM_ACC_FILE_NOT_FOUND", "Memory access file could not be opened.";
    MemAccFileDiffRange = 0x20, "OCSD_ERR_MEM_ACC_FILE_DIFF_RANGE", "Attempt to re-use the same memory access file for a different address range.";
    MemAccRangeInvalid = 0x21, "OCSD_ERR_MEM_ACC_RANGE_INVALID", "Address range in accessor set to invalid values.";
    MemAccBadLen = 0x22, "OCSD_ERR_MEM_ACC_BAD_LEN", "Memory accessor returned a bad read length value (larger than requested.";
    TestSnapshotParse = 0x23, "OCSD_ERR_TEST_SNAPSHOT_PARSE", "Test snapshot file parse error";
    TestSnapshotParseInfo = 0x24, "OCSD_ERR_TEST_SNAPSHOT_PARSE_INFO", "Test snapshot file parse information";
    TestSnapshotRead = 0x25, "OCSD_ERR_TEST_SNAPSHOT_READ", "test snapshot reader error";
    TestSsToDecoder = 0x26, "OCSD_ERR_TEST_SS_TO_DECODER", "test snapshot to decode tree conversion error";
    DcdregNameRepeat = 0x27, "OCSD_ERR_DCDREG_NAME_REPEAT", "Attempted to register a decoder with the same name as another one.";
    DcdregNameUnknown = 0x28, "OCSD_ERR_DCDREG_NAME_UNKNOWN", "Attempted to find a decoder with a name that is not known in the library.";
    DcdregTypeUnknown = 0x29, "OCSD_ERR_DCDREG_TYPE_UNKNOWN", "Attempted to find a decoder with a type that is not known in the library.";
    DcdregTooMany = 0x2a, "OCSD_ERR_DCDREG_TOOMANY", "Attempted to register too many custom decoders";
    DcdInterfaceUnused = 0x2b, "OCSD_ERR_DCD_INTERFACE_UNUSED", "Attempt to connect or use and inteface not supported by this decoder.";
    InvalidOpcode = 0x2c, "OCSD_ERR_INVALID_OPCODE", "Illegal Opode found while decoding program memory.";
    IRangeLimitOverrun = 0x2d, "OCSD_ERR_I_RANGE_LIMIT_OVERRUN", "An optional limit on consecutive instructions in range during decode has been exceeded.";
    BadDecodeImage = 0x2e, "OCSD_ERR_BAD_DECODE_IMAGE", "Mismatch between trace packets and decode image.";
}

impl fmt::Display for ErrCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{:04x} ({}) [{}]", self.code(), self.name(), self.description())
    }
}

impl std::error::Error for ErrCode {}

/// Severity of a logged error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// Nothing (a verbosity that shows no message).
    None = 0,
    /// An error: data lost or decoding stopped.
    Error = 1,
    /// A warning: decoding went on, perhaps not as the input meant.
    Warn = 2,
    /// Information.
    Info = 3,
}

/// One logged error: what went wrong, where in the trace, on which trace ID.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceError {
    /// How bad it is.
    pub severity: Severity,
    /// What went wrong, as OpenCSD numbers it.
    pub code: ErrCode,
    /// Index (byte offset) in the trace where it happened, if known.
    pub index: Option<TrcIndex>,
    /// Trace ID of the stream it happened on, if known.
    pub trace_id: Option<u8>,
    /// Details, in words.
    pub message: String,
}

impl TraceError {
    /// An error with no place and no message.
    pub fn new(severity: Severity, code: ErrCode) -> Self {
        TraceError {
            severity,
            code,
            index: None,
            trace_id: None,
            message: String::new(),
        }
    }
    /// Sets the trace index it happened at.
    pub fn at(mut self, index: TrcIndex) -> Self {
        self.index = Some(index);
        self
    }
    /// Sets the trace ID it happened on.
    pub fn on_id(mut self, trace_id: u8) -> Self {
        self.trace_id = Some(trace_id);
        self
    }
    /// Sets the message.
    pub fn with_message(mut self, msg: impl Into<String>) -> Self {
        self.message = msg.into();
        self
    }

    /// The detail text OpenCSD prints after the component name:
    /// `0x0019 (OCSD_ERR_BAD_DECODE_PKT) [Reserved ...]; TrcIdx=12; CS ID=10; message`.
    pub(crate) fn write_details(&self, out: &mut String) {
        let _ = write!(out, "{}; ", self.code);
        if let Some(idx) = self.index {
            let _ = write!(out, "TrcIdx={idx}; ");
        }
        if let Some(id) = self.trace_id {
            let _ = write!(out, "CS ID={id:02x}; ");
        }
        out.push_str(&self.message);
    }
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        self.write_details(&mut s);
        f.write_str(&s)
    }
}

impl std::error::Error for TraceError {}
