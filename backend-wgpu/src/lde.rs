//! Coset LDE (`shaders/wgsl/lde.wgsl`), in place in the LDE's own buffer
//! ([`backend_api::Backend::coset_lde_in_place`]): the first `n` of its `N = nB` rows hold the
//! trace, the other rows anything.
//!
//! 1. **Inverse NTT** (DIF, inverse twiddles) over rows `[0, n)`, stride `m`; its butterflies
//!    take any u64 (non-canonical trace values included) and give any u64 congruent to the
//!    value; the last pass's scaling canonicalises. Position `p` of the output holds
//!    coefficient `j = br_n(p)` times `n`, which belongs at the `B` rows `[pB, pB + B)`: a
//!    size-`N` bit-reversed array keeps coefficient `j` at `br_N(j) = pB`, and the first
//!    `log2 B` forward (DIT) stages over a block of `B` positions with one non-zero entry only
//!    copy it over the block.
//! 2. **Scaling and spreading, race-free in place.** The inverse's last pass scales row `p` by
//!    `s^j / n` and stores it straight to `[pB, pB + B)`. It runs over its groups in ranges from
//!    the top down, each range's targets above every row that it or a later range reads, group 0
//!    (which reads all its rows before writing) last ([`in_place_steps`] proves the order). Where
//!    a group's `2^r B` target rows do not fit a segment's span, or `B` exceeds
//!    [`WIDE_MAX_BLOWUP`], the pass stores row `p` at `p` instead and the rows move in waves of
//!    `lde_scale` from the top down, row 0's block last.
//! 3. **Forward NTT** (DIT, forward twiddles) with half-sizes `B .. N/2`: natural order out.
//!
//! **Work per invocation stays small at every blowup.** A pass's wide stores loop over the `B`
//! targets of each of an invocation's rows, so they run only up to [`WIDE_MAX_BLOWUP`]; an
//! `lde_scale` invocation stores at most [`SCALE_TARGETS`] rows of one column, its dispatches
//! cut so that every target is covered whatever `B`. Besides keeping the device parallel, this
//! keeps every invocation far below the 65,535 loop iterations that Mesa's llvmpipe runs before
//! it silently ends a shader's loops (`LP_MAX_TGSI_LOOP_ITERATIONS`, shared by all loops of an
//! invocation): with one invocation storing all `B` rows of its element, a 1-row trace at
//! blowup 2^20 came back zero from row 65,535 on, and 4 x 3 at blowup 16,384 (four rows of
//! 16,384 stores in one invocation) had a wrong root.
//!
//! The transforms run as passes of up to [`PASS_LOG`] radix-2 stages each: a workgroup loads
//! the 2^r rows of 1024 / 2^r columns that r consecutive stages combine into a shared-memory
//! tile, runs those stages there (two butterflies per invocation per stage, `ntt_pass_x2`) and
//! stores once; a pass of one stage runs `ntt_pass` (one butterfly per invocation, in
//! registers). A pass's r is the largest whose group rows span at most three segments' worth
//! of elements (so that they touch at most the four segments a dispatch binds), or 2 where that
//! is less: one segment for each of a two-stage group's four row ranges, a group whose rows
//! straddle segment boundaries running one stage at a time ([`Pass::record`]). At the
//! production shape (2^21 -> 2^22 rows x 316 columns, the H200 Vulkan driver's 1 GiB segments)
//! that is 5 passes for each transform instead of 21 stage sweeps each: (0, 5), (5, 5), (10, 5),
//! (15, 5), (20, 1) for the inverse and (1, 5), (6, 5), (11, 5), (16, 4), (20, 2) for the forward
//! transform, as `(log2 h, r)`.

use std::sync::Arc;

use backend_api::field::{LdeTwiddles, lde_finish_ranges};
use backend_api::{DeviceBuffer as _, Error, LdeParams, Result, validate};

use crate::context::{Gpu, Kernel, Module, NAME, Recorder, Space, Table, Window};
use crate::memory::{self, WgpuBuffer};

/// A pass of one stage: one butterfly per invocation, in registers.
const PASS: Kernel = Kernel { module: Module::Lde, entry: "ntt_pass", items_per_group: 256 };
/// Passes of two stages or more: two butterflies per invocation per stage, in a shared tile.
const PASS_X2: Kernel = Kernel { module: Module::Lde, entry: "ntt_pass_x2", items_per_group: 512 };
const SCALE: Kernel = Kernel { module: Module::Lde, entry: "lde_scale", items_per_group: 256 };
/// The kernels the coset LDE launches.
pub(crate) const KERNELS: [Kernel; 3] = [PASS, PASS_X2, SCALE];

/// Most radix-2 stages one pass runs (`PASS_LOG` in lde.wgsl): 5 measured fastest (101.0 ms
/// against 106.5 ms with 4 for the 2^21 -> 2^22 x 316 LDE on the H200).
const PASS_LOG: u32 = 5;

/// The largest blowup at which the inverse's last pass stores each row straight to its `B`
/// target rows (`PASS_WIDE`): an invocation of `ntt_pass_x2` then stores `4 B` elements. Larger
/// blowups move the rows with `lde_scale`, whose invocations store at most [`SCALE_TARGETS`].
const WIDE_MAX_BLOWUP: u64 = 64;

/// Target rows one `lde_scale` invocation stores at most (`SCALE_TARGETS` in lde.wgsl).
const SCALE_TARGETS: u64 = 64;

/// Pass flag (lde.wgsl): canonicalise every stored value (the forward transform's last
/// pass; the others store the lazy butterflies' words as they are).
const PASS_CANONICAL: u32 = 1;
/// Pass flag: scale row `p` of the output by `s^br(p) / n` (the inverse's last pass).
const PASS_SCALE: u32 = 2;
/// Pass flag (with [`PASS_SCALE`]): store every row `p` to `[pB, pB + B)` instead of row `p`.
const PASS_WIDE: u32 = 4;

/// One step of the in-place LDE, in the order it runs ([`in_place_steps`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// An inverse (DIF) pass of `r` stages from half-size `2^lh` over its groups `[ga, gb)` of
    /// rows `[0, n)` (all `n / 2^r` of them, or one range of the last pass), under the `PASS_*`
    /// flags.
    Inverse { lh: u32, r: u32, flags: u32, groups: (u64, u64) },
    /// Each row `p` of `[lo, hi)` to the `B` rows `[pB, pB + B)`, scaled by `s^br(p) / n` first
    /// when `scale` (only where the inverse has no pass, `n = 1`). Row 0, whose block holds it,
    /// is scaled in place (when `scale`) before it is copied to rows `[1, B)`
    /// ([`Setup::scale_rows`]), so that no invocation reads an element that another writes.
    Spread { lo: u64, hi: u64, scale: bool },
    /// A forward (DIT) pass of `r` stages from half-size `2^lh` over rows `[0, N)`.
    Forward { lh: u32, r: u32 },
}

/// The in-place LDE of `2^log_n` rows of `m` columns at blowup `2^log_b`, as the steps
/// [`coset_lde_in_place`] records, for segments of `seg` elements and passes of at most `most`
/// stages.
///
/// **Why the order is race-free.** The inverse passes read and write only rows `[0, n)`, each
/// group of a pass only its own rows, up to the last one (half-size 1: group `g` holds the `2^r`
/// consecutive rows `[g 2^r, (g + 1) 2^r)`), which scales every row `p` and, under `PASS_WIDE`,
/// stores it to `[pB, pB + B)`. That pass runs over its `G = n / 2^r` groups in ranges `[lo, hi)`
/// from the top down (backend-api's `lde_finish_ranges`, which the CUDA backend runs too):
/// `hi = G` first, then `hi = lo` of the range before, `lo = max(1, hi / B)`, while `hi > 1`;
/// then group 0 alone, `[0, 1)`. A range loads rows `[lo 2^r, hi 2^r)` and stores
/// rows `[lo 2^r B, hi 2^r B)`. As `lo B >= hi` (`G` and `B` are powers of two), its targets lie
/// at or above row `hi 2^r`: above every row that it or a later range loads, so that no
/// invocation overwrites a row another still has to load, and every target below `n` was
/// loaded by an earlier range (the others, `[n, N)`, held garbage). The ranges' targets tile
/// `[0, N)`, each row written once. Group 0 stores over its own rows: `ntt_pass` loads a
/// column's two rows in one invocation before storing either, and `ntt_pass_x2` loads all of a
/// column's `2^r` rows in one workgroup before the barriers that precede its stores.
///
/// `PASS_WIDE` needs a group's `2^r B` target rows to fit one segment's span (so that a dispatch
/// of one group or more still binds at most four segments), and `B <= WIDE_MAX_BLOWUP` (module
/// doc: work per invocation). Otherwise the last pass runs as one
/// range and stores every row at `p`, and the rows move in waves: while `c > 1` (from `c = n`),
/// rows `[0, c)` still hold unmoved rows and rows `[cB, N)` are final; the wave
/// `[ceil(c / B), c)` moves each row `p` to `[pB, pB + B)`. Its targets
/// `[ceil(c / B) B, cB)` start at or above `c`, above every row still to be read (its own
/// sources included), and end where the final rows begin. Then `c = ceil(c / B)`. Row 0 goes to
/// `[0, B)` last, each invocation reading its element before writing it. With `B = 1` the last
/// pass leaves every row in place, final; with `n = 1` the inverse has no pass and row 0 is
/// scaled on its way to `[0, B)`. The forward passes run after every move. The unit test
/// `in_place_steps_never_overwrite_a_row_before_reading_it` replays these steps on row labels
/// for `n = 1 .. 2^12`, `B = 1 .. 8`, with and without `PASS_WIDE`.
fn in_place_steps(log_n: u32, log_b: u32, m: u64, seg: u64, most: u32) -> Vec<Step> {
    let (n, b) = (1u64 << log_n, 1u64 << log_b);
    let inverse = passes(0, log_n, m, m, seg, most);
    let wide = b > 1 && b <= WIDE_MAX_BLOWUP && inverse.first().is_some_and(|&(_, r)| (b * m) << r <= seg);
    let mut steps = Vec::new();
    for &(lh, r) in inverse.iter().rev() {
        let groups = n >> r;
        if lh > 0 {
            steps.push(Step::Inverse { lh, r, flags: 0, groups: (0, groups) });
        } else if wide {
            let flags = PASS_SCALE | PASS_WIDE;
            steps.extend(lde_finish_ranges(groups, log_b).into_iter().map(|g| Step::Inverse {
                lh,
                r,
                flags,
                groups: (g.start, g.end),
            }));
        } else {
            steps.push(Step::Inverse { lh, r, flags: PASS_SCALE, groups: (0, groups) });
        }
    }
    if log_n == 0 {
        steps.push(Step::Spread { lo: 0, hi: 1, scale: true });
    } else if b > 1 && !wide {
        let mut c = n;
        while c > 1 {
            let lo = c.div_ceil(b);
            steps.push(Step::Spread { lo, hi: c, scale: false });
            c = lo;
        }
        steps.push(Step::Spread { lo: 0, hi: 1, scale: false });
    }
    steps.extend(passes(log_b, log_n + log_b, m, m, seg, most).into_iter().map(|(lh, r)| Step::Forward { lh, r }));
    steps
}

/// What every route shares: the segment check and the twiddle tables.
struct Setup {
    n: u64,
    m: u64,
    b: u64,
    log_n: u32,
    log_b: u32,
    seg: u64,
    tables: WgpuBuffer,
}

impl Setup {
    fn new(gpu: &Arc<Gpu>, params: &LdeParams, op: &str) -> Result<Self> {
        let (log_n, log_b) = (params.log_trace_rows(), params.log_blowup());
        let n = params.trace().rows() as u64;
        let m = params.trace().cols() as u64;
        let b = params.blowup() as u64;
        let seg = gpu.seg_elems() as u64;
        if m > seg {
            return Err(Error::InvalidArgument(format!(
                "{NAME}: {op}: a row of {m} columns exceeds one segment of {seg} elements (the storage binding \
                 limit); commit the columns in groups of at most {seg}"
            )));
        }
        // The tables are bound as one storage buffer: refused here, before the host spends time
        // and memory building them (N / 2 forward twiddles, 4 GiB at N = 2^30).
        let bytes = LdeTwiddles::bytes_for(log_n, log_b);
        // The bound `memory::upload_table` checks.
        let limit = gpu.hw.limits.max_storage_buffer_binding_size.min(gpu.hw.limits.max_buffer_size) as usize;
        if bytes > limit {
            return Err(Error::InvalidArgument(format!(
                "{NAME}: {op}: the twiddle tables for 2^{log_n} rows at blowup 2^{log_b} take {bytes} B, over one \
                 storage binding (max_storage_buffer_binding_size / max_buffer_size {limit} B); the largest LDE \
                 domain this adapter runs is 2^{} rows",
                (limit / 4).max(1).ilog2()
            )));
        }
        // The pool keeps the last tables between calls (40 MB at 2^21 -> 2^22 rows, whose upload
        // the host otherwise spends several milliseconds on before the first pass can start).
        let len = bytes / 8;
        let tables = memory::cached_table(gpu, (log_n, log_b, params.shift()), len, || {
            let tw = LdeTwiddles::shared(log_n, log_b, params.shift());
            let what = format!("the twiddle tables for 2^{log_n} x 2^{log_b}");
            memory::upload_table(gpu, &[&tw.inv_twiddles, &tw.twiddles, &tw.coset], &what)
        })?;
        Ok(Self { n, m, b, log_n, log_b, seg, tables })
    }

    /// Where the coset powers start in the tables: after `n / 2` inverse and `N / 2` forward
    /// twiddles.
    fn coset_offset(&self) -> u64 {
        let [inv, fwd, _] = LdeTwiddles::lens(self.log_n, self.log_b);
        (inv + fwd) as u64
    }

    /// Records `lde_scale` over rows `[lo, hi)` of the matrix at `base`: row `p` to rows
    /// `[pB, pB + B)`, scaled when `scale`. Row 0 (only in `[0, 1)`, the last wave, or the one row
    /// of `n = 1`) is scaled in place first and then copied to rows `[1, B)`, so that no
    /// invocation reads an element that another writes. Dispatches bind at most four segments:
    /// whole rows' targets where `B m` elements fit a segment, else one row's targets in pieces
    /// of a segment's worth.
    #[allow(clippy::too_many_arguments)]
    fn scale_rows(
        &self,
        rec: &mut Recorder<'_>,
        space: &Space<'_>,
        base: u64,
        (lo, hi): (u64, u64),
        scale: bool,
        op: &str,
    ) -> Result<()> {
        let (m, b) = (self.m, self.b);
        let mut p = lo;
        if p == 0 && p < hi {
            if scale {
                self.scale_dispatch(rec, space, base, (0, 1), (0, 1), true, op)?;
            }
            self.scale_targets(rec, space, base, 0, (1, b), op)?;
            p = 1;
        }
        let rows_per = self.seg / (b * m);
        while p < hi {
            if rows_per == 0 {
                // One row's B m elements exceed a segment.
                self.scale_targets(rec, space, base, p, (0, b), op)?;
                p += 1;
            } else {
                let k = rows_per.min(hi - p);
                self.scale_dispatch(rec, space, base, (p, k), (0, b), scale, op)?;
                p += k;
            }
        }
        Ok(())
    }

    /// Row `p` (unscaled) to its target rows `pB + s`, `s` in `[s0, s1)`, in dispatches of at most
    /// a segment's worth of target rows.
    fn scale_targets(
        &self,
        rec: &mut Recorder<'_>,
        space: &Space<'_>,
        base: u64,
        p: u64,
        (s0, s1): (u64, u64),
        op: &str,
    ) -> Result<()> {
        let per = (self.seg / self.m).max(1);
        let mut s = s0;
        while s < s1 {
            let e = s1.min(s + per);
            self.scale_dispatch(rec, space, base, (p, 1), (s, e), false, op)?;
            s = e;
        }
        Ok(())
    }

    /// One `lde_scale` dispatch: rows `[p, p + k)`, each to its target rows `pB + s` for `s` in
    /// `[s0, s1)`, at most [`SCALE_TARGETS`] per invocation.
    #[allow(clippy::too_many_arguments)]
    fn scale_dispatch(
        &self,
        rec: &mut Recorder<'_>,
        space: &Space<'_>,
        base: u64,
        (p, k): (u64, u64),
        (s0, s1): (u64, u64),
        scale: bool,
        op: &str,
    ) -> Result<()> {
        let (m, b) = (self.m, self.b);
        if k == 0 || s1 <= s0 {
            return Ok(());
        }
        // At least 1: the kernel divides by it (lde.wgsl is compiled without division guards).
        let chunks = (s1 - s0).div_ceil(SCALE_TARGETS);
        let spans = [(base + p * m, base + (p + k) * m), (base + (p * b + s0) * m, base + ((p + k - 1) * b + s1) * m)];
        let window = space.window::<4>(&spans, op)?;
        let args = [
            base as u32,
            m as u32,
            b as u32,
            self.log_n,
            self.coset_offset() as u32,
            p as u32,
            s0 as u32,
            s1 as u32,
            u32::from(scale),
            chunks as u32,
        ];
        let items = u32::try_from(k * chunks * m).map_err(|_| {
            Error::InvalidArgument(format!("{NAME}: {op}: {k} rows x {chunks} x {m} items exceed one dispatch"))
        })?;
        rec.dispatch(SCALE, items, &args, window, Window::empty(), Table::Buffer(&self.tables.segs[0]))
    }
}

/// [`backend_api::Backend::coset_lde_in_place`] (module doc).
pub(crate) fn coset_lde_in_place(gpu: &Arc<Gpu>, buf: &mut WgpuBuffer, params: &LdeParams) -> Result<()> {
    validate::coset_lde_in_place(params, buf.len())?;
    let op = "coset_lde_in_place";
    let set = Setup::new(gpu, params, op)?;
    let (space, bases) = Space::new(gpu, &[&buf.segs])?;
    let base = bases[0] as u64;
    let tab = &set.tables.segs[0];
    let mut rec = gpu.recorder(op);
    let inverse = Transform { base, stride: set.m, m: set.m, log_rows: set.log_n, tw_off: 0, inverse: true };
    let log_big_n = set.log_n + set.log_b;
    let forward = Transform { base, stride: set.m, m: set.m, log_rows: log_big_n, tw_off: set.n / 2, inverse: false };
    let store = |flags| Store { flags, log_b: set.log_b, coset_off: set.coset_offset() };
    let steps = in_place_steps(set.log_n, set.log_b, set.m, set.seg, PASS_LOG);
    for (i, &step) in steps.iter().enumerate() {
        match step {
            Step::Inverse { lh, r, flags, groups } => {
                Pass { tf: &inverse, lh, r, store: store(flags) }.record(&mut rec, &space, tab, groups)?;
            }
            Step::Spread { lo, hi, scale } => set.scale_rows(&mut rec, &space, base, (lo, hi), scale, op)?,
            // Forward passes come last: the final step is the transform's last pass.
            Step::Forward { lh, r } => {
                let flags = if i + 1 == steps.len() { PASS_CANONICAL } else { 0 };
                pass(&mut rec, &space, tab, &forward, lh, r, store(flags))?;
            }
        }
        // Submit each pass as soon as it is recorded (the last inverse pass once its final range,
        // group 0, is), so that the device runs it while the host records the next one
        // (recording the whole LDE takes the host several milliseconds).
        if matches!(step, Step::Inverse { groups: (0, _), .. } | Step::Forward { .. }) {
            rec.flush()?;
        }
    }
    rec.flush()?;
    drop(rec);
    drop(set);
    Ok(())
}

/// One transform: `2^log_rows` logical rows `stride` elements apart, `m` columns each.
struct Transform {
    base: u64,
    stride: u64,
    m: u64,
    log_rows: u32,
    /// Where this transform's twiddles start in the table (`2^(log_rows - 1)` of them).
    tw_off: u64,
    /// DIF with inverse twiddles (`true`) or DIT with forward twiddles.
    inverse: bool,
}

/// How a pass stores its output (`ntt_store` in lde.wgsl).
#[derive(Clone, Copy)]
struct Store {
    /// `PASS_*` flags.
    flags: u32,
    log_b: u32,
    /// Where the coset powers start in the table.
    coset_off: u64,
}

/// Stages a pass may always take, whatever the segments: its `2^r` row ranges are bound one by one
/// (four slots), and [`Pass::record`] runs a group whose rows touch more segments than that one
/// stage at a time.
const SPREAD_STAGES: u32 = 2;

/// The passes `(log2 h, r)` that cover the stages with half-sizes `2^lo .. 2^(hi - 1)`, in
/// ascending order: each takes up to `most` (1..=[`PASS_LOG`]; the backend runs `PASS_LOG`)
/// stages, fewer where one group's rows (`2^r h` rows of `stride` elements, a span of
/// `(2^r - 1) h stride + m` elements) could touch more than the four segments a dispatch binds,
/// which a span of at most `3 seg + 1` elements never does, but not fewer than
/// [`SPREAD_STAGES`] (or `most`): a group of four rows spread over the buffer needs one segment
/// per row, or two where a row straddles a segment boundary ([`Pass::record`] runs such a group
/// one stage at a time).
fn passes(lo: u32, hi: u32, stride: u64, m: u64, seg: u64, most: u32) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut lh = lo;
    while lh < hi {
        let mut r = most.min(hi - lh);
        let floor = SPREAD_STAGES.min(r);
        while r > floor && (stride << lh) * ((1 << r) - 1) + m > 3 * seg + 1 {
            r -= 1;
        }
        out.push((lh, r));
        lh += r;
    }
    out
}

/// The first row of group `g` of a pass of `r` stages from half-size `2^lh`; the group holds
/// the rows `first + j 2^lh`, `j < 2^r` (`ntt_pass` in lde.wgsl computes the same).
fn group_first(g: u64, lh: u32, r: u32) -> u64 {
    ((g >> lh) << (lh + r)) + (g & ((1 << lh) - 1))
}

/// The group of a one-stage pass at half-size `2^l` whose first row is `row` (bit `l` of `row`
/// clear): the inverse of [`group_first`] for `r = 1`.
fn one_stage_group(row: u64, l: u32) -> u64 {
    ((row >> (l + 1)) << l) | (row & ((1 << l) - 1))
}

/// Records one pass of `r` stages from half-size `2^lh` over all its groups ([`Pass::record`]).
fn pass(
    rec: &mut Recorder<'_>,
    space: &Space<'_>,
    tab: &wgpu::Buffer,
    tf: &Transform,
    lh: u32,
    r: u32,
    store: Store,
) -> Result<()> {
    Pass { tf, lh, r, store }.record(rec, space, tab, (0, 1u64 << (tf.log_rows - r)))
}

/// One pass of `r` stages from half-size `2^lh` of a transform, stored per `store`.
struct Pass<'a> {
    tf: &'a Transform,
    lh: u32,
    r: u32,
    store: Store,
}

impl Pass<'_> {
    /// Records the pass over groups `[ga, gb)`, cut into dispatches of aligned, power-of-two
    /// group ranges whose rows (and, under [`PASS_WIDE`], target rows) touch at most four
    /// segments. A two-stage group whose four rows alone touch more (rows that straddle segment
    /// boundaries) runs as four one-stage dispatches, each of two rows: the same butterflies in
    /// the same stage order.
    fn record(
        &self,
        rec: &mut Recorder<'_>,
        space: &Space<'_>,
        tab: &wgpu::Buffer,
        (ga, gb): (u64, u64),
    ) -> Result<()> {
        let (tf, lh, r, store) = (self.tf, self.lh, self.r, self.store);
        // One invocation per butterfly, and dispatch items are u32.
        let max_groups = (u64::from(u32::MAX) / (tf.m << (r - 1))).max(1);
        let mut g0 = ga;
        while g0 < gb {
            let align = if g0 == 0 { gb } else { 1 << g0.trailing_zeros() };
            let mut k = align.min(gb - g0).min(max_groups);
            k = 1 << k.ilog2();
            loop {
                match self.window(space, g0, k) {
                    Ok(window) => {
                        self.dispatch(rec, tab, g0, k, window)?;
                        break;
                    }
                    Err(_) if k > 1 => k /= 2,
                    Err(_) if r == 2 && store.flags & (PASS_SCALE | PASS_WIDE) == 0 => {
                        let first = group_first(g0, lh, 2);
                        let order = if tf.inverse { [lh + 1, lh] } else { [lh, lh + 1] };
                        for l in order {
                            let one = Pass { tf, lh: l, r: 1, store };
                            let half = 1u64 << (l - lh);
                            for j in (0..4u64).filter(|j| j & half == 0) {
                                let g = one_stage_group(first + (j << lh), l);
                                debug_assert_eq!(group_first(g, l, 1), first + (j << lh));
                                let window = one.window(space, g, 1)?;
                                one.dispatch(rec, tab, g, 1, window)?;
                            }
                        }
                        break;
                    }
                    Err(e) => return Err(e),
                }
            }
            g0 += k;
        }
        Ok(())
    }

    /// The segments that groups `[g0, g0 + k)` touch, as a window (`k <= 2^lh` keeps every one of
    /// the `2^r` row ranges contiguous).
    fn window<'b>(&self, space: &Space<'b>, g0: u64, k: u64) -> Result<Window<'b, 4>> {
        let (tf, store) = (self.tf, self.store);
        let h = 1u64 << self.lh;
        let span = |row: u64, count: u64| (tf.base + row * tf.stride, tf.base + (row + count - 1) * tf.stride + tf.m);
        let wide = store.flags & PASS_WIDE != 0;
        // Wide stores assume consecutive rows per group (h = 1) and rows m apart.
        debug_assert!(!wide || (self.lh == 0 && tf.stride == tf.m));
        let first = group_first(g0, self.lh, self.r);
        let mut spans: Vec<(u64, u64)> = if k <= h {
            (0..1u64 << self.r).map(|j| span(first + j * h, k)).collect()
        } else {
            vec![span(first, k << self.r)]
        };
        if wide {
            let end = first + (k << self.r);
            spans.push((tf.base + (first << store.log_b) * tf.m, tf.base + (end << store.log_b) * tf.m));
        }
        space.window::<4>(&spans, "coset_lde pass")
    }

    /// One dispatch of `ntt_pass` over groups `[g0, g0 + k)`.
    fn dispatch(
        &self,
        rec: &mut Recorder<'_>,
        tab: &wgpu::Buffer,
        g0: u64,
        k: u64,
        window: Window<'_, 4>,
    ) -> Result<()> {
        let (tf, store, lh, r) = (self.tf, self.store, self.lh, self.r);
        let args = [
            tf.base as u32,
            tf.stride as u32,
            tf.m as u32,
            lh,
            r,
            tf.tw_off as u32,
            tf.log_rows - 1 - lh,
            g0 as u32,
            u32::from(tf.inverse),
            store.flags,
            store.log_b,
            store.coset_off as u32,
        ];
        let kernel = if r >= 2 { PASS_X2 } else { PASS };
        rec.dispatch(kernel, ((k * tf.m) << (r - 1)) as u32, &args, window, Window::empty(), Table::Buffer(tab))
    }
}

#[cfg(test)]
mod order {
    //! The in-place order ([`in_place_steps`]) replayed on row labels: no row is overwritten
    //! before its last read, no dispatch writes a row that another of its invocations reads,
    //! and every LDE row ends with the scaled coefficient row it needs.

    use super::*;

    /// What a row of the buffer holds during the replay.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Row {
        /// Not yet written (rows `[n, N)` on entry).
        Garbage,
        /// Row `p` of the inverse with the stages of half-size `< 2^left` still to run.
        Inverse { p: u64, left: u32 },
        /// Inverse output row `p`, scaled.
        Scaled(u64),
    }

    /// Replays `steps` on `2^log_n` rows at blowup `2^log_b`; the first violation as an error.
    fn replay(log_n: u32, log_b: u32, steps: &[Step]) -> std::result::Result<(), String> {
        let (n, b) = (1u64 << log_n, 1u64 << log_b);
        let big_n = n * b;
        let mut rows: Vec<Row> =
            (0..big_n).map(|t| if t < n { Row::Inverse { p: t, left: log_n } } else { Row::Garbage }).collect();
        let final_rows = |rows: &[Row]| -> std::result::Result<(), String> {
            match (0..big_n).find(|&t| rows[t as usize] != Row::Scaled(t >> log_b)) {
                Some(t) => Err(format!("row {t} holds {:?} where the forward NTT reads it", rows[t as usize])),
                None => Ok(()),
            }
        };
        let mut next_forward = log_b;
        for (i, &step) in steps.iter().enumerate() {
            let at = format!("step {i} {step:?}");
            // (target row, writer, value): a writer is a group of the pass or an invocation row.
            let mut writes: Vec<(u64, u64, Row)> = Vec::new();
            // The writer that reads each row in this step.
            let mut reader: Vec<Option<u64>> = vec![None; big_n as usize];
            match step {
                Step::Inverse { lh, r, flags, groups: (ga, gb) } => {
                    if next_forward != log_b {
                        return Err(format!("{at}: inverse after a forward pass"));
                    }
                    if (flags & PASS_SCALE != 0) != (lh == 0) || (flags & PASS_WIDE != 0 && flags & PASS_SCALE == 0) {
                        return Err(format!("{at}: scaling belongs to the last pass, wide stores with it"));
                    }
                    if ga >= gb || gb > n >> r {
                        return Err(format!("{at}: groups outside [0, {})", n >> r));
                    }
                    // A group missed here leaves rows that the next pass (or the forward NTT)
                    // finds unfinished; a group run twice finds its rows already written.
                    for g in ga..gb {
                        for j in 0..1u64 << r {
                            let t = group_first(g, lh, r) + (j << lh);
                            if t >= n || reader[t as usize].replace(g).is_some() {
                                return Err(format!("{at}: row {t} outside [0, n) or in two groups"));
                            }
                            if rows[t as usize] != (Row::Inverse { p: t, left: lh + r }) {
                                return Err(format!("{at}: row {t} holds {:?}", rows[t as usize]));
                            }
                            if flags & PASS_SCALE == 0 {
                                writes.push((t, g, Row::Inverse { p: t, left: lh }));
                            } else if flags & PASS_WIDE != 0 {
                                writes.extend((t * b..(t + 1) * b).map(|u| (u, g, Row::Scaled(t))));
                            } else {
                                writes.push((t, g, Row::Scaled(t)));
                            }
                        }
                    }
                }
                Step::Spread { lo, hi, scale } => {
                    if next_forward != log_b || lo >= hi || hi > n {
                        return Err(format!("{at}: out of order or out of range"));
                    }
                    for p in lo..hi {
                        let want = if scale { Row::Inverse { p, left: 0 } } else { Row::Scaled(p) };
                        if rows[p as usize] != want {
                            return Err(format!("{at}: row {p} holds {:?}, expected {want:?}", rows[p as usize]));
                        }
                        reader[p as usize] = Some(p);
                        writes.extend((p * b..(p + 1) * b).map(|u| (u, p, Row::Scaled(p))));
                    }
                }
                Step::Forward { lh, r } => {
                    if next_forward == log_b {
                        final_rows(&rows).map_err(|e| format!("{at}: {e}"))?;
                    }
                    if lh != next_forward {
                        return Err(format!("{at}: expected the forward pass from half-size 2^{next_forward}"));
                    }
                    next_forward += r;
                    continue;
                }
            }
            let mut written = vec![false; big_n as usize];
            for &(t, writer, value) in &writes {
                if std::mem::replace(&mut written[t as usize], true) {
                    return Err(format!("{at}: row {t} written twice"));
                }
                if reader[t as usize].is_some_and(|g| g != writer) {
                    return Err(format!("{at}: row {t} written by {writer} while {:?} reads it", reader[t as usize]));
                }
                rows[t as usize] = value;
            }
        }
        if next_forward != log_n + log_b {
            return Err(format!("the forward passes end at half-size 2^{next_forward}"));
        }
        final_rows(&rows)
    }

    #[test]
    fn in_place_steps_never_overwrite_a_row_before_reading_it() {
        let (mut wide, mut narrow) = (0, 0);
        // (m, segment elements): the production segment; 8 KiB segments where a pass group's
        // targets fit, and where at B = 4 and 8 they do not (the pass then stores every row at p
        // and waves move the rows).
        for (m, seg) in [(316, 1 << 27), (5, 1024), (100, 1024)] {
            for log_b in 0..=3 {
                for log_n in 0..=12 {
                    if (m << log_b) > seg {
                        continue;
                    }
                    for most in 1..=PASS_LOG {
                        let steps = in_place_steps(log_n, log_b, m, seg, most);
                        if let Err(e) = replay(log_n, log_b, &steps) {
                            panic!("n = 2^{log_n}, B = 2^{log_b}, m = {m}, segment {seg}, {most} stages: {e}");
                        }
                        let last = steps.iter().find_map(|s| match s {
                            Step::Inverse { lh: 0, flags, .. } => Some(*flags),
                            _ => None,
                        });
                        let waves = steps.iter().any(|s| matches!(s, Step::Spread { .. }));
                        match last {
                            Some(f) if log_b > 0 && f & PASS_WIDE != 0 => {
                                assert!(!waves, "n = 2^{log_n}, B = 2^{log_b}: waves after wide stores: {steps:?}");
                                wide += 1;
                            }
                            Some(_) if log_b > 0 => narrow += 1,
                            _ => {}
                        }
                    }
                }
            }
        }
        assert!(wide > 100 && narrow > 20, "both kinds of last pass replayed: {wide} wide, {narrow} not");
        // Around the wide stores' blowup limit, on the production segment: B = 64 stores wide,
        // B = 128 and up moves the rows in waves.
        for log_b in 6..=8 {
            for log_n in 0..=7 {
                let steps = in_place_steps(log_n, log_b, 3, 1 << 27, PASS_LOG);
                if let Err(e) = replay(log_n, log_b, &steps) {
                    panic!("n = 2^{log_n}, B = 2^{log_b}: {e}");
                }
                let wide = steps.iter().any(|s| matches!(s, Step::Inverse { flags, .. } if flags & PASS_WIDE != 0));
                assert_eq!(
                    wide,
                    log_n > 0 && 1u64 << log_b <= WIDE_MAX_BLOWUP,
                    "n = 2^{log_n}, B = 2^{log_b}: {steps:?}"
                );
            }
        }
    }

    /// Each pass takes `most` stages where a group's rows can touch at most the four segments a
    /// dispatch binds (a span of at most three segments' worth plus one element), otherwise as
    /// many as can but never fewer than two (or `most`), and the passes cover the stages in
    /// order; a one-stage group found by [`one_stage_group`] starts at the row it was asked for.
    #[test]
    fn passes_take_two_stages_where_rows_spread_over_segments() {
        for (stride, m, seg) in [(316, 316, 1u64 << 27), (3, 3, 1024), (200, 100, 1024)] {
            for most in 1..=PASS_LOG {
                for (lo, hi) in [(0, 21), (1, 22), (0, 12), (3, 9)] {
                    let p = passes(lo, hi, stride, m, seg, most);
                    let mut next = lo;
                    for &(lh, r) in &p {
                        assert_eq!(lh, next, "{p:?}");
                        // A span of L elements touches at most (L - 2) / seg + 2 segments.
                        let fits = |r: u32| ((stride << lh) * ((1 << r) - 1) + m - 2) / seg + 2 <= 4;
                        let full = most.min(hi - lh);
                        let want = (1..=full).rev().find(|&r| fits(r)).unwrap_or(1).max(SPREAD_STAGES.min(full));
                        assert_eq!(r, want, "pass at 2^{lh} of {p:?} (stride {stride}, segment {seg}, most {most})");
                        next += r;
                    }
                    assert_eq!(next, hi, "{p:?}");
                }
            }
        }
        assert_eq!(passes(1, 22, 316, 316, 1 << 27, 4), [(1, 4), (5, 4), (9, 4), (13, 4), (17, 3), (20, 2)]);
        assert_eq!(passes(0, 21, 316, 316, 1 << 27, 4), [(0, 4), (4, 4), (8, 4), (12, 4), (16, 4), (20, 1)]);
        for l in 0..8 {
            for row in (0..1u64 << 10).filter(|row| row & (1 << l) == 0) {
                assert_eq!(group_first(one_stage_group(row, l), l, 1), row, "row {row}, half-size 2^{l}");
            }
        }
    }

    #[test]
    fn the_replay_catches_a_wrong_order() {
        // 2^8 rows at B = 2 in passes of two stages: the last pass's 64 groups of 4 rows run in
        // ranges from the top down, group 0 last, and nothing is left to move.
        let steps = in_place_steps(8, 1, 3, 1 << 20, 2);
        replay(8, 1, &steps).unwrap();
        let finish: Vec<usize> =
            (0..steps.len()).filter(|&i| matches!(steps[i], Step::Inverse { lh: 0, .. })).collect();
        let ranges: Vec<(u64, u64)> = finish
            .iter()
            .map(|&i| match steps[i] {
                Step::Inverse { groups, flags, .. } if flags == PASS_SCALE | PASS_WIDE => groups,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(ranges, [(32, 64), (16, 32), (8, 16), (4, 8), (2, 4), (1, 2), (0, 1)]);
        assert!(!steps.iter().any(|s| matches!(s, Step::Spread { .. })), "{steps:?}");
        // The ranges bottom-up: group 0's targets [0, 8) overwrite group 1's rows before it reads
        // them.
        let mut up = steps.clone();
        for (&i, &j) in finish.iter().zip(finish.iter().rev()) {
            up[i] = steps[j];
        }
        assert!(replay(8, 1, &up).is_err(), "bottom-up ranges accepted");
        // The last pass as one range, every row wide: group 1's targets [8, 16) are groups 2 and 3's
        // rows.
        let whole: Vec<Step> = steps
            .iter()
            .filter_map(|s| match *s {
                Step::Inverse { lh: 0, r, flags, groups: (0, 1) } => {
                    Some(Step::Inverse { lh: 0, r, flags, groups: (0, 64) })
                }
                Step::Inverse { lh: 0, .. } => None,
                other => Some(other),
            })
            .collect();
        assert!(replay(8, 1, &whole).is_err(), "one wide range over every group accepted");
        // Two ranges as one, [8, 32): group 8's targets [64, 72) are groups 16 and 17's rows.
        let merged: Vec<Step> = steps
            .iter()
            .filter_map(|s| match *s {
                Step::Inverse { lh: 0, groups: (8, 16), .. } => None,
                Step::Inverse { lh: 0, r, flags, groups: (16, 32) } => {
                    Some(Step::Inverse { lh: 0, r, flags, groups: (8, 32) })
                }
                other => Some(other),
            })
            .collect();
        assert!(replay(8, 1, &merged).is_err(), "a range over [8, 32) accepted");
        // The last pass without its wide stores (and no waves): rows [n, N) unset.
        let narrow: Vec<Step> = steps
            .iter()
            .map(|s| match *s {
                Step::Inverse { lh: 0, r, flags, groups } => {
                    Step::Inverse { lh: 0, r, flags: flags & !PASS_WIDE, groups }
                }
                other => other,
            })
            .collect();
        assert!(replay(8, 1, &narrow).is_err(), "rows [n, N) left unset");
        // Dropping group 0's range leaves rows [0, 8) unset.
        let no_group0: Vec<Step> =
            steps.iter().copied().filter(|s| !matches!(s, Step::Inverse { lh: 0, groups: (0, 1), .. })).collect();
        assert!(replay(8, 1, &no_group0).is_err(), "group 0's rows left unset");

        // 8 KiB segments, B = 4, 100 columns: a group's targets do not fit a segment's span, so the
        // last pass stores every row at p and waves move them, [16, 64), [4, 16), [1, 4), [0, 1).
        let steps = in_place_steps(6, 2, 100, 1024, 4);
        replay(6, 2, &steps).unwrap();
        assert!(steps.contains(&Step::Inverse { lh: 0, r: 4, flags: PASS_SCALE, groups: (0, 4) }), "{steps:?}");
        // The waves bottom-up: row 1's targets [4, 8) overwrite rows not yet moved.
        let mut up = steps.clone();
        let spreads: Vec<usize> = (0..up.len()).filter(|&i| matches!(up[i], Step::Spread { .. })).collect();
        let moved: Vec<Step> = spreads.iter().rev().map(|&i| steps[i]).collect();
        for (&i, s) in spreads.iter().zip(moved) {
            up[i] = s;
        }
        assert!(replay(6, 2, &up).is_err(), "bottom-up waves accepted");
        // The last two waves before row 0's as one, [1, 16): its targets [4, 64) overlap its own
        // sources.
        assert!(steps.contains(&Step::Spread { lo: 4, hi: 16, scale: false }), "{steps:?}");
        let merged: Vec<Step> = steps
            .iter()
            .filter_map(|s| match *s {
                Step::Spread { lo: 4, hi: 16, .. } => None,
                Step::Spread { lo: 1, hi: 4, scale } => Some(Step::Spread { lo: 1, hi: 16, scale }),
                other => Some(other),
            })
            .collect();
        assert!(replay(6, 2, &merged).is_err(), "a wave over [1, 16) accepted");
        // Dropping row 0's step leaves rows [0, B) unset.
        let no_row0: Vec<Step> = steps.iter().copied().filter(|s| !matches!(s, Step::Spread { lo: 0, .. })).collect();
        assert!(replay(6, 2, &no_row0).is_err(), "row 0's block left unset");
    }
}

#[cfg(test)]
mod tests {
    //! The WGSL Goldilocks arithmetic (both implementations) against u128 arithmetic, through
    //! the `gl_selftest` kernel, on every pair of edge values (non-canonical ones included) and
    //! on random pairs. Skipped, saying so, without an adapter; `REQUIRE_WGPU=1` fails instead.

    use super::*;
    use crate::{WgpuBackend, WgpuOptions};

    const P: u64 = 0xFFFF_FFFF_0000_0001;

    const SELFTEST: Kernel = Kernel { module: Module::Lde, entry: "gl_selftest", items_per_group: 256 };

    /// Outputs per pair of `gl_selftest`.
    const OUTPUTS: usize = 9;

    fn reference(a: u64, b: u64) -> [u64; OUTPUTS] {
        let p = u128::from(P);
        let (ca, cb) = (u128::from(a) % p, u128::from(b) % p);
        [
            ((ca + cb) % p) as u64,
            ((ca + p - cb) % p) as u64,
            (u128::from(a) * u128::from(b) % p) as u64,
            ca as u64,
            ((ca + cb) % p) as u64,
            ((ca + p - cb) % p) as u64,
            // The lazy forms take any u64 and agree once canonicalised.
            ((ca + cb) % p) as u64,
            ((ca + p - cb) % p) as u64,
            (u128::from(a) * u128::from(b) % p) as u64,
        ]
    }

    fn run(gpu: &Arc<Gpu>, a: &[u64], b: &[u64]) -> Vec<u64> {
        let (da, db) = (memory::upload(gpu, a).unwrap(), memory::upload(gpu, b).unwrap());
        let out = memory::alloc(gpu, OUTPUTS * a.len()).unwrap();
        let (space, bases) = Space::new(gpu, &[&da.segs, &db.segs, &out.segs]).unwrap();
        let spans = [
            (bases[0] as u64, bases[0] as u64 + a.len() as u64),
            (bases[1] as u64, bases[1] as u64 + b.len() as u64),
            (bases[2] as u64, bases[2] as u64 + (OUTPUTS * a.len()) as u64),
        ];
        let window = space.window::<4>(&spans, "gl_selftest").unwrap();
        let mut rec = gpu.recorder("gl_selftest");
        rec.dispatch(SELFTEST, a.len() as u32, &bases, window, Window::empty(), Table::None).unwrap();
        rec.flush().unwrap();
        drop(rec);
        let mut got = vec![0; OUTPUTS * a.len()];
        memory::download(gpu, &out, 0, &mut got).unwrap();
        got
    }

    #[test]
    fn field_arithmetic_matches_u128_on_both_paths() {
        let edges = [
            0,
            1,
            2,
            0xFFFF_FFFF,
            1 << 32,
            (1 << 32) + 1,
            1 << 63,
            (1 << 63) + 0xFFFF_FFFF,
            P - 2,
            P - 1,
            P,
            P + 1,
            P + 0xFFFF_FFFE,
            u64::MAX - 1,
            u64::MAX,
            0xFFFF_FFFF_0000_0000,
            0x0000_0001_FFFF_FFFF,
        ];
        let (mut a, mut b): (Vec<u64>, Vec<u64>) =
            edges.iter().flat_map(|&x| edges.iter().map(move |&y| (x, y))).unzip();
        let mut state = 0x9E37_79B9_7F4A_7C15_u64;
        let mut xorshift = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..1 << 16 {
            a.push(xorshift());
            b.push(xorshift());
        }
        // Operands at and just below 2^64 and around p, where the lazy forms' carries and
        // borrows chain.
        for _ in 0..1 << 14 {
            let (s, t) = (xorshift(), xorshift());
            let near = |v: u64, k: u64| match k % 3 {
                0 => u64::MAX - v % (1 << 33),
                1 => P - (1 << 32) + v % (1 << 33),
                _ => v % (1 << 33),
            };
            a.push(near(s, t));
            b.push(near(t, s >> 7));
        }
        for portable in [false, true] {
            let options = WgpuOptions { allow_software: true, portable_arithmetic: portable, ..Default::default() };
            let Some(backend) = conformance::parity::or_skip(
                WgpuBackend::new(options),
                "backend-wgpu field_arithmetic_matches_u128_on_both_paths",
                "REQUIRE_WGPU",
            ) else {
                return;
            };
            let path = if backend.uses_int64() { "native u64" } else { "u32 pairs" };
            let got = run(&backend.gpu, &a, &b);
            for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
                assert_eq!(
                    got[OUTPUTS * i..OUTPUTS * (i + 1)],
                    reference(x, y),
                    "{path}: a = {x:#x}, b = {y:#x} (add, sub, mul, canon, add_c, sub_c, lazy add, sub, mul)"
                );
            }
            eprintln!("wgpu field self-test: {} pairs on {path}", a.len());
        }
    }
}
