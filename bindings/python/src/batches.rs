//! Elements as Arrow record batches: one schema per kind of element,
//! built in batches of bounded size.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::builder::{BooleanBuilder, Int32Builder, StringBuilder, UInt8Builder, UInt32Builder, UInt64Builder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use coresight_decode::arch::InstrType;
use coresight_decode::element::{Context, Element};

use crate::fields::{instr_subtype_name, instr_type_name, isa_name, security_name};
use crate::stream::Item;

/// The kinds with a table, in the order of [`Kind::ALL`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    InstrRange,
    IRangeNoPath,
    PeContext,
    Exception,
    Timestamp,
    AddrNacc,
    Other,
}

impl Kind {
    pub const ALL: [Kind; 7] = [
        Kind::InstrRange,
        Kind::IRangeNoPath,
        Kind::PeContext,
        Kind::Exception,
        Kind::Timestamp,
        Kind::AddrNacc,
        Kind::Other,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::InstrRange => "instr_range",
            Kind::IRangeNoPath => "i_range_nopath",
            Kind::PeContext => "pe_context",
            Kind::Exception => "exception",
            Kind::Timestamp => "timestamp",
            Kind::AddrNacc => "addr_nacc",
            Kind::Other => "other",
        }
    }

    pub fn from_name(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == s)
    }

    pub fn of(e: &Element) -> Kind {
        match e {
            Element::InstrRange { .. } => Kind::InstrRange,
            Element::IRangeNoPath { .. } => Kind::IRangeNoPath,
            Element::PeContext { .. } => Kind::PeContext,
            Element::Exception { .. } => Kind::Exception,
            Element::Timestamp { .. } => Kind::Timestamp,
            Element::AddrNacc { .. } => Kind::AddrNacc,
            _ => Kind::Other,
        }
    }

    fn columns(self) -> Vec<(&'static str, DataType, bool)> {
        use DataType::*;
        let mut c = vec![
            ("index", UInt64, false),
            ("trace_id", UInt8, false),
            ("cpu", Int32, true),
            ("pid", Int32, true),
            ("tid", Int32, true),
        ];
        let more: &[(&'static str, DataType, bool)] = match self {
            Kind::InstrRange => &[
                ("start", UInt64, false),
                ("end", UInt64, false),
                ("num_instr", UInt32, false),
                ("isa", Utf8, false),
                ("last_type", Utf8, false),
                ("last_subtype", Utf8, false),
                ("last_size", UInt8, false),
                ("taken", Boolean, false),
                ("conditional", Boolean, false),
                ("cycle_count", UInt32, true),
                ("context_id", UInt32, true),
                ("vmid", UInt32, true),
                ("exception_level", UInt8, true),
                ("security", Utf8, true),
                ("timestamp", UInt64, true),
            ],
            Kind::IRangeNoPath => &[
                ("start", UInt64, false),
                ("next", UInt64, false),
                ("num_instr", UInt32, false),
                ("isa", Utf8, false),
            ],
            Kind::PeContext => &[
                ("isa", Utf8, false),
                ("security", Utf8, false),
                ("exception_level", UInt8, true),
                ("bits64", Boolean, false),
                ("context_id", UInt32, true),
                ("vmid", UInt32, true),
                ("cycle_count", UInt32, true),
            ],
            Kind::Exception => &[
                ("number", UInt32, false),
                ("preferred_return", UInt64, true),
                ("return_is_branch_target", Boolean, false),
                ("cycle_count", UInt32, true),
                ("timestamp", UInt64, true),
            ],
            Kind::Timestamp => &[("timestamp", UInt64, false), ("cycle_count", UInt32, true)],
            Kind::AddrNacc => &[("addr", UInt64, false), ("mem_space", Utf8, false)],
            Kind::Other => &[("kind", Utf8, false), ("text", Utf8, false)],
        };
        c.extend(more.iter().cloned());
        c
    }

    pub fn schema(self) -> SchemaRef {
        let fields: Vec<Field> = self
            .columns()
            .into_iter()
            .map(|(n, t, null)| Field::new(n, t, null))
            .collect();
        Arc::new(Schema::new(fields))
    }
}

/// A column being built.
enum Col {
    U64(UInt64Builder),
    U32(UInt32Builder),
    U8(UInt8Builder),
    I32(Int32Builder),
    Bool(BooleanBuilder),
    Str(StringBuilder),
}

impl Col {
    fn new(t: &DataType, cap: usize) -> Col {
        match t {
            DataType::UInt64 => Col::U64(UInt64Builder::with_capacity(cap)),
            DataType::UInt32 => Col::U32(UInt32Builder::with_capacity(cap)),
            DataType::UInt8 => Col::U8(UInt8Builder::with_capacity(cap)),
            DataType::Int32 => Col::I32(Int32Builder::with_capacity(cap)),
            DataType::Boolean => Col::Bool(BooleanBuilder::with_capacity(cap)),
            _ => Col::Str(StringBuilder::with_capacity(cap, cap * 8)),
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Col::U64(b) => Arc::new(b.finish()),
            Col::U32(b) => Arc::new(b.finish()),
            Col::U8(b) => Arc::new(b.finish()),
            Col::I32(b) => Arc::new(b.finish()),
            Col::Bool(b) => Arc::new(b.finish()),
            Col::Str(b) => Arc::new(b.finish()),
        }
    }
}

/// Appends one row's values, column by column, in schema order. A value of
/// the wrong type leaves its column short, which `finish` reports.
struct Row<'a> {
    cols: std::slice::IterMut<'a, Col>,
}

impl Row<'_> {
    fn u64(&mut self, v: Option<u64>) -> &mut Self {
        if let Some(Col::U64(b)) = self.cols.next() {
            b.append_option(v);
        }
        self
    }
    fn u32(&mut self, v: Option<u32>) -> &mut Self {
        if let Some(Col::U32(b)) = self.cols.next() {
            b.append_option(v);
        }
        self
    }
    fn u8(&mut self, v: Option<u8>) -> &mut Self {
        if let Some(Col::U8(b)) = self.cols.next() {
            b.append_option(v);
        }
        self
    }
    fn i32(&mut self, v: Option<i32>) -> &mut Self {
        if let Some(Col::I32(b)) = self.cols.next() {
            b.append_option(v);
        }
        self
    }
    fn bool(&mut self, v: bool) -> &mut Self {
        if let Some(Col::Bool(b)) = self.cols.next() {
            b.append_value(v);
        }
        self
    }
    fn str(&mut self, v: Option<&str>) -> &mut Self {
        if let Some(Col::Str(b)) = self.cols.next() {
            b.append_option(v);
        }
        self
    }
}

/// One kind's batch being built.
struct Table {
    schema: SchemaRef,
    cols: Vec<Col>,
    rows: usize,
    capacity: usize,
}

impl Table {
    fn new(kind: Kind, capacity: usize) -> Table {
        let schema = kind.schema();
        let cols = schema
            .fields()
            .iter()
            .map(|f| Col::new(f.data_type(), capacity))
            .collect();
        Table {
            schema,
            cols,
            rows: 0,
            capacity,
        }
    }

    fn row(&mut self) -> Row<'_> {
        self.rows += 1;
        Row {
            cols: self.cols.iter_mut(),
        }
    }

    fn finish(&mut self) -> Result<RecordBatch, String> {
        self.rows = 0;
        let arrays: Vec<ArrayRef> = self.cols.iter_mut().map(Col::finish).collect();
        // Builders keep no capacity after `finish`: reserve the next batch's.
        for (c, f) in self.cols.iter_mut().zip(self.schema.fields()) {
            *c = Col::new(f.data_type(), self.capacity);
        }
        RecordBatch::try_new(self.schema.clone(), arrays).map_err(|e| e.to_string())
    }
}

/// What the rows of a source carry from earlier elements: its context and
/// last timestamp.
#[derive(Clone, Copy, Default)]
struct SourceState {
    context: Option<Context>,
    timestamp: Option<u64>,
}

/// Elements sorted into per-kind batches of at most `batch_size` rows.
pub struct Batcher {
    tables: Vec<Option<Table>>,
    state: HashMap<(u8, u32), SourceState>,
    batch_size: usize,
}

impl Batcher {
    /// Batches of the `kinds` given (all kinds when empty).
    pub fn new(kinds: &[Kind], batch_size: usize) -> Batcher {
        let batch_size = batch_size.max(1);
        let tables = Kind::ALL
            .iter()
            .map(|k| (kinds.is_empty() || kinds.contains(k)).then(|| Table::new(*k, batch_size.min(1 << 16))))
            .collect();
        Batcher {
            tables,
            state: HashMap::new(),
            batch_size,
        }
    }

    /// Adds an element; returns a full batch when its table filled up.
    pub fn push(&mut self, item: &Item) -> Result<Option<(Kind, RecordBatch)>, String> {
        let key = (item.trace_id, item.origin.map_or(u32::MAX, |o| o.cpu));
        let st = self.state.entry(key).or_default();
        match item.element {
            Element::PeContext { context, .. } => st.context = Some(context),
            Element::Timestamp { timestamp, .. } => st.timestamp = Some(timestamp),
            _ => {}
        }
        let st = *st;
        let kind = Kind::of(&item.element);
        let Some(table) = self.tables[kind as usize].as_mut() else {
            return Ok(None);
        };
        let o = item.origin;
        let mut r = table.row();
        r.u64(Some(item.index))
            .u8(Some(item.trace_id))
            .i32(o.map(|o| o.cpu as i32))
            .i32(o.map(|o| o.pid))
            .i32(o.map(|o| o.tid));
        let ctx = st.context;
        match item.element {
            Element::InstrRange {
                isa,
                start,
                end,
                num_instr,
                last,
                cycle_count,
            } => {
                r.u64(Some(start))
                    .u64(Some(end))
                    .u32(Some(num_instr))
                    .str(Some(isa_name(isa)))
                    .str(Some(instr_type_name(last.kind)))
                    .str(Some(instr_subtype_name(last.subtype)))
                    .u8(Some(last.size))
                    .bool(last.executed && last.kind != InstrType::Other)
                    .bool(last.conditional)
                    .u32(cycle_count)
                    .u32(ctx.and_then(|c| c.context_id))
                    .u32(ctx.and_then(|c| c.vmid))
                    .u8(ctx.and_then(|c| c.exception_level.and_then(|l| l.number())))
                    .str(ctx.map(|c| security_name(c.security)))
                    .u64(st.timestamp);
            }
            Element::IRangeNoPath {
                isa,
                start,
                next,
                num_instr,
            } => {
                r.u64(Some(start))
                    .u64(Some(next))
                    .u32(Some(num_instr))
                    .str(Some(isa_name(isa)));
            }
            Element::PeContext {
                isa,
                context: c,
                cycle_count,
            } => {
                r.str(Some(isa_name(isa)))
                    .str(Some(security_name(c.security)))
                    .u8(c.exception_level.and_then(|l| l.number()))
                    .bool(c.bits64)
                    .u32(c.context_id)
                    .u32(c.vmid)
                    .u32(cycle_count);
            }
            Element::Exception {
                number,
                preferred_return,
                return_is_branch_target,
                cycle_count,
            } => {
                r.u32(Some(number))
                    .u64(preferred_return)
                    .bool(return_is_branch_target)
                    .u32(cycle_count)
                    .u64(st.timestamp);
            }
            Element::Timestamp { timestamp, cycle_count } => {
                r.u64(Some(timestamp)).u32(cycle_count);
            }
            Element::AddrNacc { addr, mem_space } => {
                r.u64(Some(addr)).str(Some(&mem_space.to_string()));
            }
            e => {
                r.str(Some(e.kind_name())).str(Some(&e.to_string()));
            }
        }
        if table.rows >= self.batch_size {
            return table.finish().map(|b| Some((kind, b)));
        }
        Ok(None)
    }

    /// The batches not yet full, at the end of the decode.
    pub fn flush(&mut self) -> Result<Vec<(Kind, RecordBatch)>, String> {
        let mut out = Vec::new();
        for (k, t) in Kind::ALL.iter().zip(self.tables.iter_mut()) {
            if let Some(t) = t
                && t.rows > 0
            {
                out.push((*k, t.finish()?));
            }
        }
        Ok(out)
    }
}
