//! Non-indexed nested-loop theta joins on the GPU (seeds 003 and 004).
//!
//! The predicate is lowered to a device program ([`program`]): each comparison is a *leaf* that
//! yields a 32-bit match mask over 32 inner rows for one outer row; a boolean program combines
//! the masks (AND/OR/NOT on words). The kernels follow the paper's steps:
//!
//! 1. **Tiles.** A 1D grid; one outer (left) row per thread with its leaf values in registers;
//!    the block walks its chunk of the inner (right) relation in tiles whose leaf values sit in
//!    shared memory (inner values are shared-memory broadcasts, the operator/type switch is
//!    warp-uniform and outside the 32-row loop).
//! 2. **Count.** Per (left row, right chunk): `popc` of the combined masks.
//! 3. **Prefix sum.** An exclusive scan of the counts gives every left row's output offset.
//! 4. **Write.** The pass re-evaluates the masks and writes each lane's run of matches with the
//!    whole warp (coalesced, contiguous stores: the output staged warp by warp).
//!
//! Aggregates (COUNT, SUM, MIN, MAX) take the input-bound form of seed 004: the masks feed
//! per-thread accumulators, no pair is materialized.
//!
//! **Output order** ([`nested_loop_join`] on the nested-loop path, [`NestedLoopJoin::produce`]):
//! grouped by left row in ascending order, right rows ascending within a left row; `Left`/`Full`
//! place an unmatched left row `(l, NONE)` at its position; `Right`/`Full` append the unmatched
//! right rows `(NONE, r)` in ascending order after all pairs. Semi and anti joins return rows in
//! ascending order. The mixed path ([`Strategy::Auto`] with equality conjuncts) returns the
//! hash join's order (see [`crate::hash_join::non_partitioned_hash_join`]) with unmatched rows appended.
//!
//! ```no_run
//! use gpujoin_join::device_relation::upload;
//! use gpujoin_join::predicate::{col_l, col_r, schema_of};
//! use gpujoin_join::table::{HostColumn, HostTable};
//! use gpujoin_join::theta::nested_loop::nested_loop_join;
//! use gpujoin_join::{JoinType, RowId};
//! # fn f(s: &gpujoin_device::Stream) -> gpujoin_device::Result<()> {
//! let l = HostTable::new(vec![("c0", HostColumn::from_values::<i32>(vec![1, 5]))])?;
//! let r = HostTable::new(vec![("c0", HostColumn::from_values::<i32>(vec![3, 0]))])?;
//! let p = col_l(0).greater(col_r(0)).check(&schema_of(&l)?, &schema_of(&r)?)?;
//! let (dl, dr) = (upload(s, &l)?, upload(s, &r)?);
//! let (dl, dr) = (dl.view(), dr.view());
//! let maps = nested_loop_join(s, &dl, &dr, &p, JoinType::Inner)?;
//! let id = |i| RowId::new(i).unwrap();
//! assert_eq!(maps.pairs()?, vec![(id(0), id(1)), (id(1), id(0)), (id(1), id(1))]);
//! # Ok(()) }
//! ```

#[path = "nested_loop/program.rs"]
pub mod program;

use std::ops::Range;

use gpujoin_cub_sys::result::launch;
use gpujoin_device::{DeviceBuffer, DeviceView, Error, Result, Stream};
use gpujoin_primitives::{exclusive_sum, select_by_flag, select_flagged};

use crate::common::{alloc_output_maps, concat, from_inner_pairs, nones};
use crate::device_relation::{kernel_type_of, relation_schema, RelationRef};
use crate::table::ColumnView;
use crate::hash_join::non_partitioned_hash_join;
use crate::kernels::aggregate::AccHost;
use crate::kernels::sys::theta as ffi;
use crate::table::TableView;
use crate::maps::GatherMaps;
use crate::predicate::{CheckedPredicate, DataType, Predicate, Side};
use super::{Agg, AggValue};
use crate::types::{JoinOptions, JoinType, NanEquality, RowId};
use program::{CodeRange, CombineMode, Leaf, Program, SideValue};

/// Threads (outer rows) per block.
const BLOCK: usize = ffi::GJ_T_BLOCK as usize;
/// Shared memory the tiles may use per block.
const TILE_SMEM_BYTES: usize = 40 * 1024;
const MAX_TILE_ROWS: usize = 1024;
/// Cap on the (left rows x chunks) count matrix.
const MAX_COUNT_ENTRIES: usize = 1 << 27;

/// How [`nested_loop_join_with`] evaluates a predicate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    /// A mixed join when the predicate has fixed-width equality conjuncts
    /// ([`CheckedPredicate::equality_parts`]): hash join on them, then the rest of the predicate
    /// filters the candidate pairs on the GPU. Otherwise the nested loop.
    #[default]
    Auto,
    /// Always the nested loop.
    NestedLoop,
}

// ---------------------------------------------------------------------------------------------
// Device image of a program.

fn upload_raw<T: Copy>(stream: &Stream, items: &[T]) -> Result<DeviceBuffer<u8>> {
    // SAFETY: plain C structs (pointers and integers), read as their bytes.
    let bytes = unsafe { std::slice::from_raw_parts(items.as_ptr() as *const u8, std::mem::size_of_val(items)) };
    if bytes.is_empty() {
        return stream.alloc_zeroed::<u8>(16);
    }
    stream.copy_from_host(bytes)
}

/// The data pointer (offset applied) and, for strings, the offsets pointer of a relation's column.
fn column_ptrs(c: &ColumnView<'_>) -> (*const std::ffi::c_void, *const i64) {
    if kernel_type_of(c) == DataType::LargeUtf8 {
        let offsets = c.offsets().expect("strings have offsets").slice(c.offset() * 8..).as_ptr() as *const i64;
        return (c.values().as_ptr() as *const std::ffi::c_void, offsets);
    }
    let w = c.data_type().byte_width().expect("a numeric kernel type");
    (c.values().slice(c.offset() * w..).as_ptr() as *const std::ffi::c_void, std::ptr::null())
}

fn column_table(rel: &TableView<'_>) -> Vec<ffi::gj_t_column> {
    rel.columns()
        .iter()
        .map(|c| {
            let (data, offsets) = column_ptrs(c);
            ffi::gj_t_column { data, offsets, dtype: program::dtype_code(kernel_type_of(c)), pad: 0 }
        })
        .collect()
}

/// Interpreter code and column tables on the device.
struct DeviceCode {
    _bufs: Vec<DeviceBuffer<u8>>,
    interp: ffi::gj_t_interp,
}

impl DeviceCode {
    fn upload(stream: &Stream, code: &program::Code, left: &TableView<'_>, right: &TableView<'_>) -> Result<Self> {
        let instrs: Vec<ffi::gj_t_instr> =
            code.instrs.iter().map(|&[op, a, b, c]| ffi::gj_t_instr { op, a, b, c }).collect();
        let lits: Vec<ffi::gj_t_literal> = code.literals.iter().map(|&(lo, hi)| ffi::gj_t_literal { lo, hi }).collect();
        let bufs = vec![
            upload_raw(stream, &instrs)?,
            upload_raw(stream, &lits)?,
            upload_raw(stream, &code.lit_bytes)?,
            upload_raw(stream, &column_table(left))?,
            upload_raw(stream, &column_table(right))?,
        ];
        let ptr = |i: usize| bufs[i].view().raw() as usize;
        let interp = ffi::gj_t_interp {
            code: ptr(0) as *const ffi::gj_t_instr,
            lits: ptr(1) as *const ffi::gj_t_literal,
            lit_bytes: ptr(2) as *const u8,
            left_cols: ptr(3) as *const ffi::gj_t_column,
            right_cols: ptr(4) as *const ffi::gj_t_column,
        };
        Ok(DeviceCode { _bufs: bufs, interp })
    }

    /// Evaluates `range` for every row of one side into `kind` (a `GJ_T_*` output code).
    fn eval_rows(&self, stream: &Stream, range: CodeRange, side: Side, n: usize, out_kind: u32, out: u64) -> Result<()> {
        let side = if side == Side::Left { 0 } else { 1 };
        // SAFETY: `out` holds n values of out_kind (or ceil(n/32) words); the code reads the
        // columns of the uploaded tables within their rows.
        launch(stream, "nested loop: evaluate rows", || unsafe {
            ffi::gj_t_eval_rows(&self.interp, range.start, range.len, side, n as i64, out_kind as i32, out as usize as *mut _, stream.raw())
        })
    }
}

/// The aggregate a pass computes.
#[derive(Debug, Clone, Copy)]
struct AggSpec {
    agg: Agg,
    column: Option<(Side, usize)>,
}

fn agg_code(a: Agg) -> i32 {
    (match a {
        Agg::Count => ffi::GJ_T_AGG_COUNT,
        Agg::Sum => ffi::GJ_T_AGG_SUM,
        Agg::Min => ffi::GJ_T_AGG_MIN,
        Agg::Max => ffi::GJ_T_AGG_MAX,
    }) as i32
}

/// A lowered predicate on the device: the kernel parameters and the buffers they point into.
struct DeviceProgram {
    params: ffi::gj_t_nlj,
    _code: DeviceCode,
    _values: Vec<DeviceBuffer<u8>>,
}

/// Chunking of the inner relation and tile size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    pub tile_rows: usize,
    pub chunk_rows: usize,
    pub chunks: usize,
}

/// Tiles of at most [`MAX_TILE_ROWS`] rows that fit `bytes_per_row` in the tile budget; enough
/// right chunks that `target_blocks` blocks run (the left side alone may give few).
pub(crate) fn layout(n_left: usize, n_right: usize, bytes_per_row: usize, target_blocks: usize) -> Layout {
    let tile_rows = TILE_SMEM_BYTES.checked_div(bytes_per_row).map_or(MAX_TILE_ROWS, |rows| (rows / 32 * 32).clamp(32, MAX_TILE_ROWS));
    let outer_blocks = n_left.div_ceil(BLOCK).max(1);
    let max_chunks = n_right.div_ceil(tile_rows).max(1).min((MAX_COUNT_ENTRIES / n_left.max(1)).max(1));
    let want = target_blocks.div_ceil(outer_blocks).clamp(1, max_chunks);
    let chunk_rows = n_right.div_ceil(want).div_ceil(tile_rows).max(1) * tile_rows;
    let chunks = n_right.div_ceil(chunk_rows).max(1);
    Layout { tile_rows, chunk_rows, chunks }
}

fn check_schemas(left: &TableView<'_>, right: &TableView<'_>, pred: &CheckedPredicate) -> Result<()> {
    pred.check_schemas(&relation_schema(left)?, &relation_schema(right)?)?;
    for (name, rel) in [("left", left), ("right", right)] {
        if rel.rows() as u64 > RowId::MAX_ROWS {
            return Err(Error::too_large(format!("{name} relation rows"), rel.rows() as u64, RowId::MAX_ROWS));
        }
    }
    Ok(())
}

fn agg_column_type(left: &TableView<'_>, right: &TableView<'_>, spec: AggSpec) -> Result<Option<DataType>> {
    let Some((side, index)) = spec.column else {
        return match spec.agg {
            Agg::Count => Ok(None),
            a => Err(Error::invalid(format!("nested loop {a:?} needs a column"))),
        };
    };
    let (name, rel) = if side == Side::Left { ("left", left) } else { ("right", right) };
    let t = relation_schema(rel)?.get(index).copied().ok_or_else(|| {
        Error::invalid(format!(
            "nested loop {:?}: {name} column {index} does not exist (the {name} relation has {} columns)",
            spec.agg,
            rel.columns().len()
        ))
    })?;
    if spec.agg != Agg::Count && !t.is_numeric() {
        return Err(Error::invalid(format!("nested loop {:?}: {name} column {index} is {t}, not a number", spec.agg)));
    }
    Ok(Some(t))
}

impl DeviceProgram {
    fn build(stream: &Stream, left: &TableView<'_>, right: &TableView<'_>, prog: &Program, agg: Option<AggSpec>) -> Result<Self> {
        let code = DeviceCode::upload(stream, &prog.code, left, right)?;
        let (n_left, n_right) = (left.rows(), right.rows());
        let mut values: Vec<DeviceBuffer<u8>> = Vec::new();
        // SAFETY (zeroed): a C struct of integers and pointers; all-zero is valid (null pointers).
        let mut p: ffi::gj_t_nlj = unsafe { std::mem::zeroed() };
        p.n_left = n_left as i64;
        p.n_right = n_right as i64;
        p.nleaves = prog.leaves.len() as i32;
        p.combine_mode = (match prog.combine_mode {
            CombineMode::Program => ffi::GJ_T_COMBINE_PROGRAM,
            CombineMode::All => ffi::GJ_T_COMBINE_ALL,
            CombineMode::Any => ffi::GJ_T_COMBINE_ANY,
        }) as i32;
        p.combine_len = prog.combine.len() as i32;
        p.combine[..prog.combine.len()].copy_from_slice(&prog.combine);
        p.interp = code.interp;

        let mut bytes_per_row = 0usize;
        for leaf in &prog.leaves {
            if let Leaf::Sep { kind, .. } = leaf {
                bytes_per_row += kind.width();
            }
        }
        let agg_type = match agg {
            Some(spec) => agg_column_type(left, right, spec)?,
            None => None,
        };
        let agg_inner = matches!(agg, Some(AggSpec { agg: a, column: Some((Side::Right, _)) }) if a != Agg::Count);
        if agg_inner {
            bytes_per_row += 8;
        }
        let sm = stream.device().multiprocessor_count().unwrap_or(132) as usize;
        let lay = layout(n_left, n_right, bytes_per_row, sm * 16);
        p.tile_rows = lay.tile_rows as i32;
        p.chunk_rows = lay.chunk_rows as i64;
        p.chunks = lay.chunks as i32;

        let mut smem = 0usize;
        for (k, leaf) in prog.leaves.iter().enumerate() {
            let lf = &mut p.leaves[k];
            match leaf {
                Leaf::Sep { kind, op, outer, inner } => {
                    lf.type_ = ffi::GJ_T_LEAF_SEP as i32;
                    lf.kind = kind.code();
                    lf.op = program_op(*op);
                    lf.smem_offset = smem as i32;
                    smem += kind.width() * lay.tile_rows;
                    let mut side_ptrs = |s: &SideValue, side: Side, rel: &TableView<'_>| -> Result<(*const std::ffi::c_void, *const i64)> {
                        match s {
                            SideValue::Column(i) => Ok(column_ptrs(&rel.columns()[*i])),
                            SideValue::Computed(r) => {
                                let n = rel.rows();
                                let buf = stream.alloc::<u8>((n * kind.width()).max(16))?;
                                code.eval_rows(stream, *r, side, n, kind.code() as u32, buf.view().raw())?;
                                let ptr = buf.view().raw() as usize as *const std::ffi::c_void;
                                values.push(buf);
                                Ok((ptr, std::ptr::null()))
                            }
                        }
                    };
                    (lf.outer, lf.outer_offsets) = side_ptrs(outer, Side::Left, left)?;
                    (lf.inner, lf.inner_offsets) = side_ptrs(inner, Side::Right, right)?;
                }
                Leaf::LeftBool(r) => {
                    lf.type_ = ffi::GJ_T_LEAF_LBOOL as i32;
                    let buf = stream.alloc::<u8>(n_left.max(16))?;
                    code.eval_rows(stream, *r, Side::Left, n_left, ffi::GJ_T_FLAGS, buf.view().raw())?;
                    lf.left_flags = buf.view().as_ptr();
                    values.push(buf);
                }
                Leaf::RightBool(r) => {
                    lf.type_ = ffi::GJ_T_LEAF_RBOOL as i32;
                    let buf = stream.alloc::<u8>((n_right.div_ceil(32) * 4).max(16))?;
                    code.eval_rows(stream, *r, Side::Right, n_right, ffi::GJ_T_BITS, buf.view().raw())?;
                    lf.right_bits = buf.view().raw() as usize as *const u32;
                    values.push(buf);
                }
                Leaf::Mixed(r) => {
                    lf.type_ = ffi::GJ_T_LEAF_MIXED as i32;
                    lf.code_start = r.start;
                    lf.code_len = r.len;
                }
            }
        }
        if let (Some(spec), Some(t)) = (agg, agg_type) {
            p.agg = agg_code(spec.agg);
            if let Some((side, index)) = spec.column {
                p.agg_side = if side == Side::Left { 0 } else { 1 };
                p.agg_dtype = program::dtype_code(t);
                let rel = if side == Side::Left { left } else { right };
                p.agg_col = column_ptrs(&rel.columns()[index]).0;
            }
        } else if let Some(spec) = agg {
            p.agg = agg_code(spec.agg);
        }
        if agg_inner {
            p.agg_smem_offset = smem as i32;
            smem += 8 * lay.tile_rows;
        }
        p.smem_bytes = smem as i32;
        Ok(DeviceProgram { params: p, _code: code, _values: values })
    }

    fn chunks(&self) -> usize {
        self.params.chunks as usize
    }
}

fn program_op(op: crate::predicate::CmpOp) -> i32 {
    crate::predicate::CmpOp::ALL.iter().position(|&o| o == op).unwrap_or(0) as i32
}

// ---------------------------------------------------------------------------------------------
// The prepared join.

/// A nested-loop join after its count pass and prefix sum: the output offset of every left row
/// is known, and any range of left rows can be written on its own ([`NestedLoopJoin::produce`]),
/// e.g. by a driver that writes the output in chunks.
///
/// ```no_run
/// use gpujoin_join::device_relation::upload;
/// use gpujoin_join::predicate::{col_l, col_r, schema_of};
/// use gpujoin_join::table::{HostColumn, HostTable};
/// use gpujoin_join::theta::nested_loop::NestedLoopJoin;
/// use gpujoin_join::JoinType;
/// # fn f(s: &gpujoin_device::Stream) -> gpujoin_device::Result<()> {
/// let l = HostTable::new(vec![("c0", HostColumn::from_values::<i64>(vec![1, 5, 9]))])?;
/// let r = HostTable::new(vec![("c0", HostColumn::from_values::<i64>(vec![3, 7]))])?;
/// let p = col_l(0).greater(col_r(0)).check(&schema_of(&l)?, &schema_of(&r)?)?;
/// let (dl, dr) = (upload(s, &l)?, upload(s, &r)?);
/// let (dl, dr) = (dl.view(), dr.view());
/// let join = NestedLoopJoin::prepare(s, &dl, &dr, &p, JoinType::Left)?;
/// assert_eq!(s.copy_to_host(&join.offsets())?, vec![0, 1, 2, 4]); // (0,-) (1,0) (2,0) (2,1)
/// let tail = join.produce(s, 1..3)?; // rows of left rows 1 and 2
/// assert_eq!(tail.rows(), 3);
/// # Ok(()) }
/// ```
pub struct NestedLoopJoin<'a> {
    /// Read through `prog`'s pointers: kept alive (borrowed or shared) as long as the join.
    left: RelationRef<'a>,
    right: RelationRef<'a>,
    join_type: JoinType,
    prog: DeviceProgram,
    /// Exclusive scan of the (left row, chunk) counts, `n_left * chunks + 1` entries.
    scan: DeviceBuffer<u64>,
    /// Per left row: exclusive scan, `n_left + 1` entries.
    row_offsets: DeviceBuffer<u64>,
    left_matched: DeviceBuffer<u8>,
    right_bits: Option<DeviceBuffer<u32>>,
    total: u64,
}

impl<'a> NestedLoopJoin<'a> {
    /// Checks the relations against the predicate's schemas, lowers the predicate, runs the
    /// count pass and the prefix sum (one wait for the stream, to read the total).
    ///
    /// `join_type` decides the per-row counts: `Left` and `Full` count an unmatched left row as
    /// one output row; `Right`, `Full`, `RightSemi` and `RightAnti` also record which right rows
    /// match.
    ///
    /// Errors: [`Error::InvalidArgument`] for relations that do not have the checked schemas or
    /// a predicate too deep for the device interpreter; [`Error::TooLarge`] for relations beyond
    /// [`RowId::MAX_ROWS`] rows or more blocks than one launch takes.
    pub fn prepare(stream: &Stream, left: &'a TableView<'a>, right: &'a TableView<'a>, pred: &CheckedPredicate, join_type: JoinType) -> Result<Self> {
        Self::prepare_with(stream, left.into(), right.into(), pred, join_type)
    }

    /// [`NestedLoopJoin::prepare`] of relations borrowed or shared (the front door's chunks own
    /// what they read).
    pub(crate) fn prepare_with(stream: &Stream, left: RelationRef<'a>, right: RelationRef<'a>, pred: &CheckedPredicate, join_type: JoinType) -> Result<Self> {
        let (lv, rv) = (left.view(), right.view());
        check_schemas(&lv, &rv, pred)?;
        let prog = program::lower(pred)?;
        let prog = DeviceProgram::build(stream, &lv, &rv, &prog, None)?;
        drop((lv, rv));
        let (n_left, n_right) = (left.rows(), right.rows());
        let chunks = prog.chunks();
        let entries = n_left * chunks;
        let outer_blocks = n_left.div_ceil(BLOCK);
        if (outer_blocks * chunks) as u64 > i32::MAX as u64 {
            return Err(Error::too_large("nested loop blocks", (outer_blocks * chunks) as u64, i32::MAX as u64));
        }
        let need_right = matches!(join_type, JoinType::Right | JoinType::Full | JoinType::RightSemi | JoinType::RightAnti);
        let mut counts = stream.alloc::<u32>(entries.max(1))?;
        let mut right_bits = if need_right { Some(stream.alloc_zeroed::<u32>(n_right.div_ceil(32).max(1))?) } else { None };
        let cp = counts.view_mut().as_mut_ptr();
        let rb = right_bits.as_mut().map_or(std::ptr::null_mut(), |b| b.view_mut().as_mut_ptr());
        // SAFETY: counts has n_left * chunks entries, right_bits ceil(n_right / 32) words; the
        // program's pointers stay alive in `prog`.
        launch(stream, "nested loop: count", || unsafe { ffi::gj_t_nlj_count(&prog.params, 0, outer_blocks as i64, cp, rb, stream.raw()) })?;
        let mut left_matched = stream.alloc::<u8>(n_left.max(1))?;
        let lm = left_matched.view_mut().as_mut_ptr();
        let keep = join_type.keeps_unmatched_left() as i32;
        // SAFETY: n_left * chunks counts, n_left flags.
        launch(stream, "nested loop: unmatched rows", || unsafe { ffi::gj_t_nlj_fixup(cp, n_left as i64, chunks as i32, keep, lm, stream.raw()) })?;
        let mut scan = stream.alloc::<u64>(entries + 1)?;
        let total = if entries == 0 {
            stream.memset_bytes(&mut scan.view_mut(), 0)?;
            0
        } else {
            exclusive_sum(stream, &counts.slice(..entries), &mut scan.slice_mut(..entries))?;
            let sp = scan.view_mut().as_mut_ptr();
            let c = counts.view().as_ptr();
            // SAFETY: scan has entries + 1 slots.
            launch(stream, "nested loop: total", || unsafe { ffi::gj_t_finish_scan(sp, c, entries as i64, stream.raw()) })?;
            stream.copy_to_host(&scan.slice(entries..))?[0]
        };
        let row_offsets = if chunks == 1 {
            stream.copy_from_device(&scan.view())?
        } else {
            let mut r = stream.alloc::<u64>(n_left + 1)?;
            let (s, o) = (scan.view().as_ptr(), r.view_mut().as_mut_ptr());
            // SAFETY: scan has n_left * chunks + 1 entries, r n_left + 1.
            launch(stream, "nested loop: row offsets", || unsafe { ffi::gj_t_row_offsets(s, n_left as i64, chunks as i32, o, stream.raw()) })?;
            r
        };
        Ok(NestedLoopJoin { left, right, join_type, prog, scan, row_offsets, left_matched, right_bits, total })
    }

    /// Rows of the left relation.
    pub fn left_rows(&self) -> u64 {
        self.left.rows() as u64
    }

    /// The exclusive scan of the per-left-row output counts, `left_rows() + 1` entries: the rows
    /// of left rows `a..b` are output rows `offsets[a]..offsets[b]` (pairs of the left part; for
    /// `Right`/`Full` the unmatched right rows come after, see
    /// [`NestedLoopJoin::unmatched_right`]).
    pub fn offsets(&self) -> DeviceView<'_, u64> {
        self.row_offsets.view()
    }

    /// Output rows of the left part (all left rows), without the unmatched right rows.
    pub fn left_part_rows(&self) -> u64 {
        self.total
    }

    /// The join type this was prepared for.
    pub fn join_type(&self) -> JoinType {
        self.join_type
    }

    /// The output rows of left rows `left_rows` (in the order of the module docs): the pairs for
    /// `Inner` and `Right`, plus `(l, NONE)` for unmatched left rows for `Left` and `Full`. The
    /// maps' join type is `Inner` for `Inner`/`Right` and `Left` for `Left`/`Full`.
    ///
    /// Errors: [`Error::InvalidArgument`] for a range outside `0..left_rows()` or a semi/anti
    /// join; [`Error::OutputTooLarge`] when the output does not fit on the device.
    pub fn produce(&self, stream: &Stream, left_rows: Range<u64>) -> Result<GatherMaps> {
        let n = self.left_rows();
        if left_rows.start > left_rows.end || left_rows.end > n {
            return Err(Error::invalid(format!("left row range {left_rows:?} is outside 0..{n}")));
        }
        let maps_type = match self.join_type {
            JoinType::Inner | JoinType::Right => JoinType::Inner,
            JoinType::Left | JoinType::Full => JoinType::Left,
            t => return Err(Error::invalid(format!("NestedLoopJoin::produce writes pairs; a {t:?} join has none (use nested_loop_join)"))),
        };
        let c = self.prog.chunks() as u64;
        let (a, b) = (left_rows.start, left_rows.end);
        let (base, end) = if a == b {
            (0, 0)
        } else {
            let s = stream.copy_to_host(&self.scan.slice((a * c) as usize..=(a * c) as usize))?[0];
            let e = stream.copy_to_host(&self.scan.slice((b * c) as usize..=(b * c) as usize))?[0];
            (s, e)
        };
        let rows = end - base;
        let (mut out_l, mut out_r) = alloc_output_maps(stream, rows, 2)?;
        if rows > 0 {
            let (ol, or) = (out_l.view_mut().as_mut_ptr(), out_r.view_mut().as_mut_ptr());
            let (off, lm) = (self.scan.view().as_ptr(), self.left_matched.view().as_ptr());
            let keep = maps_type == JoinType::Left;
            // SAFETY: outputs hold offsets[b*c] - offsets[a*c] rows; every (l, chunk) writes
            // inside its own range.
            launch(stream, "nested loop: write", || unsafe {
                ffi::gj_t_nlj_write(&self.prog.params, a as i64, b as i64, off, base, lm, keep as i32, ol, or, stream.raw())
            })?;
        }
        Ok(GatherMaps::new(maps_type, out_l, out_r))
    }

    /// The right rows without a match, ascending (only for `Right`, `Full`, `RightSemi` and
    /// `RightAnti`, which record matches; an error otherwise).
    pub fn unmatched_right(&self, stream: &Stream) -> Result<DeviceBuffer<u32>> {
        self.right_rows(stream, false)
    }

    fn right_rows(&self, stream: &Stream, matched: bool) -> Result<DeviceBuffer<u32>> {
        let bits = self.right_bits.as_ref().ok_or_else(|| Error::invalid(format!("a {:?} join does not record right matches", self.join_type)))?;
        let n = self.right.rows();
        let mut flags = stream.alloc::<u8>(n.max(1))?;
        let f = flags.view_mut().as_mut_ptr();
        let bp = bits.view().as_ptr();
        // SAFETY: ceil(n/32) words, n flags.
        launch(stream, "nested loop: right flags", || unsafe { ffi::gj_t_bits_to_flags(bp, n as i64, f, stream.raw()) })?;
        select_by_flag(stream, None, &flags.slice(..n), matched)
    }

    fn left_rows_where(&self, stream: &Stream, matched: bool) -> Result<DeviceBuffer<u32>> {
        select_by_flag(stream, None, &self.left_matched.slice(..self.left.rows()), matched)
    }

    /// The whole output of the join type.
    fn finish(&self, stream: &Stream) -> Result<GatherMaps> {
        let jt = self.join_type;
        let empty = || stream.alloc::<u32>(0);
        Ok(match jt {
            JoinType::Inner | JoinType::Left => self.produce(stream, 0..self.left_rows())?,
            JoinType::Right | JoinType::Full => {
                let (l, r) = self.produce(stream, 0..self.left_rows())?.into_raw();
                let u = self.unmatched_right(stream)?;
                let nn = nones(stream, u.len())?;
                GatherMaps::new(jt, concat(stream, &[l.view(), nn.view()])?, concat(stream, &[r.view(), u.view()])?)
            }
            JoinType::LeftSemi => GatherMaps::new(jt, self.left_rows_where(stream, true)?, empty()?),
            JoinType::LeftAnti => GatherMaps::new(jt, self.left_rows_where(stream, false)?, empty()?),
            JoinType::RightSemi => GatherMaps::new(jt, empty()?, self.right_rows(stream, true)?),
            JoinType::RightAnti => GatherMaps::new(jt, empty()?, self.right_rows(stream, false)?),
        })
    }

    /// Rows [`NestedLoopJoin::finish`] returns, without writing pairs.
    fn size(&self, stream: &Stream) -> Result<u64> {
        Ok(match self.join_type {
            JoinType::Inner | JoinType::Left => self.total,
            JoinType::Right | JoinType::Full => self.total + self.unmatched_right(stream)?.len() as u64,
            JoinType::LeftSemi => self.left_rows_where(stream, true)?.len() as u64,
            JoinType::LeftAnti => self.left_rows_where(stream, false)?.len() as u64,
            JoinType::RightSemi => self.right_rows(stream, true)?.len() as u64,
            JoinType::RightAnti => self.right_rows(stream, false)?.len() as u64,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// One-shot joins.

/// Joins `left` and `right` on `pred` ([`Strategy::Auto`]): all eight join types, outputs as
/// [`GatherMaps`] in the order of the [module docs](self).
///
/// Errors: as [`NestedLoopJoin::prepare`]; [`Error::OutputTooLarge`] when the output does not fit.
pub fn nested_loop_join(stream: &Stream, left: &TableView<'_>, right: &TableView<'_>, pred: &CheckedPredicate, join_type: JoinType) -> Result<GatherMaps> {
    nested_loop_join_with(stream, left, right, pred, join_type, Strategy::Auto)
}

/// [`nested_loop_join`] with a chosen [`Strategy`].
pub fn nested_loop_join_with(
    stream: &Stream,
    left: &TableView<'_>,
    right: &TableView<'_>,
    pred: &CheckedPredicate,
    join_type: JoinType,
    strategy: Strategy,
) -> Result<GatherMaps> {
    check_schemas(left, right, pred)?;
    if let Some(keys) = mixed_keys(left, right, pred, strategy) {
        return mixed_join(stream, left, right, pred, &keys, join_type);
    }
    NestedLoopJoin::prepare(stream, left, right, pred, join_type)?.finish(stream)
}

/// The number of rows [`nested_loop_join`] returns. The nested-loop path counts without writing
/// pairs; the mixed path (equality conjuncts) runs the join.
pub fn nested_loop_join_size(stream: &Stream, left: &TableView<'_>, right: &TableView<'_>, pred: &CheckedPredicate, join_type: JoinType) -> Result<u64> {
    nested_loop_join_size_with(stream, left, right, pred, join_type, Strategy::Auto)
}

/// [`nested_loop_join_size`] with a chosen [`Strategy`].
pub fn nested_loop_join_size_with(
    stream: &Stream,
    left: &TableView<'_>,
    right: &TableView<'_>,
    pred: &CheckedPredicate,
    join_type: JoinType,
    strategy: Strategy,
) -> Result<u64> {
    check_schemas(left, right, pred)?;
    if let Some(keys) = mixed_keys(left, right, pred, strategy) {
        return Ok(mixed_join(stream, left, right, pred, &keys, join_type)?.rows());
    }
    NestedLoopJoin::prepare(stream, left, right, pred, join_type)?.size(stream)
}

// ---------------------------------------------------------------------------------------------
// Mixed joins: equality conjuncts by hash join, the rest as a filter.

/// The equality pairs to hash on (at most 4, fixed-width), when the mixed path applies.
pub(crate) fn mixed_keys(left: &TableView<'_>, right: &TableView<'_>, pred: &CheckedPredicate, strategy: Strategy) -> Option<Vec<(usize, usize)>> {
    if strategy != Strategy::Auto || left.rows() == 0 || right.rows() == 0 {
        return None;
    }
    let parts: Vec<(usize, usize)> = pred
        .equality_parts()
        .into_iter()
        .filter(|&(l, r)| pred.left_schema()[l].is_numeric() && pred.right_schema()[r].is_numeric())
        .take(crate::types::MAX_KEY_COLUMNS)
        .collect();
    (!parts.is_empty()).then_some(parts)
}

/// The equality columns of a mixed join as keys of both sides, and the options that give them
/// the predicate's IEEE equality (-0.0 == 0.0, key images normalize zeros; NaN equals nothing).
pub(crate) fn mixed_key_columns<'a>(left: &'a TableView<'_>, right: &'a TableView<'_>, keys: &[(usize, usize)]) -> Result<(TableView<'a>, TableView<'a>, JoinOptions)> {
    // The values only: the mixed join's caller handles NULLs.
    fn key_cols<'a>(rel: &'a TableView<'_>, cols: impl Iterator<Item = usize>) -> Result<TableView<'a>> {
        crate::keys::key_view(cols.map(|c| rel.columns()[c].without_validity()).collect())
    }
    let opts = JoinOptions { nan_equality: NanEquality::NanNeverEqual, ..JoinOptions::default() };
    Ok((key_cols(left, keys.iter().map(|k| k.0))?, key_cols(right, keys.iter().map(|k| k.1))?, opts))
}

/// What a mixed join checks on the pairs its hash join on `keys` finds: the residual when every
/// equality part was hashed on, else the whole predicate; nothing when that is `TRUE`.
pub(crate) struct PairFilter {
    code: Option<(DeviceCode, CodeRange)>,
}

impl PairFilter {
    /// The filter of `pred` after a hash join on `keys`, on the device.
    pub(crate) fn new(stream: &Stream, left: &TableView<'_>, right: &TableView<'_>, pred: &CheckedPredicate, keys: &[(usize, usize)]) -> Result<Self> {
        let all_hashed = pred.equality_parts().len() == keys.len();
        let filter = if all_hashed { pred.residual() } else { pred.clone() };
        if matches!(filter.predicate(), Predicate::True) {
            return Ok(PairFilter { code: None });
        }
        let mut code = program::Code::default();
        let range = code.predicate(&filter)?;
        Ok(PairFilter { code: Some((DeviceCode::upload(stream, &code, left, right)?, range)) })
    }

    /// 1 where pair `(a[i], b[i])` passes; `None` when every pair does.
    pub(crate) fn flags(&self, stream: &Stream, a: &DeviceView<'_, u32>, b: &DeviceView<'_, u32>) -> Result<Option<DeviceBuffer<u8>>> {
        let Some((dc, range)) = &self.code else { return Ok(None) };
        let n = a.len();
        let mut keep = stream.alloc::<u8>(n)?;
        if n > 0 {
            let (ap, bp, kp) = (a.as_ptr(), b.as_ptr(), keep.view_mut().as_mut_ptr());
            // SAFETY: n pairs of valid row ids; keep has n flags.
            launch(stream, "mixed join: filter pairs", || unsafe {
                ffi::gj_t_filter_pairs(&dc.interp, range.start, range.len, ap, bp, n as i64, kp, stream.raw())
            })?;
        }
        Ok(Some(keep))
    }

    /// The pairs `(a[i], b[i])` that pass, in order.
    pub(crate) fn apply(&self, stream: &Stream, a: DeviceBuffer<u32>, b: DeviceBuffer<u32>) -> Result<(DeviceBuffer<u32>, DeviceBuffer<u32>)> {
        let keep = self.flags(stream, &a.view(), &b.view())?;
        keep_pairs(stream, a, b, keep.as_ref())
    }
}

/// The pairs `(a[i], b[i])` whose `keep[i]` is set, in order (all of them without flags).
pub(crate) fn keep_pairs(
    stream: &Stream,
    a: DeviceBuffer<u32>,
    b: DeviceBuffer<u32>,
    keep: Option<&DeviceBuffer<u8>>,
) -> Result<(DeviceBuffer<u32>, DeviceBuffer<u32>)> {
    match keep {
        Some(k) => Ok((select_flagged(stream, &a.view(), &k.view())?, select_flagged(stream, &b.view(), &k.view())?)),
        None => Ok((a, b)),
    }
}

fn mixed_join(stream: &Stream, left: &TableView<'_>, right: &TableView<'_>, pred: &CheckedPredicate, keys: &[(usize, usize)], join_type: JoinType) -> Result<GatherMaps> {
    let (lk, rk, opts) = mixed_key_columns(left, right, keys)?;
    let (a, b) = non_partitioned_hash_join(stream, &lk, &rk, JoinType::Inner, opts)?.into_raw();
    let (a, b) = PairFilter::new(stream, left, right, pred, keys)?.apply(stream, a, b)?;
    from_inner_pairs(stream, a, b, left.rows(), right.rows(), join_type)
}

// ---------------------------------------------------------------------------------------------
// Aggregates.

/// Runs the aggregate pass: per (left row, chunk) partials, and whether the column is a float.
fn aggregate_partials(
    stream: &Stream,
    left: &TableView<'_>,
    right: &TableView<'_>,
    pred: &CheckedPredicate,
    spec: AggSpec,
) -> Result<(DeviceBuffer<AccHost>, usize, bool)> {
    check_schemas(left, right, pred)?;
    let is_float = agg_column_type(left, right, spec)?.is_some_and(|t| t.is_float());
    let prog = program::lower(pred)?;
    let prog = DeviceProgram::build(stream, left, right, &prog, Some(spec))?;
    let chunks = prog.chunks();
    let entries = left.rows() * chunks;
    let blocks = left.rows().div_ceil(BLOCK) * chunks;
    if blocks as u64 > i32::MAX as u64 {
        return Err(Error::too_large("nested loop blocks", blocks as u64, i32::MAX as u64));
    }
    let mut parts = stream.alloc::<AccHost>(entries.max(1))?;
    let pp = parts.view_mut().as_mut_ptr() as *mut ffi::gj_t_acc;
    // SAFETY: n_left * chunks partials; the program's buffers live in `prog`.
    launch(stream, "nested loop: aggregate", || unsafe { ffi::gj_t_nlj_agg(&prog.params, pp, stream.raw()) })?;
    Ok((parts, chunks, is_float))
}

/// `agg` of `column` (`(side, index)`; `None` only for [`Agg::Count`]) over the pairs that
/// satisfy `pred`, without materializing them (the semantics of [`Agg`], those of the CPU
/// reference folded over `gpujoin_testkit::table_reference::join`'s pairs; a float SUM may round
/// differently: it adds in another order).
///
/// Errors: as [`NestedLoopJoin::prepare`]; [`Error::InvalidArgument`] when SUM/MIN/MAX has no
/// column, or the column does not exist or is a string column; [`Error::TooLarge`] for an
/// integer SUM past `i128`.
///
/// ```no_run
/// use gpujoin_join::device_relation::upload;
/// use gpujoin_join::predicate::{col_l, col_r, schema_of, Side};
/// use gpujoin_join::table::{HostColumn, HostTable};
/// use gpujoin_join::theta::nested_loop::nested_loop_aggregate;
/// use gpujoin_join::theta::{Agg, AggValue};
/// # fn f(s: &gpujoin_device::Stream) -> gpujoin_device::Result<()> {
/// let r = HostTable::new(vec![("c0", HostColumn::from_values::<i32>(vec![5, 1]))])?;
/// let t = HostTable::new(vec![("c0", HostColumn::from_values::<i32>(vec![3, 4, 9])), ("c1", HostColumn::from_values::<i64>(vec![10, 20, 30]))])?;
/// let p = col_l(0).greater(col_r(0)).check(&schema_of(&r)?, &schema_of(&t)?)?;
/// let (dr, dt) = (upload(s, &r)?, upload(s, &t)?);
/// let (dr, dt) = (dr.view(), dt.view());
/// // SUM(T.1) WHERE R.0 > T.0
/// assert_eq!(nested_loop_aggregate(s, &dr, &dt, &p, Agg::Sum, Some((Side::Right, 1)))?, AggValue::Int(30));
/// # Ok(()) }
/// ```
pub fn nested_loop_aggregate(
    stream: &Stream,
    left: &TableView<'_>,
    right: &TableView<'_>,
    pred: &CheckedPredicate,
    agg: Agg,
    column: Option<(Side, usize)>,
) -> Result<AggValue> {
    let (parts, chunks, is_float) = aggregate_partials(stream, left, right, pred, AggSpec { agg, column })?;
    let n = left.rows() * chunks;
    let blocks = n.div_ceil(BLOCK * 8).clamp(1, 1024);
    let mut mid = stream.alloc::<AccHost>(blocks)?;
    let mut out = stream.alloc::<AccHost>(1)?;
    let (code, fl) = (agg_code(agg), is_float as i32);
    let (pp, mp, op) = (parts.view().as_ptr() as *const ffi::gj_t_acc, mid.view_mut().as_mut_ptr() as *mut ffi::gj_t_acc, out.view_mut().as_mut_ptr() as *mut ffi::gj_t_acc);
    // SAFETY: n partials in, `blocks` out; then `blocks` in, one out.
    launch(stream, "nested loop: reduce aggregate", || unsafe { ffi::gj_t_agg_reduce(pp, n as i64, code, fl, blocks as i32, mp, stream.raw()) })?;
    launch(stream, "nested loop: reduce aggregate", || unsafe { ffi::gj_t_agg_reduce(mp as *const _, blocks as i64, code, fl, 1, op, stream.raw()) })?;
    stream.copy_to_host(&out.view())?[0].value(agg, is_float)
}

/// For each left row, `agg` of `column` over the right rows it joins with (COUNT 0 and
/// [`AggValue::None`] for SUM/MIN/MAX where nothing matches): the semantics of the CPU reference's
/// fold, per left row.
///
/// Errors as [`nested_loop_aggregate`].
pub fn nested_loop_aggregate_per_left_row(
    stream: &Stream,
    left: &TableView<'_>,
    right: &TableView<'_>,
    pred: &CheckedPredicate,
    agg: Agg,
    column: Option<(Side, usize)>,
) -> Result<Vec<AggValue>> {
    let (parts, chunks, is_float) = aggregate_partials(stream, left, right, pred, AggSpec { agg, column })?;
    let n = left.rows();
    if n == 0 {
        return Ok(Vec::new());
    }
    let mut rows = stream.alloc::<AccHost>(n)?;
    let (pp, rp) = (parts.view().as_ptr() as *const ffi::gj_t_acc, rows.view_mut().as_mut_ptr() as *mut ffi::gj_t_acc);
    // SAFETY: n * chunks partials, n rows.
    launch(stream, "nested loop: aggregate rows", || unsafe {
        ffi::gj_t_agg_rows(pp, n as i64, chunks as i32, agg_code(agg), is_float as i32, rp, stream.raw())
    })?;
    rows.to_vec()?.iter().map(|a| a.value(agg, is_float)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_chunks_and_tiles() {
        // The bench shape: 50k x 25k, two i32 leaves and an 8-byte aggregate column.
        let l = layout(50_000, 25_000, 16, 132 * 16);
        assert_eq!(l.tile_rows, 1024);
        assert!(l.chunks >= 2 && l.chunk_rows.is_multiple_of(l.tile_rows));
        assert!(l.chunks * l.chunk_rows >= 25_000 && (l.chunks - 1) * l.chunk_rows < 25_000);
        // Many left rows: one chunk.
        let l = layout(1 << 20, 1 << 20, 4, 132 * 16);
        assert_eq!(l.chunks, 1);
        assert_eq!(l.chunk_rows, (1 << 20) / 1024 * 1024);
        // Empty sides.
        for (a, b) in [(0, 0), (0, 100), (100, 0)] {
            let l = layout(a, b, 4, 2000);
            assert_eq!(l.chunks, 1);
            assert!(l.chunk_rows >= l.tile_rows && l.tile_rows.is_multiple_of(32));
        }
        // Wide rows: smaller tiles, still a multiple of 32.
        let l = layout(10, 10_000, 8 * 16 + 8, 2000);
        assert!(l.tile_rows * 136 <= TILE_SMEM_BYTES && l.tile_rows.is_multiple_of(32));
        // The count matrix stays bounded.
        let l = layout(1 << 26, 1 << 20, 4, 1 << 30);
        assert!(l.chunks * (1 << 26) <= MAX_COUNT_ENTRIES.max(1 << 26));
    }
}
