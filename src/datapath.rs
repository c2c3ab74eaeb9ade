//! Flow control on the data path: the operation a caller sends, and the
//! response a component gives.
//!
//! Every data-path call carries a [`DatapathOp`]. A component answers with
//! a [`DatapathResp`]: `Cont` (carry on), `Wait` (stop pushing data; send
//! `Flush` until the answer is `Cont` again) or a fatal response (stop).
//! Nothing is lost or repeated across a wait: a component that accepted
//! only part of a block reports how many bytes it used, and the caller
//! sends the rest after the flush.

/// Index of a byte in the captured trace buffer.
pub type TrcIndex = u64;

/// Operation sent down the data path (OpenCSD's `ocsd_datapath_op_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DatapathOp {
    /// Trace data.
    Data,
    /// End of trace: flush out whatever is pending.
    Eot,
    /// Continue delivering output held back by a `Wait`.
    Flush,
    /// Reset decode state; resynchronise on the data that follows.
    Reset,
}

/// Response from a data-path component (OpenCSD's `ocsd_datapath_resp_t`),
/// ordered by severity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum DatapathResp {
    /// Continue.
    #[default]
    Cont,
    /// Continue; a warning was logged.
    WarnCont,
    /// Continue; an error was logged.
    ErrCont,
    /// Wait: send `Flush` until `Cont` is returned.
    Wait,
    /// Wait; a warning was logged.
    WarnWait,
    /// Wait; an error was logged.
    ErrWait,
    /// Fatal: component not initialised.
    FatalNotInit,
    /// Fatal: invalid operation.
    FatalInvalidOp,
    /// Fatal: invalid parameter.
    FatalInvalidParam,
    /// Fatal: invalid data in the stream.
    FatalInvalidData,
    /// Fatal: system error.
    FatalSysErr,
}

impl DatapathResp {
    /// The component took the data and can take more (`Cont`, possibly with a warning or
    /// error logged).
    pub fn is_cont(self) -> bool {
        self <= DatapathResp::ErrCont
    }
    /// The component wants the caller to stop sending data until a `Flush` gets `Cont` (any
    /// of the wait responses).
    pub fn is_wait(self) -> bool {
        matches!(
            self,
            DatapathResp::Wait | DatapathResp::WarnWait | DatapathResp::ErrWait
        )
    }
    /// Decoding cannot go on: the component must be reset before it takes more data.
    pub fn is_fatal(self) -> bool {
        self >= DatapathResp::FatalNotInit
    }
    /// The more severe of two responses.
    pub(crate) fn worst(self, other: DatapathResp) -> DatapathResp {
        self.max(other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_classes() {
        assert!(DatapathResp::Cont.is_cont() && DatapathResp::ErrCont.is_cont());
        assert!(!DatapathResp::Wait.is_cont() && DatapathResp::Wait.is_wait());
        assert!(DatapathResp::FatalInvalidData.is_fatal() && !DatapathResp::ErrWait.is_fatal());
        assert_eq!(DatapathResp::Cont.worst(DatapathResp::Wait), DatapathResp::Wait);
        assert_eq!(
            DatapathResp::FatalSysErr.worst(DatapathResp::Wait),
            DatapathResp::FatalSysErr
        );
    }
}

/// Where in the serial order of a decode the tree is: the block of trace
/// data it is handing to a decoder (its frame and place in the frame, and
/// the trace ID), an operation going to that ID (a reset at its index; the
/// end of trace at index `TrcIndex::MAX`), or an error the deformatter
/// reports at an index. Everything a decoder outputs while the tree
/// is at one position is output, in a serial decode, after everything
/// output at an earlier position: the order [`crate::parallel`] restores.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SerialKey {
    /// Index of the frame the block is in (`TrcIndex::MAX`: an operation).
    pub index: TrcIndex,
    /// The block's place in its frame.
    pub chunk: u8,
    /// Trace ID the block or operation goes to.
    pub trace_id: u8,
}
