//! Target memory: images of the traced program, and the mapper that picks
//! the image for an address and memory space.
//!
//! Accessors come in three kinds: file regions (read on demand, through the
//! mapper's page cache), in-memory buffers, and callbacks. ELF files are
//! mapped by their loadable segments. The [`MemAccMapper`] refuses
//! overlapping images in overlapping memory spaces, reads never cross the
//! end of an image and never return bytes that are not there.

use std::fmt::{self, Write as _};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::errcode::ErrCode;

/// Memory image of the traced target (OpenCSD's `ITargetMemAccess`).
#[doc(alias = "ITargetMemAccess")]
pub trait TargetMemAccess: Send {
    /// Reads up to `buf.len()` bytes at `address` as seen in `mem_space` by
    /// the core traced on `trace_id`. Returns how many bytes were read
    /// (0 when nothing is mapped there); never more than exist.
    fn read_target_memory(
        &mut self,
        address: u64,
        trace_id: u8,
        mem_space: MemSpace,
        buf: &mut [u8],
    ) -> Result<usize, ErrCode>;

    /// Drops any cached memory for `trace_id` (memory changed under it).
    fn invalidate_mem_acc_cache(&mut self, _trace_id: u8) {}

    /// A number that changes whenever what this memory returns for
    /// `trace_id` may have changed (images added or removed,
    /// `invalidate_mem_acc_cache` for that ID). Decoders keep the blocks
    /// of code they have walked while it stays the same: an implementation
    /// whose contents change must change it.
    fn generation(&self, _trace_id: u8) -> u64 {
        0
    }

    /// True when what this memory returns changes only with its
    /// [`generation`](Self::generation): never with the traced context and
    /// never through `invalidate_mem_acc_cache`. Decoders then keep the
    /// code they have walked across context changes (a process switch
    /// does not drop every block). The default, false, suits memory that
    /// follows the context (a callback serving the current process).
    fn contents_fixed(&self) -> bool {
        false
    }
}

/// Memory space(s): a set of exception level / security state pairs
/// (OpenCSD's `ocsd_mem_space_acc_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemSpace(u8);

impl MemSpace {
    /// No space.
    pub(crate) const NONE: MemSpace = MemSpace(0x00);
    /// EL0/EL1, Secure.
    pub const EL1S: MemSpace = MemSpace(0x01);
    /// EL0/EL1, Non-secure.
    pub const EL1N: MemSpace = MemSpace(0x02);
    /// EL2, Non-secure.
    pub const EL2: MemSpace = MemSpace(0x04);
    /// EL3.
    pub const EL3: MemSpace = MemSpace(0x08);
    /// EL2, Secure.
    pub(crate) const EL2S: MemSpace = MemSpace(0x10);
    /// EL0/EL1, Realm.
    pub(crate) const EL1R: MemSpace = MemSpace(0x20);
    /// EL2, Realm.
    pub(crate) const EL2R: MemSpace = MemSpace(0x40);
    /// Root (EL3 with RME).
    pub(crate) const ROOT: MemSpace = MemSpace(0x80);
    /// Any secure space.
    pub const S: MemSpace = MemSpace(0x19);
    /// Any non-secure space.
    pub const N: MemSpace = MemSpace(0x06);
    /// Any realm space.
    pub(crate) const R: MemSpace = MemSpace(0x60);
    /// Every space.
    pub const ANY: MemSpace = MemSpace(0xff);

    /// The set as OpenCSD's bit mask.
    pub const fn bits(self) -> u8 {
        self.0
    }
    /// A set from OpenCSD's bit mask.
    pub const fn from_bits(bits: u8) -> MemSpace {
        MemSpace(bits)
    }
    /// True when the two sets share a space.
    pub(crate) const fn intersects(self, other: MemSpace) -> bool {
        self.0 & other.0 != 0
    }

    /// Parses a snapshot `space=` value (`EL1N`, `EL2`, `S`, `N`, `ANY`, ...).
    /// An empty string is `ANY`; an unknown name is `None`.
    pub fn from_snapshot_name(name: &str) -> Option<MemSpace> {
        Some(match name {
            "" | "ANY" => MemSpace::ANY,
            "EL1S" | "SP" => MemSpace::EL1S,
            "EL1N" | "P" | "NP" => MemSpace::EL1N,
            "EL1R" => MemSpace::EL1R,
            "EL2S" => MemSpace::EL2S,
            "EL2" | "EL2N" | "H" => MemSpace::EL2,
            "EL2R" => MemSpace::EL2R,
            "EL3" => MemSpace::EL3,
            "ROOT" => MemSpace::ROOT,
            "S" => MemSpace::S,
            "N" => MemSpace::N,
            "R" => MemSpace::R,
            _ => return None,
        })
    }
}

impl Default for MemSpace {
    fn default() -> Self {
        MemSpace::ANY
    }
}

impl fmt::Display for MemSpace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match *self {
            MemSpace::NONE => "None",
            MemSpace::EL1S => "EL1S",
            MemSpace::EL1N => "EL1N",
            MemSpace::EL2 => "EL2N",
            MemSpace::EL3 => "EL3",
            MemSpace::EL2S => "EL2S",
            MemSpace::EL1R => "EL1R",
            MemSpace::EL2R => "EL2R",
            MemSpace::ROOT => "Root",
            MemSpace::S => "Any S",
            MemSpace::N => "Any NS",
            MemSpace::R => "Any R",
            MemSpace::ANY => "Any",
            other => {
                const NAMES: [&str; 8] = ["EL1S", "EL1N", "EL2N", "EL3", "EL2S", "EL1R", "EL2R", "Root"];
                for (bit, n) in NAMES.iter().enumerate() {
                    if other.0 & (1 << bit) != 0 {
                        write!(f, "{n},")?;
                    }
                }
                return Ok(());
            }
        };
        f.write_str(name)
    }
}

/// Why a memory image could not be mapped: the file or address range at
/// fault and what was wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// The image file cannot be opened (missing, unreadable, not a
    /// regular file).
    #[error("{}: cannot open memory image: {reason}", path.display())]
    FileOpen {
        /// The file.
        path: PathBuf,
        /// Why, in words.
        reason: String,
    },
    /// The region asked for is not inside the file.
    #[error("{}: cannot map {size} bytes from file offset {offset}: the file holds {file_len} usable bytes", path.display())]
    RegionOutsideFile {
        /// The file.
        path: PathBuf,
        /// Offset of the region in the file.
        offset: u64,
        /// Bytes asked for.
        size: u64,
        /// Bytes of the file that can be mapped (its length rounded down
        /// to an even number, as OpenCSD reads it).
        file_len: u64,
    },
    /// A new region of a file already mapped overlaps one of its regions.
    #[error("{}: region at 0x{start:x} ({size} bytes) overlaps a region of this file already mapped", path.display())]
    RegionOverlap {
        /// The file.
        path: PathBuf,
        /// Address the region would start at.
        start: u64,
        /// Bytes of the region.
        size: u64,
    },
    /// The image overlaps one already mapped in an overlapping memory space.
    #[error(
        "image at 0x{start:x}-0x{end:x} ({space}) overlaps the image at 0x{mapped_start:x}-0x{mapped_end:x} ({mapped_space}) already mapped"
    )]
    Overlap {
        /// First address of the new image.
        start: u64,
        /// Last address of the new image.
        end: u64,
        /// Memory space of the new image.
        space: MemSpace,
        /// First address of the mapped image it overlaps.
        mapped_start: u64,
        /// Last address of the mapped image it overlaps.
        mapped_end: u64,
        /// Memory space of the mapped image it overlaps.
        mapped_space: MemSpace,
    },
    /// The address range is empty or runs past the end of the address
    /// space.
    #[error(
        "invalid address range: {size} bytes at 0x{start:x} (expected at least one byte, within the 64-bit address space)"
    )]
    InvalidRange {
        /// First address.
        start: u64,
        /// Bytes.
        size: u64,
    },
    /// The file is not an ELF file goblin can read.
    #[error("{}: not a readable ELF file: {reason}", path.display())]
    Elf {
        /// The file.
        path: PathBuf,
        /// What the ELF reader said.
        reason: String,
    },
    /// The decode tree has no memory (it only lists packets).
    #[error("no memory to map images into: the decode tree was made to list packets, not to decode instructions")]
    NoMemory,
    /// No image mapped holds the address in the memory space (removing an
    /// image by address).
    #[error("no image mapped at 0x{addr:x} in {space}")]
    NotMapped {
        /// The address asked for.
        addr: u64,
        /// The memory space asked for.
        space: MemSpace,
    },
}

impl MemoryError {
    /// The OpenCSD error code for this failure (what OpenCSD's listing
    /// shows: a file it cannot map is `OCSD_ERR_NOT_INIT`).
    pub fn code(&self) -> ErrCode {
        match self {
            MemoryError::FileOpen { .. } | MemoryError::RegionOutsideFile { .. } | MemoryError::NoMemory => {
                ErrCode::NotInit
            }
            MemoryError::RegionOverlap { .. } | MemoryError::NotMapped { .. } => ErrCode::InvalidParamVal,
            MemoryError::Overlap { .. } => ErrCode::MemAccOverlap,
            MemoryError::InvalidRange { .. } => ErrCode::MemAccRangeInvalid,
            MemoryError::Elf { .. } => ErrCode::FileError,
        }
    }
}

/// An inclusive address range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AddrRange {
    /// First address in the range.
    pub start: u64,
    /// Last address in the range (inclusive).
    pub end: u64,
}

impl AddrRange {
    /// The range of `size` (> 0) bytes at `start`; `None` if it would wrap.
    pub(crate) fn with_size(start: u64, size: u64) -> Option<AddrRange> {
        if size == 0 {
            return None;
        }
        Some(AddrRange {
            start,
            end: start.checked_add(size - 1)?,
        })
    }
    /// Whether `addr` is in the range.
    pub(crate) fn contains(&self, addr: u64) -> bool {
        addr >= self.start && addr <= self.end
    }
    /// Whether the two ranges share an address.
    pub(crate) fn overlaps(&self, other: &AddrRange) -> bool {
        self.start <= other.end && other.start <= self.end
    }
    /// Bytes available from `addr` to the end of the range, capped at `want`.
    pub(crate) fn bytes_from(&self, addr: u64, want: usize) -> usize {
        if !self.contains(addr) {
            return 0;
        }
        let avail = self.end - addr + 1;
        if avail >= want as u64 { want } else { avail as usize }
    }
}

/// The kind of an accessor, as shown in the mapped-ranges listing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AccessorKind {
    /// A file read on demand ([`FileAccessor`]).
    File,
    /// Bytes in memory ([`BufferAccessor`]).
    Buffer,
    /// A user callback ([`CallbackAccessor`]).
    Callback,
}

/// One memory image.
pub trait MemAccessor: Send {
    /// What kind of accessor this is.
    fn kind(&self) -> AccessorKind;
    /// The address ranges this accessor serves.
    fn ranges(&self) -> &[AddrRange];
    /// The memory spaces this image stands for.
    fn mem_space(&self) -> MemSpace;
    /// Reads bytes at `addr` into `buf`, never past the end of the range
    /// holding `addr`. Returns how many bytes were read.
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> usize;
    /// Appends up to `len` bytes read at `addr` to `out`, never past the
    /// end of the range holding `addr`. Returns how many bytes were read.
    /// By default through [`read`](Self::read) into cleared space; an
    /// accessor that can read into `out`'s spare capacity as it is (a
    /// file) does so, and the page cache's pages are not cleared first.
    fn read_append(&mut self, addr: u64, len: usize, out: &mut Vec<u8>) -> usize {
        let start = out.len();
        out.resize(start + len, 0);
        let n = self.read(addr, &mut out[start..]).min(len);
        out.truncate(start + n);
        n
    }
    /// Whether reads should go through the mapper's page cache.
    fn cacheable(&self) -> bool {
        false
    }
    /// Whether the bytes served never change (a file or a buffer): then
    /// invalidating the memory cache leaves what decoders walked valid.
    fn contents_fixed(&self) -> bool {
        false
    }
    /// Appends the description OpenCSD logs for the mapped-ranges listing.
    fn describe(&self, out: &mut String) {
        describe_ranges(self.kind(), self.ranges(), self.mem_space(), out);
    }
}

/// The first `len` bytes of `file`, or `None` when it has fewer now (it
/// shrank since its length was taken): then it is read on demand.
fn hold(file: &mut File, len: u64) -> Option<Box<[u8]>> {
    // Read into uncleared capacity: clearing it first would cost more
    // than the read.
    let mut bytes = Vec::with_capacity(usize::try_from(len).ok()?);
    file.take(len).read_to_end(&mut bytes).ok()?;
    (bytes.len() as u64 == len).then(|| bytes.into_boxed_slice())
}

fn describe_ranges(kind: AccessorKind, ranges: &[AddrRange], space: MemSpace, out: &mut String) {
    let tag = match kind {
        AccessorKind::File => "FileAcc",
        AccessorKind::Buffer => "BuffAcc",
        AccessorKind::Callback => "CB  Acc",
    };
    for (i, r) in ranges.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let _ = write!(out, "{tag}; Range::0x{:x}:{:x}; Mem Space::{space}", r.start, r.end);
    }
}

/// A region of a file mapped at an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileRegion {
    range: AddrRange,
    file_offset: u64,
}

/// A file (or regions of it) mapped into target memory. A file of at
/// most [`FileAccessor::HOLD_LIMIT`] bytes is read whole when opened and
/// served from memory (a mapper holds no more than that in all its files
/// together); a larger one is read on demand, through the mapper's page
/// cache.
pub struct FileAccessor {
    path: PathBuf,
    file: File,
    /// Usable size: OpenCSD rounds the file length down to an even number.
    file_size: u64,
    /// The first `file_size` bytes, when the file is small enough to hold.
    held: Option<Box<[u8]>>,
    regions: Vec<FileRegion>,
    ranges: Vec<AddrRange>,
    space: MemSpace,
}

impl FileAccessor {
    /// Most bytes of image files held in memory: by one accessor, and by
    /// all the files of one [`MemAccMapper`] together (so a snapshot of
    /// many large dumps is not read into memory whole). A snapshot's dumps
    /// are mostly a few megabytes, and a read from memory costs a tenth of
    /// a cached one.
    pub const HOLD_LIMIT: u64 = 32 << 20;

    /// Maps `size` bytes of the file at `offset` to `start`; `offset` and
    /// `size` both 0 map the whole file. Fails if the file cannot be
    /// opened or is too short for the region (OpenCSD reports both as
    /// `OCSD_ERR_NOT_INIT`: see [`MemoryError::code`]).
    pub fn open(
        path: impl Into<PathBuf>,
        start: u64,
        offset: u64,
        size: u64,
        space: MemSpace,
    ) -> Result<FileAccessor, MemoryError> {
        Self::open_holding(path, start, offset, size, space, Self::HOLD_LIMIT)
    }

    /// As [`open`](Self::open), holding the file in memory only if it has
    /// at most `hold_up_to` bytes.
    pub(crate) fn open_holding(
        path: impl Into<PathBuf>,
        start: u64,
        offset: u64,
        size: u64,
        space: MemSpace,
        hold_up_to: u64,
    ) -> Result<FileAccessor, MemoryError> {
        let path = path.into();
        // Only a regular file: opening a FIFO would block until a writer
        // came, and a directory or device has no bytes to map.
        let len = crate::fileio::check_regular_file(&path).map_err(|e| MemoryError::FileOpen {
            path: path.clone(),
            reason: e.message,
        })?;
        let mut file = File::open(&path).map_err(|e| MemoryError::FileOpen {
            path: path.clone(),
            reason: crate::fileio::io_words(&e),
        })?;
        let file_size = len & !1;
        let held = if file_size <= hold_up_to.min(Self::HOLD_LIMIT) {
            hold(&mut file, file_size)
        } else {
            None
        };
        let mut acc = FileAccessor {
            path,
            file,
            file_size,
            held,
            regions: Vec::new(),
            ranges: Vec::new(),
            space,
        };
        let size = if offset == 0 && size == 0 { acc.file_size } else { size };
        acc.add_region(start, offset, size)?;
        Ok(acc)
    }

    /// The file mapped.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Adds another region of the same file. Fails when it would run past
    /// the end of the file or overlap a region already mapped.
    pub(crate) fn add_region(&mut self, start: u64, offset: u64, size: u64) -> Result<(), MemoryError> {
        let outside = || MemoryError::RegionOutsideFile {
            path: self.path.clone(),
            offset,
            size,
            file_len: self.file_size,
        };
        if self.file_size == 0 || size == 0 {
            return Err(outside());
        }
        if offset.checked_add(size).is_none_or(|end| end > self.file_size) {
            return Err(outside());
        }
        let range = AddrRange::with_size(start, size).ok_or(MemoryError::InvalidRange { start, size })?;
        // Regions are kept in address order and never overlap, so only the
        // neighbours of the new one can overlap it: a snapshot of many
        // dumps of one file adds each in logarithmic time (in address
        // order, at the end).
        let at = self.regions.partition_point(|r| r.range.start < start);
        let before = at.checked_sub(1).map(|i| &self.ranges[i]);
        if before
            .into_iter()
            .chain(self.ranges.get(at))
            .any(|r| r.overlaps(&range))
        {
            return Err(MemoryError::RegionOverlap {
                path: self.path.clone(),
                start,
                size,
            });
        }
        self.regions.insert(
            at,
            FileRegion {
                range,
                file_offset: offset,
            },
        );
        self.ranges.insert(at, range);
        Ok(())
    }

    /// True when `addr` starts one of the regions.
    pub(crate) fn starts_region(&self, addr: u64) -> bool {
        self.ranges.binary_search_by_key(&addr, |r| r.start).is_ok()
    }

    /// Bytes of the file held in memory.
    fn held_len(&self) -> u64 {
        self.held.as_ref().map_or(0, |h| h.len() as u64)
    }

    /// Where `addr` is in the file, and how many of `len` bytes from it
    /// the region holding it has.
    fn file_pos(&self, addr: u64, len: usize) -> Option<(u64, usize)> {
        let region = self.region_for(addr)?;
        let n = region.range.bytes_from(addr, len);
        Some((region.file_offset + (addr - region.range.start), n))
    }

    fn region_for(&self, addr: u64) -> Option<&FileRegion> {
        let at = self.regions.partition_point(|r| r.range.start <= addr);
        at.checked_sub(1)
            .map(|i| &self.regions[i])
            .filter(|r| r.range.contains(addr))
    }
}

impl MemAccessor for FileAccessor {
    fn contents_fixed(&self) -> bool {
        true
    }
    fn kind(&self) -> AccessorKind {
        AccessorKind::File
    }
    fn ranges(&self) -> &[AddrRange] {
        &self.ranges
    }
    fn mem_space(&self) -> MemSpace {
        self.space
    }
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> usize {
        let Some((pos, n)) = self.file_pos(addr, buf.len()) else {
            return 0;
        };
        if let Some(held) = &self.held {
            // Regions lie inside the file's first `file_size` bytes.
            let pos = pos as usize;
            buf[..n].copy_from_slice(&held[pos..pos + n]);
            return n;
        }
        if self.file.seek(SeekFrom::Start(pos)).is_err() {
            return 0;
        }
        let mut done = 0;
        while done < n {
            match self.file.read(&mut buf[done..n]) {
                Ok(0) | Err(_) => break,
                Ok(k) => done += k,
            }
        }
        done
    }
    fn read_append(&mut self, addr: u64, len: usize, out: &mut Vec<u8>) -> usize {
        let Some((pos, n)) = self.file_pos(addr, len) else {
            return 0;
        };
        if let Some(held) = &self.held {
            let pos = pos as usize;
            out.extend_from_slice(&held[pos..pos + n]);
            return n;
        }
        if self.file.seek(SeekFrom::Start(pos)).is_err() {
            return 0;
        }
        // Reads into the spare capacity without clearing it; on an error
        // what was read before it stays.
        let start = out.len();
        let _ = (&mut self.file).take(n as u64).read_to_end(out);
        out.len() - start
    }
    fn cacheable(&self) -> bool {
        self.held.is_none()
    }
    fn describe(&self, out: &mut String) {
        describe_ranges(self.kind(), &self.ranges, self.space, out);
        let _ = write!(out, "\nFilename={}", self.path.display());
    }
}

/// An in-memory image.
pub struct BufferAccessor {
    range: [AddrRange; 1],
    data: Vec<u8>,
    space: MemSpace,
}

impl BufferAccessor {
    /// Maps `data` at `start`. Fails for an empty buffer or one that would
    /// wrap the address space.
    pub fn new(start: u64, data: Vec<u8>, space: MemSpace) -> Result<BufferAccessor, MemoryError> {
        let size = data.len() as u64;
        let range = AddrRange::with_size(start, size).ok_or(MemoryError::InvalidRange { start, size })?;
        Ok(BufferAccessor {
            range: [range],
            data,
            space,
        })
    }
}

impl MemAccessor for BufferAccessor {
    fn contents_fixed(&self) -> bool {
        true
    }
    fn kind(&self) -> AccessorKind {
        AccessorKind::Buffer
    }
    fn ranges(&self) -> &[AddrRange] {
        &self.range
    }
    fn mem_space(&self) -> MemSpace {
        self.space
    }
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> usize {
        let n = self.range[0].bytes_from(addr, buf.len());
        if n == 0 {
            // Outside the buffer (or nothing asked).
            return 0;
        }
        let off = (addr - self.range[0].start) as usize;
        buf[..n].copy_from_slice(&self.data[off..off + n]);
        n
    }
}

/// The callback a [`CallbackAccessor`] calls: `(address, space, buffer)`
/// returns the number of bytes written into the buffer.
pub(crate) type MemReadFn = Box<dyn FnMut(u64, MemSpace, &mut [u8]) -> usize + Send>;

/// An image served by a user callback (e.g. a live target or a debugger).
pub struct CallbackAccessor {
    range: [AddrRange; 1],
    space: MemSpace,
    read_fn: MemReadFn,
}

impl CallbackAccessor {
    /// An image of `start..=end_inclusive` in `space`, read by `read_fn`.
    /// Fails for an empty range.
    pub fn new(
        start: u64,
        end_inclusive: u64,
        space: MemSpace,
        read_fn: MemReadFn,
    ) -> Result<CallbackAccessor, MemoryError> {
        if end_inclusive < start {
            return Err(MemoryError::InvalidRange { start, size: 0 });
        }
        Ok(CallbackAccessor {
            range: [AddrRange {
                start,
                end: end_inclusive,
            }],
            space,
            read_fn,
        })
    }
}

impl MemAccessor for CallbackAccessor {
    fn kind(&self) -> AccessorKind {
        AccessorKind::Callback
    }
    fn ranges(&self) -> &[AddrRange] {
        &self.range
    }
    fn mem_space(&self) -> MemSpace {
        self.space
    }
    fn cacheable(&self) -> bool {
        true
    }
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> usize {
        let n = self.range[0].bytes_from(addr, buf.len());
        let got = (self.read_fn)(addr, self.space, &mut buf[..n]);
        got.min(n)
    }
}

/// Page cache settings (`-macc_cache_*` in the lister).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheConfig {
    /// Whether file and callback images are read through the cache.
    pub enabled: bool,
    /// Bytes per page ([`CacheConfig::MIN_PAGE_SIZE`] to [`CacheConfig::MAX_PAGE_SIZE`]).
    pub page_size: usize,
    /// Pages kept ([`CacheConfig::MIN_PAGES`] to [`CacheConfig::MAX_PAGES`]).
    pub num_pages: usize,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            enabled: true,
            page_size: 2048,
            num_pages: 16,
        }
    }
}

impl CacheConfig {
    /// Smallest page size.
    pub const MIN_PAGE_SIZE: usize = 64;
    /// Largest page size.
    pub const MAX_PAGE_SIZE: usize = 16384;
    /// Fewest pages.
    pub const MIN_PAGES: usize = 4;
    /// Most pages.
    pub const MAX_PAGES: usize = 256;
}

struct CachePage {
    acc: usize,
    start: u64,
    /// The bytes read are `data[from..len]`: from the first address of the
    /// image's range in the page to the end of that range or page. Another
    /// range of the same image in the page (a file mapped in pieces with
    /// gaps) is not in it: a read there fills the page again.
    from: usize,
    len: usize,
    data: Vec<u8>,
    used: u64,
}

/// A small page cache in front of slow accessors.
struct PageCache {
    cfg: CacheConfig,
    pages: Vec<CachePage>,
    tick: u64,
}

impl PageCache {
    fn new(cfg: CacheConfig) -> PageCache {
        PageCache {
            cfg,
            pages: Vec::new(),
            tick: 0,
        }
    }

    fn read(&mut self, acc_idx: usize, acc: &mut dyn MemAccessor, addr: u64, buf: &mut [u8]) -> usize {
        self.tick += 1;
        let tick = self.tick;
        let page_size = self.cfg.page_size as u64;
        let page_start = addr - addr % page_size;
        let in_page = (addr - page_start) as usize;
        let slot = match self
            .pages
            .iter()
            .position(|p| p.acc == acc_idx && p.start == page_start && (p.from..p.len).contains(&in_page))
        {
            Some(i) => i,
            None => {
                let i = if self.pages.len() < self.cfg.num_pages {
                    self.pages.push(CachePage {
                        acc: acc_idx,
                        start: 0,
                        from: 0,
                        len: 0,
                        // Filled by read_append, never cleared first.
                        data: Vec::with_capacity(self.cfg.page_size),
                        used: 0,
                    });
                    self.pages.len() - 1
                } else {
                    self.pages
                        .iter()
                        .enumerate()
                        .min_by_key(|(_, p)| p.used)
                        .map(|(i, _)| i)
                        .unwrap_or(0)
                };
                let p = &mut self.pages[i];
                p.acc = acc_idx;
                p.start = page_start;
                // Fill from the first address in the page the image holds.
                let fill_from = page_start.max(addr_range_start(acc, addr));
                let off = (fill_from - page_start) as usize;
                // Zeros before the first address the image holds.
                p.data.clear();
                p.data.resize(off, 0);
                let got = acc.read_append(fill_from, self.cfg.page_size - off, &mut p.data);
                p.from = off;
                p.len = off + got;
                i
            }
        };
        let p = &mut self.pages[slot];
        p.used = tick;
        let off = (addr - p.start) as usize;
        if off >= p.len {
            return 0;
        }
        let n = buf.len().min(p.len - off);
        buf[..n].copy_from_slice(&p.data[off..off + n]);
        n
    }

    /// Forgets the cached contents, keeping the page buffers for reuse.
    fn invalidate(&mut self) {
        for p in &mut self.pages {
            p.acc = usize::MAX;
            p.from = 0;
            p.len = 0;
            p.used = 0;
        }
    }
}

fn addr_range_start(acc: &dyn MemAccessor, addr: u64) -> u64 {
    acc.ranges()
        .iter()
        .find(|r| r.contains(addr))
        .map(|r| r.start)
        .unwrap_or(addr)
}

/// A mapped image: file accessors are kept by type so regions can be added.
enum Image {
    File(FileAccessor),
    Other(Box<dyn MemAccessor>),
}

impl Image {
    fn acc(&self) -> &dyn MemAccessor {
        match self {
            Image::File(f) => f,
            Image::Other(b) => b.as_ref(),
        }
    }
    fn acc_mut(&mut self) -> &mut dyn MemAccessor {
        match self {
            Image::File(f) => f,
            Image::Other(b) => b.as_mut(),
        }
    }
    fn holds(&self, addr: u64, space: MemSpace) -> bool {
        self.range_holding(addr, space).is_some()
    }
    /// The range of this image holding `addr` in `space`, if any.
    fn range_holding(&self, addr: u64, space: MemSpace) -> Option<AddrRange> {
        let a = self.acc();
        if !a.mem_space().intersects(space) {
            return None;
        }
        a.ranges().iter().find(|r| r.contains(addr)).copied()
    }
}

/// The image the last read found, and its range and space: most reads
/// fall in the same range as the one before.
#[derive(Clone, Copy)]
struct LastImage {
    index: usize,
    range: AddrRange,
    space: MemSpace,
}

/// Picks the image for an address and memory space; the decoders' view of
/// target memory.
pub struct MemAccMapper {
    images: Vec<Image>,
    last: Option<LastImage>,
    cache: PageCache,
    /// Bytes the file images hold in memory, together.
    held_bytes: u64,
    /// Changes with every change of what the mapper may return.
    generation: u64,
    /// Changes when a decoder drops its view of memory (its context
    /// changed), per trace ID.
    id_generation: Box<[u64; 256]>,
}

impl Default for MemAccMapper {
    fn default() -> Self {
        MemAccMapper::new(CacheConfig::default())
    }
}

impl MemAccMapper {
    /// A mapper with no images, caching as `cache` says.
    pub fn new(cache: CacheConfig) -> MemAccMapper {
        MemAccMapper {
            images: Vec::new(),
            last: None,
            cache: PageCache::new(cache),
            held_bytes: 0,
            generation: 1,
            id_generation: Box::new([0; 256]),
        }
    }

    /// Changes the cache settings (the cache starts empty).
    pub fn set_cache_config(&mut self, cfg: CacheConfig) {
        self.cache = PageCache::new(cfg);
    }

    fn check_overlap(&self, acc: &dyn MemAccessor) -> Result<(), MemoryError> {
        if acc.ranges().is_empty() {
            return Err(MemoryError::InvalidRange { start: 0, size: 0 });
        }
        // The first pair that clashes, to name both ranges.
        let clash = acc.ranges().iter().find_map(|n| {
            self.images
                .iter()
                .map(Image::acc)
                .filter(|a| a.mem_space().intersects(acc.mem_space()))
                .find_map(|a| a.ranges().iter().find(|r| r.overlaps(n)).map(|r| (n, r, a.mem_space())))
        });
        match clash {
            Some((n, r, mapped_space)) => Err(MemoryError::Overlap {
                start: n.start,
                end: n.end,
                space: acc.mem_space(),
                mapped_start: r.start,
                mapped_end: r.end,
                mapped_space,
            }),
            None => Ok(()),
        }
    }

    fn push(&mut self, image: Image) -> Result<(), MemoryError> {
        self.check_overlap(image.acc())?;
        self.images.push(image);
        self.cache.invalidate();
        self.generation += 1;
        Ok(())
    }

    /// Adds an image. Fails with [`MemoryError::Overlap`] when it overlaps
    /// an image already mapped in an overlapping memory space.
    pub fn add_accessor(&mut self, acc: Box<dyn MemAccessor>) -> Result<(), MemoryError> {
        self.push(Image::Other(acc))
    }

    /// Maps a region of a file (OpenCSD's add / update of a binary file
    /// region): the first region of a path creates its accessor; later
    /// regions of the same path are added to it, and a region starting
    /// where one already starts is accepted as it is. `offset` and `size`
    /// both 0 map the whole file.
    pub fn add_file_region(
        &mut self,
        path: &Path,
        start: u64,
        offset: u64,
        size: u64,
        space: MemSpace,
    ) -> Result<(), MemoryError> {
        let existing = self.images.iter_mut().find_map(|img| match img {
            Image::File(f) if f.path() == path => Some(f),
            _ => None,
        });
        if let Some(file) = existing {
            if file.starts_region(start) {
                return Ok(());
            }
            file.add_region(start, offset, size)?;
            self.cache.invalidate();
            self.generation += 1;
            return Ok(());
        }
        let room = FileAccessor::HOLD_LIMIT.saturating_sub(self.held_bytes);
        let acc = FileAccessor::open_holding(path, start, offset, size, space, room)?;
        let held = acc.held_len();
        self.push(Image::File(acc))?;
        self.held_bytes += held;
        Ok(())
    }

    /// Maps the loadable segments of an ELF file; returns how many.
    pub fn add_elf_file(&mut self, path: &Path, space: MemSpace) -> Result<usize, MemoryError> {
        let bytes = crate::fileio::read_regular_file(path).map_err(|e| MemoryError::FileOpen {
            path: path.to_path_buf(),
            reason: e.message,
        })?;
        let elf = goblin::elf::Elf::parse(&bytes).map_err(|e| MemoryError::Elf {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        let mut mapped = 0;
        for ph in elf
            .program_headers
            .iter()
            .filter(|ph| ph.p_type == goblin::elf::program_header::PT_LOAD && ph.p_filesz > 0)
        {
            self.add_file_region(path, ph.p_vaddr, ph.p_offset, ph.p_filesz, space)?;
            mapped += 1;
        }
        Ok(mapped)
    }

    /// Unmaps the image holding `addr` in a memory space overlapping
    /// `space` (OpenCSD's remove by address: any address of the image, not
    /// only its first, picks it; a file image goes with all its regions).
    /// Fails with [`MemoryError::NotMapped`] when no image holds it.
    pub fn remove_accessor_at(&mut self, addr: u64, space: MemSpace) -> Result<(), MemoryError> {
        let i = self
            .images
            .iter()
            .position(|img| img.holds(addr, space))
            .ok_or(MemoryError::NotMapped { addr, space })?;
        if let Image::File(f) = self.images.remove(i) {
            self.held_bytes -= f.held_len();
        }
        // Indexes into `images` moved: the last hit and the cached pages
        // (keyed by index) go, and decoders read memory again.
        self.last = None;
        self.cache.invalidate();
        self.generation += 1;
        Ok(())
    }

    /// Number of images mapped.
    pub fn len(&self) -> usize {
        self.images.len()
    }
    /// Whether no image is mapped.
    pub fn is_empty(&self) -> bool {
        self.images.is_empty()
    }

    /// The mapped-ranges listing, one image after another, each prefixed
    /// as OpenCSD's `logMappedRanges` prefixes it.
    pub fn describe(&self, out: &mut String) {
        for img in &self.images {
            out.push_str("Gen_Info : ");
            img.acc().describe(out);
            out.push('\n');
        }
    }

    fn find(&mut self, addr: u64, space: MemSpace) -> Option<usize> {
        if let Some(last) = self.last
            && last.range.contains(addr)
            && last.space.intersects(space)
        {
            return Some(last.index);
        }
        let (index, range) = self
            .images
            .iter()
            .enumerate()
            .find_map(|(i, img)| img.range_holding(addr, space).map(|r| (i, r)))?;
        self.last = Some(LastImage {
            index,
            range,
            space: self.images[index].acc().mem_space(),
        });
        Some(index)
    }

    /// Reads target memory: as many bytes as the image holding `addr` has,
    /// up to `buf.len()`.
    pub fn read(&mut self, addr: u64, space: MemSpace, buf: &mut [u8]) -> usize {
        let Some(i) = self.find(addr, space) else { return 0 };
        // A file held in memory (most snapshot dumps) is read in place.
        if let Image::File(f) = &mut self.images[i]
            && f.held.is_some()
        {
            return f.read(addr, buf);
        }
        let acc = self.images[i].acc_mut();
        if self.cache.cfg.enabled && acc.cacheable() {
            let mut done = 0;
            while done < buf.len() {
                let Some(at) = addr.checked_add(done as u64) else { break };
                let n = self.cache.read(i, acc, at, &mut buf[done..]);
                if n == 0 {
                    break;
                }
                done += n;
            }
            done
        } else {
            acc.read(addr, buf)
        }
    }
}

/// Memory shared with a decode tree (its mapper, as the tree hands it out)
/// is memory for anyone else too: a sink that needs the image (a Tarmac
/// writer's opcodes) reads it through the same mapper, one borrow a read.
impl<T: TargetMemAccess + ?Sized> TargetMemAccess for crate::shared::Shared<T> {
    fn read_target_memory(
        &mut self,
        address: u64,
        trace_id: u8,
        mem_space: MemSpace,
        buf: &mut [u8],
    ) -> Result<usize, ErrCode> {
        self.borrow_mut().read_target_memory(address, trace_id, mem_space, buf)
    }
    fn invalidate_mem_acc_cache(&mut self, trace_id: u8) {
        self.borrow_mut().invalidate_mem_acc_cache(trace_id);
    }
    fn generation(&self, trace_id: u8) -> u64 {
        self.borrow().generation(trace_id)
    }
    fn contents_fixed(&self) -> bool {
        self.borrow().contents_fixed()
    }
}

impl TargetMemAccess for MemAccMapper {
    fn read_target_memory(
        &mut self,
        address: u64,
        _trace_id: u8,
        mem_space: MemSpace,
        buf: &mut [u8],
    ) -> Result<usize, ErrCode> {
        Ok(self.read(address, mem_space, buf))
    }
    fn invalidate_mem_acc_cache(&mut self, trace_id: u8) {
        self.cache.invalidate();
        // Fixed images read the same again: what was walked stays valid.
        if !self.contents_fixed() {
            self.id_generation[trace_id as usize] += 1;
        }
    }
    fn generation(&self, trace_id: u8) -> u64 {
        self.generation.wrapping_add(self.id_generation[trace_id as usize])
    }
    fn contents_fixed(&self) -> bool {
        self.images.iter().all(|i| i.acc().contents_fixed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalidating_fixed_images_keeps_the_generation_and_a_callback_changes_it() {
        let mut m = MemAccMapper::default();
        m.add_accessor(Box::new(
            BufferAccessor::new(0x1000, vec![1, 2, 3, 4], MemSpace::ANY).unwrap(),
        ))
        .unwrap();
        assert!(m.contents_fixed());
        let g = m.generation(3);
        m.invalidate_mem_acc_cache(3);
        assert_eq!(m.generation(3), g, "a buffer reads the same after an invalidate");

        let cb = CallbackAccessor::new(
            0x8000,
            0x8fff,
            MemSpace::ANY,
            Box::new(|_, _, buf: &mut [u8]| buf.len()),
        )
        .unwrap();
        m.add_accessor(Box::new(cb)).unwrap();
        assert!(!m.contents_fixed());
        let g = m.generation(3);
        m.invalidate_mem_acc_cache(3);
        assert_ne!(
            m.generation(3),
            g,
            "a callback may serve other bytes after an invalidate"
        );
        assert_eq!(m.generation(4), g, "only the invalidated trace ID changes");
    }

    #[test]
    fn a_file_appends_what_it_reads_as_a_buffer_does() {
        let bytes: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
        let path = std::env::temp_dir().join(format!("coresight-read-append-{}.bin", std::process::id()));
        std::fs::write(&path, &bytes).unwrap();
        let mut held = FileAccessor::open(&path, 0x1000, 0, 0, MemSpace::ANY).unwrap();
        assert!(held.held.is_some() && !held.cacheable());
        // The same file read on demand, as one past the hold limit is.
        let mut on_demand = FileAccessor::open(&path, 0x1000, 0, 0, MemSpace::ANY).unwrap();
        on_demand.held = None;
        assert!(on_demand.cacheable());
        let mut buffer = BufferAccessor::new(0x1000, bytes.clone(), MemSpace::ANY).unwrap();
        for file in [&mut held, &mut on_demand] {
            for (addr, len) in [
                (0x1000, 2048),
                (0x1003, 17),
                (0x2000, 2048),
                (0x2380, 100),
                (0x2387, 1),
                (0x2388, 8),
                (0x0fff, 4),
            ] {
                let mut from_file = vec![0xaa; 3];
                let mut from_buffer = vec![0xaa; 3];
                let n = file.read_append(addr, len, &mut from_file);
                assert_eq!(buffer.read_append(addr, len, &mut from_buffer), n, "{addr:#x}+{len}");
                assert_eq!(from_file, from_buffer, "{addr:#x}+{len}");
                assert_eq!(from_file.len(), 3 + n);
                let mut read = vec![0x55; len];
                assert_eq!(file.read(addr, &mut read), n, "{addr:#x}+{len}");
                assert_eq!(read[..n], from_buffer[3..], "{addr:#x}+{len}");
            }
        }
        // A second region at a file offset reads the file from there.
        for file in [&mut held, &mut on_demand] {
            file.add_region(0x9000, 0x100, 0x40).unwrap();
            let mut read = [0; 0x48];
            assert_eq!(file.read(0x9008, &mut read), 0x38);
            assert_eq!(read[..0x38], bytes[0x108..0x140]);
        }
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn each_read_finds_the_image_of_its_space_and_address() {
        let mut m = MemAccMapper::default();
        let secure = BufferAccessor::new(0x1000, vec![0x5a; 0x100], MemSpace::S).unwrap();
        let normal = BufferAccessor::new(0x1000, vec![0xa5; 0x100], MemSpace::N).unwrap();
        let above = BufferAccessor::new(0x1100, vec![0x33; 0x10], MemSpace::N).unwrap();
        for acc in [secure, normal, above] {
            m.add_accessor(Box::new(acc)).unwrap();
        }
        let mut b = [0u8; 4];
        // The same address in turn from each space, then past the range.
        for (addr, space, want, n) in [
            (0x1010, MemSpace::S, 0x5a, 4),
            (0x1010, MemSpace::N, 0xa5, 4),
            (0x1014, MemSpace::EL1S, 0x5a, 4),
            (0x10fe, MemSpace::N, 0xa5, 2),
            (0x1100, MemSpace::N, 0x33, 4),
            (0x1100, MemSpace::S, 0, 0),
            (0x1010, MemSpace::N, 0xa5, 4),
        ] {
            b = [0; 4];
            assert_eq!(m.read(addr, space, &mut b), n, "{addr:#x} {space:?}");
            assert!(b[..n].iter().all(|&x| x == want), "{addr:#x} {space:?}: {b:?}");
        }
        m.remove_accessor_at(0x1010, MemSpace::N).unwrap();
        assert_eq!(m.read(0x1010, MemSpace::N, &mut b), 0);
        assert_eq!(m.read(0x1100, MemSpace::N, &mut b), 4);
        assert_eq!(b, [0x33; 4]);
    }

    #[test]
    fn a_mapper_holds_files_in_memory_up_to_the_limit_in_all() {
        let dir = std::env::temp_dir().join(format!("coresight-hold-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Two files of three fifths of the limit each (sparse: all zeros
        // but one marked byte).
        let size = FileAccessor::HOLD_LIMIT / 5 * 3;
        let paths: Vec<_> = (0..2u8)
            .map(|k| {
                let p = dir.join(format!("dump{k}.bin"));
                let mut f = File::create(&p).unwrap();
                f.set_len(size).unwrap();
                f.seek(SeekFrom::Start(0x40)).unwrap();
                std::io::Write::write_all(&mut f, &[0xc0 | k]).unwrap();
                p
            })
            .collect();
        let held = |m: &MemAccMapper| -> Vec<bool> {
            m.images
                .iter()
                .map(|i| matches!(i, Image::File(f) if f.held.is_some()))
                .collect()
        };
        let mut m = MemAccMapper::default();
        m.add_file_region(&paths[0], 0x1000_0000, 0, 0, MemSpace::ANY).unwrap();
        m.add_file_region(&paths[1], 0x4000_0000, 0, 0, MemSpace::ANY).unwrap();
        // The second would take the total past the limit: read on demand.
        assert_eq!(held(&m), [true, false]);
        assert_eq!(m.held_bytes, size);
        let mut b = [0u8; 2];
        assert_eq!(m.read(0x1000_003f, MemSpace::ANY, &mut b), 2);
        assert_eq!(b, [0, 0xc0]);
        assert_eq!(m.read(0x4000_003f, MemSpace::ANY, &mut b), 2);
        assert_eq!(b, [0, 0xc1]);
        // With the first unmapped, a file mapped again is held.
        m.remove_accessor_at(0x1000_0000, MemSpace::ANY).unwrap();
        assert_eq!(m.held_bytes, 0);
        m.add_file_region(&paths[0], 0x1000_0000, 0, 0, MemSpace::ANY).unwrap();
        assert_eq!(held(&m), [false, true]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
