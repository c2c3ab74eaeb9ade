//! Elements as Arrow record batches: one schema per kind of element,
//! built in batches of bounded size.

use std::sync::Arc;

use arrow_array::builder::{
    BooleanBufferBuilder, BooleanBuilder, Int32Builder, StringBuilder, UInt8Builder, UInt32Builder, UInt64Builder,
};
use arrow_array::types::{Int32Type, UInt8Type, UInt32Type, UInt64Type};
use arrow_array::{
    Array, ArrayRef, ArrowPrimitiveType, BooleanArray, DictionaryArray, PrimitiveArray, RecordBatch, StringArray,
};
use arrow_buffer::{BooleanBuffer, Buffer, NullBuffer};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use coresight_decode::arch::{InstrSubType, InstrType, Isa, SecurityState};
use coresight_decode::element::{Context, Element, LastInstr, TraceElement};

use crate::fields::{instr_subtype_name, instr_type_name, isa_name, security_name};
use crate::stream::{Item, Origin};

/// A column of names from a small fixed set: dictionary encoded, `UInt8`
/// keys into the set's names (pandas reads it as a categorical, and
/// `to_pylist()` gives the names). The key of a value is its position in
/// the set, which is the order the enum declares its variants in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Names {
    Isa,
    InstrType,
    InstrSubType,
    Security,
}

const ISAS: [Isa; 8] = [
    Isa::Arm,
    Isa::Thumb2,
    Isa::Aarch64,
    Isa::Tee,
    Isa::Jazelle,
    Isa::Custom,
    Isa::RiscV,
    Isa::Unknown,
];
const INSTR_TYPES: [InstrType; 7] = [
    InstrType::Other,
    InstrType::Branch,
    InstrType::BranchIndirect,
    InstrType::Isb,
    InstrType::DsbDmb,
    InstrType::WfiWfe,
    InstrType::Tstart,
];
const INSTR_SUBTYPES: [InstrSubType; 5] = [
    InstrSubType::None,
    InstrSubType::BranchLink,
    InstrSubType::V8Ret,
    InstrSubType::V8Eret,
    InstrSubType::V7ImpliedRet,
];
const SECURITY: [SecurityState; 4] = [
    SecurityState::Secure,
    SecurityState::NonSecure,
    SecurityState::Root,
    SecurityState::Realm,
];

// The key of a value is `value as u8`: the sets above list the variants in
// declaration order.
const _: () = {
    let mut i = 0;
    while i < ISAS.len() {
        assert!(ISAS[i] as usize == i);
        i += 1;
    }
    let mut i = 0;
    while i < INSTR_TYPES.len() {
        assert!(INSTR_TYPES[i] as usize == i);
        i += 1;
    }
    let mut i = 0;
    while i < INSTR_SUBTYPES.len() {
        assert!(INSTR_SUBTYPES[i] as usize == i);
        i += 1;
    }
    let mut i = 0;
    while i < SECURITY.len() {
        assert!(SECURITY[i] as usize == i);
        i += 1;
    }
};

impl Names {
    /// The names, in key order.
    pub fn names(self) -> Vec<&'static str> {
        match self {
            Names::Isa => ISAS.map(isa_name).to_vec(),
            Names::InstrType => INSTR_TYPES.map(instr_type_name).to_vec(),
            Names::InstrSubType => INSTR_SUBTYPES.map(instr_subtype_name).to_vec(),
            Names::Security => SECURITY.map(security_name).to_vec(),
        }
    }

    fn data_type() -> DataType {
        DataType::Dictionary(Box::new(DataType::UInt8), Box::new(DataType::Utf8))
    }
}

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

    fn columns(self) -> Vec<(&'static str, Type, bool)> {
        use Type::*;
        let mut c = vec![
            ("index", UInt64, false),
            ("trace_id", UInt8, false),
            ("cpu", Int32, true),
            ("pid", Int32, true),
            ("tid", Int32, true),
        ];
        let more: &[(&'static str, Type, bool)] = match self {
            Kind::InstrRange => &[
                ("start", UInt64, false),
                ("end", UInt64, false),
                ("num_instr", UInt32, false),
                ("isa", Dict(Names::Isa), false),
                ("last_type", Dict(Names::InstrType), false),
                ("last_subtype", Dict(Names::InstrSubType), false),
                ("last_size", UInt8, false),
                ("taken", Boolean, false),
                ("conditional", Boolean, false),
                ("cycle_count", UInt32, true),
                ("context_id", UInt32, true),
                ("vmid", UInt32, true),
                ("exception_level", UInt8, true),
                ("security", Dict(Names::Security), true),
                ("timestamp", UInt64, true),
            ],
            Kind::IRangeNoPath => &[
                ("start", UInt64, false),
                ("next", UInt64, false),
                ("num_instr", UInt32, false),
                ("isa", Dict(Names::Isa), false),
            ],
            Kind::PeContext => &[
                ("isa", Dict(Names::Isa), false),
                ("security", Dict(Names::Security), false),
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
            .map(|(n, t, null)| Field::new(n, t.data_type(), null))
            .collect();
        Arc::new(Schema::new(fields))
    }
}

/// A column's type.
#[derive(Clone, Copy, Debug)]
enum Type {
    UInt64,
    UInt32,
    UInt8,
    Int32,
    Boolean,
    Utf8,
    Dict(Names),
}

impl Type {
    fn data_type(self) -> DataType {
        match self {
            Type::UInt64 => DataType::UInt64,
            Type::UInt32 => DataType::UInt32,
            Type::UInt8 => DataType::UInt8,
            Type::Int32 => DataType::Int32,
            Type::Boolean => DataType::Boolean,
            Type::Utf8 => DataType::Utf8,
            Type::Dict(_) => Names::data_type(),
        }
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
    /// Keys, and the dictionary they index.
    Dict(UInt8Builder, Arc<StringArray>),
}

impl Col {
    fn new(t: Type, cap: usize) -> Col {
        match t {
            Type::UInt64 => Col::U64(UInt64Builder::with_capacity(cap)),
            Type::UInt32 => Col::U32(UInt32Builder::with_capacity(cap)),
            Type::UInt8 => Col::U8(UInt8Builder::with_capacity(cap)),
            Type::Int32 => Col::I32(Int32Builder::with_capacity(cap)),
            Type::Boolean => Col::Bool(BooleanBuilder::with_capacity(cap)),
            Type::Utf8 => Col::Str(StringBuilder::with_capacity(cap, cap * 8)),
            Type::Dict(n) => Col::Dict(UInt8Builder::with_capacity(cap), Arc::new(StringArray::from(n.names()))),
        }
    }

    fn finish(&mut self) -> Result<ArrayRef, String> {
        Ok(match self {
            Col::U64(b) => Arc::new(b.finish()),
            Col::U32(b) => Arc::new(b.finish()),
            Col::U8(b) => Arc::new(b.finish()),
            Col::I32(b) => Arc::new(b.finish()),
            Col::Bool(b) => Arc::new(b.finish()),
            Col::Str(b) => Arc::new(b.finish()),
            Col::Dict(b, names) => {
                let values: ArrayRef = names.clone();
                Arc::new(DictionaryArray::<UInt8Type>::try_new(b.finish(), values).map_err(|e| e.to_string())?)
            }
        })
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
    /// A key of a [`Names`] column (`None`: null).
    fn key(&mut self, v: Option<u8>) -> &mut Self {
        if let Some(Col::Dict(b, _)) = self.cols.next() {
            b.append_option(v);
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
    types: Vec<Type>,
    cols: Vec<Col>,
    rows: usize,
    capacity: usize,
}

impl Table {
    fn new(kind: Kind, capacity: usize) -> Table {
        let types: Vec<Type> = kind.columns().into_iter().map(|(_, t, _)| t).collect();
        let cols = types.iter().map(|t| Col::new(*t, capacity)).collect();
        Table {
            schema: kind.schema(),
            types,
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
        let arrays: Vec<ArrayRef> = self.cols.iter_mut().map(Col::finish).collect::<Result<_, _>>()?;
        // Builders keep no capacity after `finish`: reserve the next batch's.
        for (c, t) in self.cols.iter_mut().zip(&self.types) {
            *c = Col::new(*t, self.capacity);
        }
        RecordBatch::try_new(self.schema.clone(), arrays).map_err(|e| e.to_string())
    }
}

/// A nullable column of plain values and their validity, one byte a row
/// (cheaper to append than bits; packed once per batch).
struct Opt<T> {
    values: Vec<T>,
    valid: Vec<bool>,
}

impl<T: Default + Copy> Opt<T> {
    fn new(cap: usize) -> Self {
        Opt {
            values: Vec::with_capacity(cap),
            valid: Vec::with_capacity(cap),
        }
    }

    #[inline(always)]
    fn push(&mut self, v: Option<T>) {
        self.values.push(v.unwrap_or_default());
        self.valid.push(v.is_some());
    }

    /// `n` rows of `v`.
    fn fill(&mut self, v: Option<T>, n: usize) {
        self.values.resize(self.values.len() + n, v.unwrap_or_default());
        self.valid.resize(self.valid.len() + n, v.is_some());
    }
}

fn nullable<T: ArrowPrimitiveType>(o: &mut Opt<T::Native>, cap: usize) -> PrimitiveArray<T> {
    let values = std::mem::replace(&mut o.values, Vec::with_capacity(cap));
    let valid = std::mem::replace(&mut o.valid, Vec::with_capacity(cap));
    let nulls = if valid.iter().all(|v| *v) {
        None
    } else {
        let mut bits = BooleanBufferBuilder::new(valid.len());
        bits.append_slice(&valid);
        Some(bits.finish().into())
    };
    PrimitiveArray::new(values.into(), nulls)
}

/// The fields of an `instr_range` element, from an [`Element`] or straight
/// from the decoder's [`TraceElement`].
#[derive(Clone, Copy)]
pub struct RangeFields {
    pub isa: Isa,
    pub start: u64,
    pub end: u64,
    pub num_instr: u32,
    pub last: LastInstr,
    pub cycle_count: Option<u32>,
}

impl RangeFields {
    /// The fields of a generic element of type `InstrRange`, as
    /// [`Element::from_generic`] reads them.
    #[inline(always)]
    pub fn of(e: &TraceElement) -> RangeFields {
        RangeFields {
            isa: e.isa,
            start: e.st_addr,
            end: e.en_addr,
            num_instr: e.num_instr_range,
            last: LastInstr {
                executed: e.last_instr_exec,
                size: e.last_instr_sz,
                kind: e.last_i_type,
                subtype: e.last_i_subtype,
                conditional: e.last_instr_cond,
            },
            cycle_count: e.has_cc.then_some(e.cycle_count),
        }
    }
}

/// A dictionary column: `keys` into `names`. The keys are checked in one
/// pass (`try_new` checks them one at a time, with their validity).
fn dictionary(keys: PrimitiveArray<UInt8Type>, names: &Arc<StringArray>) -> Result<ArrayRef, String> {
    let values: ArrayRef = names.clone();
    if keys.values().iter().fold(0u8, |m, k| m.max(*k)) as usize >= names.len() {
        return DictionaryArray::<UInt8Type>::try_new(keys, values)
            .map(|d| Arc::new(d) as ArrayRef)
            .map_err(|e| e.to_string());
    }
    // SAFETY: every key, of a null slot or not, is below the number of
    // values (checked above), and the values are a valid string array.
    Ok(Arc::new(unsafe {
        DictionaryArray::<UInt8Type>::new_unchecked(keys, values)
    }))
}

/// One `instr_range` row, kept whole until the batch is made: one write
/// and one length check a row instead of one per column.
#[derive(Clone, Copy)]
struct RangeRow {
    index: u64,
    start: u64,
    end: u64,
    num_instr: u32,
    cycle_count: u32,
    trace_id: u8,
    isa: u8,
    last_type: u8,
    last_subtype: u8,
    last_size: u8,
    taken: bool,
    conditional: bool,
    has_cycle_count: bool,
}

/// A column of the rows' `value`, with no bitmap (one tight loop).
fn column<T: ArrowPrimitiveType>(rows: &[RangeRow], value: impl Fn(&RangeRow) -> T::Native) -> PrimitiveArray<T> {
    let v: Vec<T::Native> = rows.iter().map(value).collect();
    PrimitiveArray::new(v.into(), None)
}

/// The rows' `bit`, packed 64 rows a word.
fn bits(rows: &[RangeRow], bit: impl Fn(&RangeRow) -> bool) -> BooleanBuffer {
    let words: Vec<u64> = rows
        .chunks(64)
        .map(|c| {
            c.iter()
                .enumerate()
                .fold(0u64, |w, (i, r)| w | (u64::from(bit(r)) << i))
        })
        .collect();
    BooleanBuffer::new(Buffer::from_vec(words), 0, rows.len())
}

/// The `instr_range` table, nearly every element of a trace: whole rows,
/// cut into typed columns when the batch is made (the generic [`Table`]
/// would cost more than the decode).
struct RangeTable {
    schema: SchemaRef,
    rows: Vec<RangeRow>,
    cpu: Opt<i32>,
    pid: Opt<i32>,
    tid: Opt<i32>,
    /// The source state of the rows from each row on: it changes rarely,
    /// so its columns (context_id, vmid, exception_level, security,
    /// timestamp) are filled in runs when the batch is made.
    runs: Vec<(usize, SourceState)>,
    generation: Option<u64>,
    names: [Arc<StringArray>; 4],
}

impl RangeTable {
    fn new(capacity: usize) -> RangeTable {
        let c = capacity;
        let names = [Names::Isa, Names::InstrType, Names::InstrSubType, Names::Security]
            .map(|n| Arc::new(StringArray::from(n.names())));
        RangeTable {
            schema: Kind::InstrRange.schema(),
            rows: Vec::with_capacity(c),
            cpu: Opt::new(0),
            pid: Opt::new(0),
            tid: Opt::new(0),
            runs: Vec::new(),
            generation: None,
            names,
        }
    }

    fn rows(&self) -> usize {
        self.rows.len()
    }

    #[inline(always)]
    fn push(&mut self, item: &Item, st: &SourceState, generation: u64) {
        if let Element::InstrRange {
            isa,
            start,
            end,
            num_instr,
            last,
            cycle_count,
        } = item.element
        {
            let r = RangeFields {
                isa,
                start,
                end,
                num_instr,
                last,
                cycle_count,
            };
            self.push_fields(item.index, item.trace_id, item.origin, &r, st, generation);
        }
    }

    #[inline(always)]
    fn push_fields(
        &mut self,
        index: u64,
        trace_id: u8,
        origin: Option<Origin>,
        r: &RangeFields,
        st: &SourceState,
        generation: u64,
    ) {
        let RangeFields {
            isa,
            start,
            end,
            num_instr,
            last,
            cycle_count,
        } = *r;
        // cpu, pid, tid: only perf.data items have them; until one comes,
        // the columns are all null and not written row by row.
        if origin.is_some() && self.cpu.values.len() < self.rows.len() {
            let missing = self.rows.len() - self.cpu.values.len();
            for c in [&mut self.cpu, &mut self.pid, &mut self.tid] {
                c.values.resize(c.values.len() + missing, 0);
                c.valid.resize(c.valid.len() + missing, false);
            }
        }
        if origin.is_some() || !self.cpu.values.is_empty() {
            let o = origin;
            self.cpu.push(o.map(|o| o.cpu as i32));
            self.pid.push(o.map(|o| o.pid));
            self.tid.push(o.map(|o| o.tid));
        }
        self.rows.push(RangeRow {
            index,
            start,
            end,
            num_instr,
            cycle_count: cycle_count.unwrap_or(0),
            trace_id,
            isa: isa as u8,
            last_type: last.kind as u8,
            last_subtype: last.subtype as u8,
            last_size: last.size,
            taken: last.executed && last.kind != InstrType::Other,
            conditional: last.conditional,
            has_cycle_count: cycle_count.is_some(),
        });
        if self.generation != Some(generation) {
            self.generation = Some(generation);
            self.runs.push((self.rows.len() - 1, *st));
        }
    }

    /// The columns taken from the source state, filled run by run.
    /// (context_id, vmid, exception_level, security keys, timestamp)
    fn state_columns(&mut self) -> (ArrayRef, ArrayRef, ArrayRef, PrimitiveArray<UInt8Type>, ArrayRef) {
        let rows = self.rows.len();
        let mut context_id = Opt::<u32>::new(rows);
        let mut vmid = Opt::<u32>::new(rows);
        let mut level = Opt::<u8>::new(rows);
        let mut security = Opt::<u8>::new(rows);
        let mut timestamp = Opt::<u64>::new(rows);
        for (i, (from, st)) in self.runs.iter().enumerate() {
            let to = self.runs.get(i + 1).map_or(rows, |r| r.0);
            let ctx = st.context;
            context_id.fill(ctx.and_then(|c| c.context_id), to - from);
            vmid.fill(ctx.and_then(|c| c.vmid), to - from);
            level.fill(ctx.and_then(|c| c.exception_level.and_then(|l| l.number())), to - from);
            security.fill(ctx.map(|c| c.security as u8), to - from);
            timestamp.fill(st.timestamp, to - from);
        }
        self.runs.clear();
        self.generation = None;
        (
            Arc::new(nullable::<UInt32Type>(&mut context_id, 0)),
            Arc::new(nullable::<UInt32Type>(&mut vmid, 0)),
            Arc::new(nullable::<UInt8Type>(&mut level, 0)),
            nullable::<UInt8Type>(&mut security, 0),
            Arc::new(nullable::<UInt64Type>(&mut timestamp, 0)),
        )
    }

    fn finish(&mut self) -> Result<RecordBatch, String> {
        let (context_id, vmid, exception_level, security, timestamp) = self.state_columns();
        let rows = &self.rows[..];
        let n = rows.len();
        let origin = |o: &mut Opt<i32>| -> ArrayRef {
            if o.values.is_empty() {
                Arc::new(PrimitiveArray::<Int32Type>::new_null(n))
            } else {
                Arc::new(nullable::<Int32Type>(o, 0))
            }
        };
        let (cpu, pid, tid) = (origin(&mut self.cpu), origin(&mut self.pid), origin(&mut self.tid));
        let has_cc = bits(rows, |r| r.has_cycle_count);
        let cc_nulls = (has_cc.count_set_bits() < n).then(|| NullBuffer::new(has_cc));
        let arrays: Vec<ArrayRef> = vec![
            Arc::new(column::<UInt64Type>(rows, |r| r.index)),
            Arc::new(column::<UInt8Type>(rows, |r| r.trace_id)),
            cpu,
            pid,
            tid,
            Arc::new(column::<UInt64Type>(rows, |r| r.start)),
            Arc::new(column::<UInt64Type>(rows, |r| r.end)),
            Arc::new(column::<UInt32Type>(rows, |r| r.num_instr)),
            dictionary(column(rows, |r| r.isa), &self.names[0])?,
            dictionary(column(rows, |r| r.last_type), &self.names[1])?,
            dictionary(column(rows, |r| r.last_subtype), &self.names[2])?,
            Arc::new(column::<UInt8Type>(rows, |r| r.last_size)),
            Arc::new(BooleanArray::new(bits(rows, |r| r.taken), None)),
            Arc::new(BooleanArray::new(bits(rows, |r| r.conditional), None)),
            Arc::new(PrimitiveArray::<UInt32Type>::new(
                rows.iter().map(|r| r.cycle_count).collect(),
                cc_nulls,
            )),
            context_id,
            vmid,
            exception_level,
            dictionary(security, &self.names[3])?,
            timestamp,
        ];
        // The rows' vector is kept for the next batch, with its capacity.
        self.rows.clear();
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
    /// Per kind, but `instr_range`'s, which is `ranges`.
    tables: Vec<Option<Table>>,
    ranges: Option<RangeTable>,
    /// Per source (trace ID, CPU): a handful, looked up linearly, the
    /// last one found first.
    state: Vec<((u8, u32), SourceState)>,
    last: usize,
    /// Changes when the state rows take changes: another source, a new
    /// context or timestamp.
    generation: u64,
    batch_size: usize,
}

impl Batcher {
    /// Batches of the `kinds` given (all kinds when empty).
    pub fn new(kinds: &[Kind], batch_size: usize) -> Batcher {
        let batch_size = batch_size.max(1);
        let wanted = |k: &Kind| kinds.is_empty() || kinds.contains(k);
        let capacity = batch_size.min(1 << 16);
        let tables = Kind::ALL
            .iter()
            .map(|k| (*k != Kind::InstrRange && wanted(k)).then(|| Table::new(*k, capacity)))
            .collect();
        Batcher {
            tables,
            ranges: wanted(&Kind::InstrRange).then(|| RangeTable::new(capacity)),
            state: Vec::new(),
            last: 0,
            generation: 0,
            batch_size,
        }
    }

    /// The index in `state` of the source `key` (trace ID, CPU), added
    /// when new; another source than the last changes the generation.
    #[inline(always)]
    fn source(&mut self, key: (u8, u32)) -> usize {
        let at = match self.state.get(self.last) {
            Some((k, _)) if *k == key => self.last,
            _ => match self.state.iter().position(|(k, _)| *k == key) {
                Some(i) => i,
                None => {
                    self.state.push((key, SourceState::default()));
                    self.state.len() - 1
                }
            },
        };
        if at != self.last {
            self.generation += 1;
        }
        self.last = at;
        at
    }

    /// Adds an `instr_range` element of trace ID `trace_id` given by its
    /// fields (no perf.data origin); returns a full batch when its table
    /// filled up. The same rows as [`push`](Self::push) of the element.
    #[inline(always)]
    pub fn push_range(
        &mut self,
        index: u64,
        trace_id: u8,
        r: &RangeFields,
    ) -> Result<Option<(Kind, RecordBatch)>, String> {
        let at = self.source((trace_id, u32::MAX));
        let Some(t) = self.ranges.as_mut() else {
            return Ok(None);
        };
        t.push_fields(index, trace_id, None, r, &self.state[at].1, self.generation);
        if t.rows() >= self.batch_size {
            return t.finish().map(|b| Some((Kind::InstrRange, b)));
        }
        Ok(None)
    }

    /// Adds an element; returns a full batch when its table filled up.
    #[inline(always)]
    pub fn push(&mut self, item: &Item) -> Result<Option<(Kind, RecordBatch)>, String> {
        let at = self.source((item.trace_id, item.origin.map_or(u32::MAX, |o| o.cpu)));
        let st = &mut self.state[at].1;
        match item.element {
            Element::PeContext { context, .. } => {
                st.context = Some(context);
                self.generation += 1;
            }
            Element::Timestamp { timestamp, .. } => {
                st.timestamp = Some(timestamp);
                self.generation += 1;
            }
            _ => {}
        }
        if let Element::InstrRange { .. } = item.element {
            let Some(t) = self.ranges.as_mut() else {
                return Ok(None);
            };
            t.push(item, st, self.generation);
            if t.rows() >= self.batch_size {
                return t.finish().map(|b| Some((Kind::InstrRange, b)));
            }
            return Ok(None);
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
                    .key(Some(isa as u8))
                    .key(Some(last.kind as u8))
                    .key(Some(last.subtype as u8))
                    .u8(Some(last.size))
                    .bool(last.executed && last.kind != InstrType::Other)
                    .bool(last.conditional)
                    .u32(cycle_count)
                    .u32(ctx.and_then(|c| c.context_id))
                    .u32(ctx.and_then(|c| c.vmid))
                    .u8(ctx.and_then(|c| c.exception_level.and_then(|l| l.number())))
                    .key(ctx.map(|c| c.security as u8))
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
                    .key(Some(isa as u8));
            }
            Element::PeContext {
                isa,
                context: c,
                cycle_count,
            } => {
                r.key(Some(isa as u8))
                    .key(Some(c.security as u8))
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
            Element::AddrNacc { addr, mem_space, .. } => {
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
        if let Some(t) = self.ranges.as_mut()
            && t.rows() > 0
        {
            out.push((Kind::InstrRange, t.finish()?));
        }
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
