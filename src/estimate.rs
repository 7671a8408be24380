//! An **estimate** of a GPU kernel's time on an H100 from its memory accesses, without a GPU.
//!
//! The input is a trace of accesses to global memory ([`Access`]), as the interpreter's
//! observer reports them for a Stage-III function run on real data
//! (`sparsec_interp::run_observed`), or as a transcription of a hand-written kernel emits
//! them ([`gespmm_trace`]). The model is deliberately small; `docs/gpu-estimate.md` gives its
//! reasoning and its limits. In short:
//!
//! 1. **Warp memory instructions.** Accesses with the same block, warp (linear thread id / 32),
//!    site, and per-thread occurrence number of that site form one warp instruction; its
//!    *sectors* are the distinct 32-byte sectors (buffer, byte address / 32) it touches. A
//!    load whose sectors are exactly those of the previous execution of the same site by the
//!    same warp is an **L1 hit** (a one-entry cache per warp and site: loop-invariant loads
//!    that compilers hoist, broadcasts of consecutive elements) and costs nothing below.
//! 2. **Bytes.** L2 bytes = 32 × the sectors requested by all other warp instructions. The
//!    footprint is 32 × the distinct sectors of the kernel. DRAM bytes = the footprint when it
//!    fits in L2 (50 MB); above, each re-reference misses with probability 1 − L2/footprint.
//! 3. **Latency.** A warp's loads form *rounds*: a run of consecutive loads of the same depth
//!    (how many loads deep the address is) and distinct sites overlap; a deeper load waits for
//!    its address, a repeated site or a shallower load is a later step. Each round costs one
//!    memory latency: L2's, plus DRAM's extra for the fraction of L2 bytes that miss. Warps run
//!    on 132 SMs, as many per SM as the occupancy allows (registers, threads, shared memory),
//!    and compilers unroll loops by [`UNROLL`] (4), so that many rounds of one warp overlap:
//!    latency bound = max(longest warp's rounds, all rounds / (132 × resident warps per SM)) ×
//!    latency / 4.
//! 4. **Estimate** = max(DRAM bytes / 3.35 TB/s, L2 bytes / L2 bandwidth, latency bound); the
//!    term that wins is the bound, and "% of the memory roofline" is
//!    (DRAM bytes / 3.35 TB/s) / estimate.
//!
//! [`Collector`] aggregates a trace on the fly, one block at a time (it never stores the whole
//! trace), into [`Traffic`] per kernel; [`estimate`] turns one kernel's traffic and its
//! [`Occupancy`] into an [`Estimate`]. Everything here is an estimate, not a measurement.

use crate::interp::{Access, AccessKind};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

/// Bytes of a memory sector, the unit of L2 and DRAM traffic.
pub const SECTOR: u64 = 32;

/// Rounds of one warp that overlap: the unrolling factor of innermost loops, which lets a
/// warp issue the loads of that many iterations before it waits (LLVM's NVPTX back end and
/// NVRTC both unroll csrmm's and the peer's nonzero loops by 4: `sparsec gpu-report` shows
/// 4 multiply-adds per iteration of their main innermost loop).
pub const UNROLL: f64 = 4.0;

/// The figures of a GPU that the model uses.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gpu {
    /// Name, for reports.
    pub name: &'static str,
    /// Streaming multiprocessors.
    pub sms: u32,
    /// DRAM bandwidth, bytes per second.
    pub dram_bandwidth: f64,
    /// L2 bandwidth, bytes per second.
    pub l2_bandwidth: f64,
    /// L2 capacity, bytes.
    pub l2_bytes: u64,
    /// Load latency of an L2 hit, seconds.
    pub l2_latency: f64,
    /// Load latency of a DRAM access (an L2 miss), seconds.
    pub dram_latency: f64,
    /// 32-bit registers per SM.
    pub registers_per_sm: u32,
    /// Register allocation unit per warp (registers).
    pub register_unit: u32,
    /// Threads resident per SM at most.
    pub threads_per_sm: u32,
    /// Warps resident per SM at most.
    pub warps_per_sm: u32,
    /// Blocks resident per SM at most.
    pub blocks_per_sm: u32,
    /// Shared memory per SM, bytes.
    pub shared_per_sm: u32,
    /// Shared memory the system reserves per resident block, bytes.
    pub shared_reserved_per_block: u32,
}

/// An H100 SXM5 (80 GB): figures from NVIDIA's H100 datasheet and CUDA's occupancy tables
/// (compute capability 9.0), L2 bandwidth and latencies from public microbenchmarks (see
/// `docs/gpu-estimate.md`).
pub const H100: Gpu = Gpu {
    name: "H100 SXM",
    sms: 132,
    dram_bandwidth: 3.35e12,
    l2_bandwidth: 5.5e12,
    l2_bytes: 50 * 1000 * 1000,
    l2_latency: 150e-9,
    dram_latency: 500e-9,
    registers_per_sm: 65536,
    register_unit: 256,
    threads_per_sm: 2048,
    warps_per_sm: 64,
    blocks_per_sm: 32,
    shared_per_sm: 228 * 1024,
    shared_reserved_per_block: 1024,
};

/// How many warps of a kernel an SM holds at once, and what limits it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Occupancy {
    /// Blocks resident per SM.
    pub blocks: u32,
    /// Warps resident per SM (`blocks` × warps per block).
    pub warps: u32,
    /// What limits it: `registers`, `threads`, `warps`, `blocks` or `shared memory`.
    pub limit: &'static str,
}

/// The occupancy of a kernel with `threads` per block, `registers` per thread (0: unknown,
/// not a limit) and `shared` bytes of shared memory per block, as CUDA's occupancy
/// calculator computes it (registers allocated per warp in units of `register_unit`).
pub fn occupancy(gpu: &Gpu, threads: u32, registers: u32, shared: u32) -> Occupancy {
    let warps_per_block = threads.max(1).div_ceil(32);
    let mut limits: Vec<(u32, &'static str)> = vec![
        (gpu.blocks_per_sm, "blocks"),
        (gpu.threads_per_sm / (warps_per_block * 32), "threads"),
        (gpu.warps_per_sm / warps_per_block, "warps"),
    ];
    if registers > 0 {
        let per_warp = (registers * 32).div_ceil(gpu.register_unit) * gpu.register_unit;
        limits.push(((gpu.registers_per_sm / per_warp) / warps_per_block, "registers"));
    }
    if shared > 0 {
        limits.push((gpu.shared_per_sm / (shared + gpu.shared_reserved_per_block), "shared memory"));
    }
    // The first of the smallest: blocks, threads, warps, then registers and shared memory.
    let (blocks, limit) = limits.iter().copied().fold((u32::MAX, ""), |best, l| if l.0 < best.0 { l } else { best });
    Occupancy { blocks, warps: blocks * warps_per_block, limit }
}

/// What one kernel's trace amounts to (see the module documentation).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Accesses in the trace.
    pub accesses: u64,
    /// Of which stores and atomics.
    pub writes: u64,
    /// Warp memory instructions, L1 hits excluded.
    pub warp_instructions: u64,
    /// Warp load instructions served by the per-warp, per-site one-entry cache.
    pub l1_hits: u64,
    /// Sectors requested by the warp instructions (L1 hits excluded).
    pub sectors: u64,
    /// Distinct sectors the kernel touches.
    pub distinct_sectors: u64,
    /// Blocks that made an access.
    pub blocks: u64,
    /// Warps that made an access.
    pub warps: u64,
    /// Threads per block: the extent of the thread indices seen (the largest over blocks).
    pub threads_per_block: u64,
    /// Latency rounds of all warps.
    pub rounds: u64,
    /// Latency rounds of the warp with the most.
    pub max_rounds: u64,
}

/// One warp instruction being gathered.
struct Group {
    warp: u64,
    /// Position in the program order of the first lane that made it.
    order: u64,
    site: u32,
    depth: u32,
    kind: AccessKind,
    sectors: Vec<u64>,
}

/// Aggregates a trace into [`Traffic`] per kernel, one block at a time: the accesses of a
/// block are gathered while they arrive one after the other (as the interpreter makes them),
/// grouped into warp instructions when the next block starts, then dropped. A kernel is the
/// [`Access::stmt`] value; a block whose accesses are interleaved with another's would be
/// counted as several blocks.
#[derive(Default)]
pub struct Collector {
    kernels: BTreeMap<usize, (Traffic, HashSet<u64, Fx>)>,
    current: Option<(usize, [i64; 3])>,
    pending: Vec<Access>,
}

impl Collector {
    /// An empty collector.
    pub fn new() -> Collector {
        Collector::default()
    }

    /// Takes one access.
    pub fn record(&mut self, a: &Access) {
        let key = (a.stmt, a.block);
        if self.current != Some(key) {
            self.flush();
            self.current = Some(key);
        }
        self.pending.push(*a);
    }

    /// The traffic of every kernel seen, by [`Access::stmt`].
    pub fn finish(mut self) -> BTreeMap<usize, Traffic> {
        self.flush();
        self.kernels
            .into_iter()
            .map(|(k, (mut t, distinct))| {
                t.distinct_sectors = distinct.len() as u64;
                (k, t)
            })
            .collect()
    }

    /// Groups the pending block's accesses into warp instructions and counts them.
    fn flush(&mut self) {
        let Some((stmt, _)) = self.current.take() else { return };
        let accesses = std::mem::take(&mut self.pending);
        if accesses.is_empty() {
            return;
        }
        let (t, distinct) = self.kernels.entry(stmt).or_default();
        // The block's shape: the extent of the thread indices seen.
        let mut dims = [1i64; 3];
        for a in &accesses {
            for (dim, &t) in dims.iter_mut().zip(&a.thread) {
                *dim = (*dim).max(t.max(0) + 1);
            }
        }
        t.threads_per_block = t.threads_per_block.max((dims[0] * dims[1] * dims[2]) as u64);
        t.blocks += 1;
        let threads = (dims[0] * dims[1] * dims[2]) as usize;
        let sites = accesses.iter().map(|a| a.site as usize + 1).max().unwrap_or(0);
        // Per thread: accesses so far (program order), and occurrences of each site so far.
        let mut seq = vec![0u64; threads];
        let mut occurrence = vec![0u32; threads * sites];
        let mut index: HashMap<(u64, u32, u32), usize, Fx> = HashMap::default();
        let mut groups: Vec<Group> = Vec::new();
        for a in &accesses {
            t.accesses += 1;
            t.writes += a.kind.writes() as u64;
            let [x, y, z] = a.thread.map(|v| v.max(0));
            let lin = (x + dims[0] * (y + dims[1] * z)) as u64;
            let order = seq[lin as usize];
            seq[lin as usize] += 1;
            // The lanes of a vector instruction share its occurrence.
            let occ = &mut occurrence[lin as usize * sites + a.site as usize];
            if a.lane == 0 {
                *occ += 1;
            }
            let key = (lin / 32, a.site, occ.saturating_sub(1));
            let g = *index.entry(key).or_insert_with(|| {
                groups.push(Group { warp: lin / 32, order, site: a.site, depth: a.depth, kind: a.kind, sectors: Vec::new() });
                groups.len() - 1
            });
            let byte = a.index * u64::from(a.bytes);
            // Elements wider than a sector touch every sector they span.
            for s in byte / SECTOR..=(byte + u64::from(a.bytes.max(1)) - 1) / SECTOR {
                groups[g].sectors.push(((a.buffer as u64) << 40) | s);
            }
        }
        groups.sort_by_key(|g| (g.warp, g.order, g.site));
        let mut start = 0;
        while start < groups.len() {
            let warp = groups[start].warp;
            let end = start + groups[start..].iter().take_while(|g| g.warp == warp).count();
            let rounds = count_warp(&mut groups[start..end], t, distinct);
            t.warps += 1;
            t.rounds += rounds;
            t.max_rounds = t.max_rounds.max(rounds);
            start = end;
        }
    }
}

/// Counts one warp's instructions (in program order) into `t` and `distinct`; returns its
/// latency rounds.
fn count_warp(groups: &mut [Group], t: &mut Traffic, distinct: &mut HashSet<u64, Fx>) -> u64 {
    let mut last: HashMap<u32, Vec<u64>, Fx> = HashMap::default();
    let mut rounds = 0;
    // The current round: its depth and sites.
    let mut round: Option<(u32, Vec<u32>)> = None;
    for g in groups.iter_mut() {
        g.sectors.sort_unstable();
        g.sectors.dedup();
        if g.kind == AccessKind::Load {
            if last.get(&g.site) == Some(&g.sectors) {
                t.l1_hits += 1;
                continue;
            }
            last.insert(g.site, g.sectors.clone());
            match &mut round {
                Some((depth, sites)) if *depth == g.depth && !sites.contains(&g.site) => sites.push(g.site),
                _ => {
                    rounds += 1;
                    round = Some((g.depth, vec![g.site]));
                }
            }
        }
        t.warp_instructions += 1;
        t.sectors += g.sectors.len() as u64;
        distinct.extend(g.sectors.iter().copied());
    }
    rounds
}

/// A fast hasher for the small integer keys of [`Collector`] (FxHash's multiply-rotate).
#[derive(Clone, Copy, Default)]
struct FxHasher(u64);

impl std::hash::Hasher for FxHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
}

type Fx = std::hash::BuildHasherDefault<FxHasher>;

/// Which term of the estimate wins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// DRAM bandwidth.
    Dram,
    /// L2 bandwidth.
    L2,
    /// Memory latency (dependent loads per warp, limited by occupancy).
    Latency,
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Bound::Dram => "DRAM bandwidth",
            Bound::L2 => "L2 bandwidth",
            Bound::Latency => "memory latency",
        })
    }
}

/// The estimate of one kernel's time and each of its terms.
#[derive(Clone, Debug, PartialEq)]
pub struct Estimate {
    /// The GPU modelled.
    pub gpu: &'static str,
    /// Distinct bytes touched (32 × distinct sectors).
    pub footprint_bytes: u64,
    /// Bytes moved between DRAM and L2.
    pub dram_bytes: u64,
    /// Bytes moved between L2 and the SMs.
    pub l2_bytes: u64,
    /// DRAM bytes / DRAM bandwidth, seconds.
    pub dram_time: f64,
    /// L2 bytes / L2 bandwidth, seconds.
    pub l2_time: f64,
    /// Latency of one round, seconds.
    pub round_latency: f64,
    /// Rounds on the critical path: max(longest warp, all rounds / (SMs × resident warps)).
    pub critical_rounds: f64,
    /// `critical_rounds` × `round_latency` / [`UNROLL`], seconds.
    pub latency_time: f64,
    /// The occupancy used.
    pub occupancy: Occupancy,
    /// The estimate: the largest of the three terms, seconds.
    pub time: f64,
    /// Which term it is.
    pub bound: Bound,
    /// `dram_time / time` in percent: how close to the memory roofline.
    pub roofline_percent: f64,
}

/// Estimates a kernel's time on `gpu` from its traffic and occupancy.
pub fn estimate(gpu: &Gpu, t: &Traffic, occ: Occupancy) -> Estimate {
    let footprint = t.distinct_sectors * SECTOR;
    let l2_bytes = t.sectors * SECTOR;
    let dram_bytes = if footprint <= gpu.l2_bytes {
        footprint
    } else {
        let miss = 1.0 - gpu.l2_bytes as f64 / footprint as f64;
        footprint + (l2_bytes.saturating_sub(footprint) as f64 * miss).round() as u64
    };
    let dram_time = dram_bytes as f64 / gpu.dram_bandwidth;
    let l2_time = l2_bytes as f64 / gpu.l2_bandwidth;
    let miss = if l2_bytes == 0 { 1.0 } else { (dram_bytes as f64 / l2_bytes as f64).min(1.0) };
    let round_latency = gpu.l2_latency + miss * (gpu.dram_latency - gpu.l2_latency);
    let parallel = f64::from(gpu.sms) * f64::from(occ.warps.max(1));
    let critical_rounds = (t.max_rounds as f64).max(t.rounds as f64 / parallel);
    let latency_time = critical_rounds * round_latency / UNROLL;
    let (time, bound) = [(dram_time, Bound::Dram), (l2_time, Bound::L2), (latency_time, Bound::Latency)]
        .into_iter()
        .fold((0.0, Bound::Dram), |best, x| if x.0 > best.0 { x } else { best });
    let roofline_percent = if time > 0.0 { 100.0 * dram_time / time } else { 100.0 };
    Estimate {
        gpu: gpu.name,
        footprint_bytes: footprint,
        dram_bytes,
        l2_bytes,
        dram_time,
        l2_time,
        round_latency,
        critical_rounds,
        latency_time,
        occupancy: occ,
        time,
        bound,
        roofline_percent,
    }
}

impl fmt::Display for Estimate {
    /// Three lines, each starting with two spaces and `estimate`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mb = |b: u64| b as f64 / 1e6;
        let us = |s: f64| s * 1e6;
        writeln!(
            f,
            "  estimate ({}): {:.2} us, bound by {}, {:.1}% of the memory roofline",
            self.gpu,
            us(self.time),
            self.bound,
            self.roofline_percent
        )?;
        writeln!(
            f,
            "  estimate terms: DRAM {:.3} MB -> {:.2} us; L2 {:.3} MB -> {:.2} us; latency {:.0} rounds x {:.0} ns / {} overlapped -> {:.2} us",
            mb(self.dram_bytes),
            us(self.dram_time),
            mb(self.l2_bytes),
            us(self.l2_time),
            self.critical_rounds,
            self.round_latency * 1e9,
            UNROLL,
            us(self.latency_time)
        )?;
        writeln!(
            f,
            "  estimate inputs: footprint {} B, DRAM {} B, L2 {} B; {} resident warps per SM ({} blocks, limited by {})",
            self.footprint_bytes,
            self.dram_bytes,
            self.l2_bytes,
            self.occupancy.warps,
            self.occupancy.blocks,
            self.occupancy.limit
        )
    }
}

impl fmt::Display for Traffic {
    /// One line, starting with two spaces and `trace`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "  trace: {} accesses ({} writes) in {} blocks, {} warps, {} threads per block; {} warp memory instructions ({} more served by L1), {} sectors ({} distinct); {} latency rounds (longest warp {})",
            self.accesses,
            self.writes,
            self.blocks,
            self.warps,
            self.threads_per_block,
            self.warp_instructions,
            self.l1_hits,
            self.sectors,
            self.distinct_sectors,
            self.rounds,
            self.max_rounds
        )
    }
}

/// The peer kernel `nvidia/peer/gespmm.cu` (GE-SpMM's shape): rows per block.
pub const GESPMM_ROWS_PER_BLOCK: u32 = 4;
/// The peer kernel: threads per block (one warp per row).
pub const GESPMM_THREADS: u32 = 32 * GESPMM_ROWS_PER_BLOCK;
/// The peer kernel: feature columns per warp (two per lane, 32 apart).
pub const GESPMM_COLUMNS_PER_WARP: usize = 64;
/// The peer kernel: static shared memory per block (a column index and a value per lane and
/// row).
pub const GESPMM_SHARED: u32 = GESPMM_THREADS * 8;

/// The accesses to global memory that the peer kernel `nvidia/peer/gespmm.cu` makes for
/// C = A·B with A in CSR (`indptr`, `m + 1` entries; i32 indices, f32 values) and B, C
/// row-major with `feat` columns: the peer's access pattern transcribed from its source, in
/// each thread's program order, with its block and thread indices. Buffers: 0 `indptr`,
/// 1 `indices`, 2 `values`, 3 `B`, 4 `C`; sites 0–7 in source order; depths count loads
/// (the staged column index read from shared memory included), as the interpreter's observer
/// does. Column indices do not change the sectors of `B` a warp reads beyond its rows, so
/// `indices` gives them.
pub fn gespmm_trace(indptr: &[i64], indices: &[i64], feat: usize, sink: &mut dyn FnMut(&Access)) {
    let m = indptr.len().saturating_sub(1);
    let rows = GESPMM_ROWS_PER_BLOCK as usize;
    let grid_x = m.div_ceil(rows);
    let grid_y = feat.div_ceil(GESPMM_COLUMNS_PER_WARP);
    let mut emit = |bx: usize, by: usize, lane: usize, ty: usize, buffer: usize, index: usize, kind, site, depth| {
        sink(&Access {
            stmt: 0,
            buffer,
            index: index as u64,
            bytes: 4,
            kind,
            site,
            depth,
            block: [bx as i64, by as i64, 0],
            thread: [lane as i64, ty as i64, 0],
            lane: 0,
        })
    };
    use AccessKind::{Load, Store};
    for bx in 0..grid_x {
        for by in 0..grid_y {
            for ty in 0..rows {
                let row = bx * rows + ty;
                if row >= m {
                    continue;
                }
                let (start, end) = (indptr[row] as usize, indptr[row + 1] as usize);
                for lane in 0..32 {
                    let col0 = by * GESPMM_COLUMNS_PER_WARP + lane;
                    let col1 = col0 + 32;
                    emit(bx, by, lane, ty, 0, row, Load, 0, 1);
                    emit(bx, by, lane, ty, 0, row + 1, Load, 1, 1);
                    let mut base = start;
                    while base < end {
                        let p = base + lane;
                        if p < end {
                            emit(bx, by, lane, ty, 1, p, Load, 2, 2);
                            emit(bx, by, lane, ty, 2, p, Load, 3, 2);
                        }
                        for &c in &indices[base..end.min(base + 32)] {
                            let c = c as usize;
                            if col0 < feat {
                                emit(bx, by, lane, ty, 3, c * feat + col0, Load, 4, 2);
                            }
                            if col1 < feat {
                                emit(bx, by, lane, ty, 3, c * feat + col1, Load, 5, 2);
                            }
                        }
                        base += 32;
                    }
                    if col0 < feat {
                        emit(bx, by, lane, ty, 4, row * feat + col0, Store, 6, 1);
                    }
                    if col1 < feat {
                        emit(bx, by, lane, ty, 4, row * feat + col1, Store, 7, 1);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(buffer: usize, index: u64, kind: AccessKind, site: u32, depth: u32, thread: i64) -> Access {
        Access { stmt: 0, buffer, index, bytes: 4, kind, site, depth, block: [0, 0, 0], thread: [thread, 0, 0], lane: 0 }
    }

    fn traffic(trace: &[Access]) -> Traffic {
        let mut c = Collector::new();
        for a in trace {
            c.record(a);
        }
        c.finish().remove(&0).unwrap()
    }

    #[test]
    fn a_coalesced_warp_load_is_four_sectors() {
        let trace: Vec<Access> = (0..32).map(|t| access(0, t as u64, AccessKind::Load, 0, 1, t)).collect();
        let t = traffic(&trace);
        assert_eq!((t.warp_instructions, t.sectors, t.distinct_sectors, t.warps, t.rounds), (1, 4, 4, 1, 1));
    }

    #[test]
    fn a_strided_warp_load_is_thirty_two_sectors() {
        let trace: Vec<Access> = (0..32).map(|t| access(0, 8 * t as u64, AccessKind::Load, 0, 1, t)).collect();
        let t = traffic(&trace);
        assert_eq!((t.warp_instructions, t.sectors, t.distinct_sectors), (1, 32, 32));
    }

    #[test]
    fn warps_sites_and_occurrences_make_instructions() {
        // 64 threads, each loading its element twice at one site, then storing it: per warp two
        // loads (the second an L1 hit) and a store.
        let mut trace = Vec::new();
        for t in 0..64 {
            trace.push(access(0, t as u64, AccessKind::Load, 0, 1, t));
            trace.push(access(0, t as u64, AccessKind::Load, 0, 1, t));
            trace.push(access(1, t as u64, AccessKind::Store, 1, 1, t));
        }
        let t = traffic(&trace);
        assert_eq!((t.warps, t.warp_instructions, t.l1_hits, t.sectors, t.distinct_sectors), (2, 4, 2, 16, 16));
        assert_eq!((t.writes, t.rounds, t.max_rounds, t.threads_per_block), (64, 2, 1, 64));
    }

    #[test]
    fn the_lanes_of_a_vector_store_are_one_instruction() {
        // 32 threads, each storing 4 consecutive elements: as lanes of one vector store, one
        // instruction of 16 sectors; as 4 scalar stores, 4 instructions of 16 sectors each.
        let trace = |vector: bool| {
            let mut out = Vec::new();
            for t in 0..32 {
                for l in 0..4 {
                    let lane = if vector { l } else { 0 };
                    out.push(Access { lane, ..access(0, 4 * t as u64 + u64::from(l), AccessKind::Store, 0, 1, t) });
                }
            }
            traffic(&out)
        };
        let (v, s) = (trace(true), trace(false));
        assert_eq!((v.warp_instructions, v.sectors), (1, 16));
        assert_eq!((s.warp_instructions, s.sectors), (4, 64));
    }

    #[test]
    fn rounds_overlap_independent_loads_only() {
        // Per thread: two independent loads (depth 1), a dependent one (depth 2), then the first
        // again at another address: rounds {a, b}, {c}, {a}.
        let mut trace = Vec::new();
        for t in 0..32 {
            trace.push(access(0, t as u64, AccessKind::Load, 0, 1, t));
            trace.push(access(1, t as u64, AccessKind::Load, 1, 1, t));
            trace.push(access(2, t as u64, AccessKind::Load, 2, 2, t));
            trace.push(access(0, 32 + t as u64, AccessKind::Load, 0, 1, t));
        }
        assert_eq!(traffic(&trace).rounds, 3);
    }

    fn traffic_of(sectors: u64, distinct: u64) -> Traffic {
        Traffic { sectors, distinct_sectors: distinct, ..Traffic::default() }
    }

    #[test]
    fn a_footprint_that_fits_in_l2_is_read_from_dram_once() {
        let occ = occupancy(&H100, 256, 32, 0);
        // 10 MB footprint, each sector read 10 times: DRAM sees it once.
        let distinct = 10_000_000 / SECTOR;
        let e = estimate(&H100, &traffic_of(10 * distinct, distinct), occ);
        assert_eq!((e.footprint_bytes, e.dram_bytes, e.l2_bytes), (distinct * 32, distinct * 32, 10 * distinct * 32));
        assert!((e.dram_time - (distinct * 32) as f64 / 3.35e12).abs() < 1e-15);
        assert_eq!(e.bound, Bound::L2);
        assert!((e.roofline_percent - 100.0 * e.dram_time / e.l2_time).abs() < 1e-9);
    }

    #[test]
    fn a_footprint_larger_than_l2_misses_in_proportion() {
        let occ = occupancy(&H100, 256, 32, 0);
        // 100 MB footprint read twice: half of the re-reads miss (L2 is 50 MB).
        let distinct = 100_000_000 / SECTOR;
        let e = estimate(&H100, &traffic_of(2 * distinct, distinct), occ);
        assert_eq!(e.dram_bytes, distinct * 32 + distinct * 32 / 2);
        assert_eq!(e.bound, Bound::Dram);
        assert!((e.roofline_percent - 100.0).abs() < 1e-9);
    }

    #[test]
    fn occupancy_follows_registers_threads_and_shared_memory() {
        // 32 registers: 1024 per warp, 64 warps fit; 256-thread blocks: 8 blocks by threads.
        assert_eq!(occupancy(&H100, 256, 32, 0), Occupancy { blocks: 8, warps: 64, limit: "threads" });
        // 128 registers: 4096 per warp, 16 warps: 2 blocks of 8 warps.
        assert_eq!(occupancy(&H100, 256, 128, 0), Occupancy { blocks: 2, warps: 16, limit: "registers" });
        // 33 registers round up to 40 per thread (1280 per warp): 51 warps, 6 blocks of 8.
        assert_eq!(occupancy(&H100, 256, 33, 0), Occupancy { blocks: 6, warps: 48, limit: "registers" });
        // One-warp blocks: 32 blocks per SM at most.
        assert_eq!(occupancy(&H100, 32, 16, 0), Occupancy { blocks: 32, warps: 32, limit: "blocks" });
        // 100 KB of shared memory per block: 2 blocks.
        assert_eq!(occupancy(&H100, 128, 16, 100 * 1024), Occupancy { blocks: 2, warps: 8, limit: "shared memory" });
    }

    #[test]
    fn the_latency_bound_takes_the_longest_warp_or_the_waves() {
        let t = Traffic { rounds: 132 * 64 * 10, max_rounds: 3, sectors: 1, distinct_sectors: 1, ..Traffic::default() };
        let e = estimate(&H100, &t, Occupancy { blocks: 8, warps: 64, limit: "threads" });
        assert!((e.critical_rounds - 10.0).abs() < 1e-9);
        // Every byte misses (1 sector requested, 1 distinct): DRAM latency per round.
        assert!((e.round_latency - H100.dram_latency).abs() < 1e-15);
        assert_eq!(e.bound, Bound::Latency);
        let t = Traffic { max_rounds: 50, ..t };
        assert!((estimate(&H100, &t, e.occupancy).critical_rounds - 50.0).abs() < 1e-9);
    }

    #[test]
    fn the_peer_trace_reads_each_row_once_per_column_tile() {
        // Rows 0 and 1 with 2 and 1 nonzeros, 40 features: one column tile, lanes 0..8 hold a
        // second column.
        let (indptr, indices) = ([0i64, 2, 3], [0i64, 1, 1]);
        let mut c = Collector::new();
        let mut n = 0;
        gespmm_trace(&indptr, &indices, 40, &mut |a| {
            n += 1;
            c.record(a)
        });
        // Per lane of a row: 2 indptr loads; staging 2 per nonzero lane; B 1 + (lane < 8) per
        // nonzero; C 1 + (lane < 8).
        let per_row = |nnz: usize| 32 * 2 + 2 * nnz + nnz * (32 + 8) + (32 + 8);
        assert_eq!(n, per_row(2) + per_row(1));
        let t = c.finish().remove(&0).unwrap();
        assert_eq!((t.blocks, t.warps, t.threads_per_block), (1, 2, 64));
    }
}
