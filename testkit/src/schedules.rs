//! Hand-written GPU schedules of the corpus, shared by the schedule, MLIR and CubeCL tests.
//! Each returns the schedule at Stage II, after its last primitive, so a caller can add
//! steps, check the trace, or lower it.

use sparsec::ir::ThreadTag::*;
use sparsec::schedule::{LoopRv, Schedule};

/// The loops around block `block`, outermost first.
pub fn loops(sch: &mut Schedule, block: &str) -> Vec<LoopRv> {
    let b = sch.get_block(block).unwrap_or_else(|e| panic!("{block}: {e}"));
    sch.get_loops(b).unwrap_or_else(|e| panic!("{block}: {e}"))
}

/// A schedule of corpus workload `name`, at Stage I.
pub fn stage1(name: &str) -> Schedule {
    Schedule::new(crate::workload(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// csrmm: one row per GPU block; the features (of the product and of its init) split by
/// `threads` with the inner part over `threadIdx.x`.
pub fn csrmm_row_per_block(threads: i64) -> Schedule {
    let mut sch = stage1("csrmm");
    sch.lower_sparse_iter().unwrap();
    let i = loops(&mut sch, "csrmm0")[0];
    sch.bind(i, BlockIdxX).unwrap();
    for block in ["csrmm1", "csrmm_init1"] {
        let k = *loops(&mut sch, block).last().unwrap();
        let k = sch.split(k, &[None, Some(threads)]).unwrap();
        sch.bind(k[1], ThreadIdxX).unwrap();
    }
    sch
}

/// csrmm, mapped wrongly for a GPU (fuzz seed 7302925): rows serial, the init's features over
/// `threadIdx.x` and the sum's features over `threadIdx.y`. The sum's update lies outside
/// every `threadIdx.x` loop, so every unit along `threadIdx.x` would repeat it: the
/// interpreter runs it (the IR means one update), GPU backends must refuse it.
pub fn csrmm_update_repeated_along_threads() -> Schedule {
    let mut sch = stage1("csrmm");
    sch.lower_sparse_iter().unwrap();
    let k = *loops(&mut sch, "csrmm_init1").last().unwrap();
    sch.bind(k, ThreadIdxX).unwrap();
    let k = *loops(&mut sch, "csrmm1").last().unwrap();
    sch.bind(k, ThreadIdxY).unwrap();
    sch
}

/// csrmm with rows over `blockIdx.x` and both feature loops over `threadIdx.x`, split by 32
/// in the init and by `sum_split` in the sum. With another factor than 32 a unit adds into
/// elements that other units zeroed, so a barrier must order the two nests (CubeCL places one;
/// the MLIR GPU path, which emits none, refuses); with 32 each unit meets only its own.
pub fn csrmm_init_on_threads(sum_split: i64) -> Schedule {
    let mut sch = stage1("csrmm");
    sch.lower_sparse_iter().unwrap();
    let i = loops(&mut sch, "csrmm0")[0];
    sch.bind(i, BlockIdxX).unwrap();
    let k = *loops(&mut sch, "csrmm_init1").last().unwrap();
    let k = sch.split(k, &[None, Some(32)]).unwrap();
    sch.bind(k[1], ThreadIdxX).unwrap();
    let k = *loops(&mut sch, "csrmm1").last().unwrap();
    let k = sch.split(k, &[None, Some(sum_split)]).unwrap();
    sch.bind(k[1], ThreadIdxX).unwrap();
    sch
}

/// csrmm with C accumulated in a register: rows over `blockIdx.x`, the features of the init
/// and of the sum split by 32 over `threadIdx.x`, the sum's features moved outside its
/// nonzeros, and C cached in `local` scope at the sum's thread-bound loop (one element per
/// unit, its copies guarded by the block's domain).
pub fn csrmm_register_accumulator() -> Schedule {
    let mut sch = stage1("csrmm");
    sch.lower_sparse_iter().unwrap();
    let i = loops(&mut sch, "csrmm0")[0];
    sch.bind(i, BlockIdxX).unwrap();
    let jk = loops(&mut sch, "csrmm1");
    let k = sch.split(jk[1], &[None, Some(32)]).unwrap();
    sch.reorder(&[k[0], k[1], jk[0]]).unwrap();
    sch.bind(k[1], ThreadIdxX).unwrap();
    let k0 = *loops(&mut sch, "csrmm_init1").last().unwrap();
    let k0 = sch.split(k0, &[None, Some(32)]).unwrap();
    sch.bind(k0[1], ThreadIdxX).unwrap();
    let b = sch.get_block("csrmm1").unwrap();
    sch.cache_write(b, "C", sparsec::ir::Scope::Local, k[1]).unwrap();
    sch
}

/// A Stage-III kernel with a `local` buffer allocated outside two thread-bound loops: the
/// first writes `L[vt]`, the second reads `L[31 - vt]`. The IR means one buffer (the
/// interpreter computes `B = 2 · reversed A` per block), a GPU gives every unit its own, so
/// GPU backends must refuse it.
pub const LOCAL_ACROSS_UNITS: &str = "func l(a: handle, b: handle, n: i32) stage III {
  buffer A = match_buffer(a, [n * 32], f32)
  buffer B = match_buffer(b, [n * 32], f32)
  for bx in blockIdx.x(n) {
    buffer L = alloc_buffer([32], f32, local)
    for tx in threadIdx.x(32) {
      block w(vb: spatial(n) = bx, vt: spatial(32) = tx) {
        L[vt] = A[vb * 32 + vt]
      }
    }
    for tx2 in threadIdx.x(32) {
      block r(vb: spatial(n) = bx, vt: spatial(32) = tx2) {
        B[vb * 32 + vt] = L[31 - vt] * 2.0
      }
    }
  }
}
";

/// sddmm: rows and their nonzeros fused (Stage I), split by `threads` over
/// `blockIdx.x` × `threadIdx.x`.
pub fn sddmm_fused_nonzeros(threads: i64) -> Schedule {
    let mut sch = stage1("sddmm");
    let sp = sch.get_sparse_iteration("sddmm").unwrap();
    let it = sch.get_sp_iters(sp).unwrap();
    sch.sparse_fuse(sp, &[it[0], it[1]]).unwrap();
    sch.lower_sparse_iter().unwrap();
    let ij = loops(&mut sch, "sddmm0")[0];
    let ij = sch.split(ij, &[None, Some(threads)]).unwrap();
    sch.bind(ij[0], BlockIdxX).unwrap();
    sch.bind(ij[1], ThreadIdxX).unwrap();
    sch
}

/// bsrmm: block columns moved outside the block (Stage I), block rows over GPU blocks, the
/// block's rows × features over `threadIdx.y` × `threadIdx.x`.
pub fn bsrmm_block_rows() -> Schedule {
    let mut sch = stage1("bsrmm");
    let sp = sch.get_sparse_iteration("bsrmm").unwrap();
    let it = sch.get_sp_iters(sp).unwrap();
    let (i, bi, bj, f, j) = (it[0], it[1], it[2], it[3], it[4]);
    sch.sparse_reorder(sp, &[i, j, bi, bj, f]).unwrap();
    sch.lower_sparse_iter().unwrap();
    let i = loops(&mut sch, "bsrmm0")[0];
    sch.bind(i, BlockIdxX).unwrap();
    let init = loops(&mut sch, "bsrmm_init1");
    sch.bind(init[0], ThreadIdxY).unwrap();
    sch.bind(init[1], ThreadIdxX).unwrap();
    // [j, bi, bj, f]: the block's rows and features go to threads, j and bj stay serial.
    let l = loops(&mut sch, "bsrmm1");
    sch.reorder(&[l[1], l[3], l[0], l[2]]).unwrap();
    sch.bind(l[1], ThreadIdxY).unwrap();
    sch.bind(l[3], ThreadIdxX).unwrap();
    sch
}

/// ellmm: rows over GPU blocks, block rows × features over threads, block columns unrolled.
pub fn ellmm_threads() -> Schedule {
    let mut sch = stage1("ellmm");
    sch.lower_sparse_iter().unwrap();
    let i = loops(&mut sch, "ellmm0")[0];
    sch.bind(i, BlockIdxX).unwrap();
    let init = loops(&mut sch, "ellmm_init1");
    sch.bind(init[0], ThreadIdxY).unwrap();
    sch.bind(init[1], ThreadIdxX).unwrap();
    let l = loops(&mut sch, "ellmm1");
    let (j, bi, bj, f) = (l[0], l[1], l[2], l[3]);
    sch.reorder(&[bi, f, j, bj]).unwrap();
    sch.bind(bi, ThreadIdxY).unwrap();
    sch.bind(f, ThreadIdxX).unwrap();
    sch.unroll(bj).unwrap();
    sch
}

/// csrmm decomposed into hyb buckets of the given ELL widths (`hyb_rules(1, widths)`), at
/// Stage I.
pub fn hyb_decomposed(widths: &[i64]) -> sparsec::ir::Func {
    let csrmm = crate::workload("csrmm");
    sparsec::passes::decompose_format(&csrmm, &sparsec::passes::hyb_rules(1, widths).unwrap()).unwrap()
}

/// The hyb GPU schedule of `examples/hyb.trace.json`: per bucket one ELL row per block and
/// the features across threads, atomic accumulation into C, the bucket kernels fused into
/// one launch; the bucket rewrites and the zeroing of C on the GPU default (another launch);
/// lowered to Stage III.
pub fn hyb_atomic(g: sparsec::ir::Func, buckets: usize) -> Schedule {
    let mut sch = Schedule::new(g).unwrap();
    sch.lower_sparse_iter().unwrap();
    // Chunks of one long row live in several ELL rows (their iterator is a reduction):
    // their updates to C collide, so they are atomic before the rows are spread.
    for b in 0..buckets {
        let inner = sch.get_block(&format!("csrmm_hyb_0_{b}1")).unwrap();
        sch.annotate(inner, "atomic", sparsec::ir::AttrValue::Bool(true)).unwrap();
    }
    sch.lower_atomic().unwrap();
    for b in 0..buckets {
        let io = loops(&mut sch, &format!("csrmm_hyb_0_{b}0"))[0];
        sch.bind(io, BlockIdxX).unwrap();
        let inner = sch.get_block(&format!("csrmm_hyb_0_{b}1")).unwrap();
        let k = sch.get_loops(inner).unwrap()[1];
        sch.bind(k, ThreadIdxX).unwrap();
    }
    // The bucket rewrites and the zeroing of C: the GPU default (128 units per block).
    sparsec::schedule::auto::gpu(&mut sch, 128).unwrap();
    sch.horizontal_fusion().unwrap();
    sch.lower_sparse_buffer().unwrap();
    sch
}

/// A random schedule of `f1` (Stage I) at Stage III, for differential fuzzing: perhaps a
/// position map for each sparse axis an iteration looks up (`workspace`), then after
/// `lower_sparse_iter` a few random primitives on random loops (split by a small factor,
/// bind to a block or thread index, parallel, vectorize, unroll, fuse or reorder two loops,
/// cache a buffer the block writes or reads in local or shared scope at a loop, decompose a
/// reduction, rfactor, compute a block at another's loop, contract multiply-adds; then
/// perhaps a vector form's split and a loop specialized for long extents); primitives
/// refuse what they cannot prove and leave the IR unchanged, so every outcome is a legal
/// schedule whose numbers must equal Stage I's. Also returns the instructions tried, for
/// reproducing. `None` when the program does not lower.
pub fn random_schedule(f1: &sparsec::ir::Func, seed: u64) -> Option<(sparsec::ir::Func, Vec<String>)> {
    use sparsec::ir::{Scope, StmtKind, ThreadTag};
    let mut rng = crate::Rng::new(seed);
    let mut sch = Schedule::new(f1.clone()).ok()?;
    let mut tried = Vec::new();
    // Perhaps position maps for every lookup of a sparse axis (refused where there is none),
    // drawn apart from `rng` so that the primitives below stay those an earlier reproducer had.
    if crate::Rng::new(seed ^ 0x9e37_79b9_7f4a_7c15).below(2) == 0 {
        let mut pairs = Vec::new();
        for s in &f1.body {
            if let StmtKind::SpIter(it) = &s.kind {
                pairs.extend(f1.axes.iter().filter(|(_, a)| a.kind.is_sparse()).map(|(_, a)| (it.name.clone(), a.name.clone())));
            }
        }
        for (it, axis) in pairs {
            if sch.get_sparse_iteration(&it).is_ok_and(|sp| sch.workspace(sp, &axis).is_ok()) {
                tried.push(format!("workspace {axis} in {it}"));
            }
        }
    }
    sch.lower_sparse_iter().ok()?;
    let tags = [ThreadTag::BlockIdxX, ThreadTag::BlockIdxY, ThreadTag::ThreadIdxX, ThreadTag::ThreadIdxY];
    for _ in 0..1 + rng.below(4) {
        let mut blocks = Vec::new();
        sparsec::ir::walk_stmts(&sch.func().body, &mut |s| {
            if let StmtKind::Block(b) = &s.kind {
                blocks.push(b.name.clone());
            }
        });
        if blocks.is_empty() {
            break;
        }
        let name = blocks[rng.below(blocks.len())].clone();
        let Ok(b) = sch.get_block(&name) else { continue };
        let Ok(loops) = sch.get_loops(b) else { continue };
        if loops.is_empty() {
            continue;
        }
        let k = rng.below(loops.len());
        let lp = loops[k];
        // The buffers the block writes and reads, for the caches.
        let mut regions: [Vec<String>; 2] = Default::default();
        sparsec::ir::walk_stmts(&sch.func().body, &mut |s| {
            if let StmtKind::Block(blk) = &s.kind {
                if blk.name == name {
                    for (i, list) in [&blk.writes, &blk.reads].into_iter().enumerate() {
                        regions[i].extend(list.iter().filter_map(|r| sch.func().buffers.try_get(r.buffer)).map(|x| x.name.clone()));
                    }
                }
            }
        });
        let scope = [Scope::Local, Scope::Shared][rng.below(2)];
        let what = rng.below(15);
        // A loop of another block, for the nest moves.
        let other = {
            let o = blocks[rng.below(blocks.len())].clone();
            sch.get_block(&o).ok().and_then(|ob| sch.get_loops(ob).ok().filter(|l| !l.is_empty()).map(|l| (o, l[rng.below(l.len())])))
        };
        let ok = match what {
            0 => {
                let f = [2, 3, 4, 32][rng.below(4)];
                tried.push(format!("split loop {k} of {name} by {f}"));
                sch.split(lp, &[None, Some(f)]).is_ok()
            }
            1 | 2 => {
                let t = tags[rng.below(tags.len())];
                tried.push(format!("bind loop {k} of {name} to {}", t.name()));
                sch.bind(lp, t).is_ok()
            }
            3 => {
                tried.push(format!("parallel loop {k} of {name}"));
                sch.parallel(lp).is_ok()
            }
            4 => {
                tried.push(format!("vectorize loop {k} of {name}"));
                sch.vectorize(lp).is_ok()
            }
            5 => {
                tried.push(format!("unroll loop {k} of {name}"));
                sch.unroll(lp).is_ok()
            }
            6 | 7 if !regions[what - 6].is_empty() => {
                let list = &regions[what - 6];
                let buf = list[rng.below(list.len())].clone();
                let op = if what == 6 { "cache_write" } else { "cache_read" };
                tried.push(format!("{op} {buf} of {name} in {} at loop {k}", scope.name()));
                if what == 6 {
                    sch.cache_write(b, &buf, scope, lp).is_ok()
                } else {
                    sch.cache_read(b, &buf, scope, lp).is_ok()
                }
            }
            10 => {
                tried.push(format!("decompose_reduction {name} at loop {k}"));
                sch.decompose_reduction(b, lp).is_ok()
            }
            11 => {
                tried.push(format!("rfactor loop {k} of {name}"));
                sch.rfactor(lp, 0).is_ok()
            }
            12 | 13 => match other {
                Some((o, ol)) => {
                    let op = if what == 12 { "compute_at" } else { "reverse_compute_at" };
                    tried.push(format!("{op} {name} at a loop of {o}"));
                    if what == 12 {
                        sch.compute_at(b, ol).is_ok()
                    } else {
                        sch.reverse_compute_at(b, ol).is_ok()
                    }
                }
                None => false,
            },
            14 => {
                tried.push("contract".to_string());
                sch.contract().is_ok()
            }
            8 if k + 1 < loops.len() => {
                tried.push(format!("reorder loops {k}, {} of {name}", k + 1));
                sch.reorder(&[loops[k + 1], lp]).is_ok()
            }
            _ if k + 1 < loops.len() => {
                tried.push(format!("fuse loops {k}, {} of {name}", k + 1));
                sch.fuse(&[lp, loops[k + 1]]).is_ok()
            }
            _ => false,
        };
        if !ok {
            if let Some(last) = tried.last_mut() {
                last.push_str(" (refused)");
            }
        }
    }
    // Sometimes a vector form's shape: a loop split by 2, 4 or 8 and the inner part
    // vectorized. Drawn from a stream of its own, so the instructions above replay as before.
    let mut vrng = crate::Rng::new(seed ^ 0x7ec7_0f0f);
    if vrng.below(3) == 0 {
        if let Some((name, loops)) = random_block_loops(&mut sch, &mut vrng) {
            let k = vrng.below(loops.len());
            let w = [2, 4, 8][vrng.below(3)];
            tried.push(format!("split loop {k} of {name} by {w}, vectorize the inner part"));
            let ok = sch.split(loops[k], &[None, Some(w)]).and_then(|p| sch.vectorize(p[1])).is_ok();
            if let (false, Some(last)) = (ok, tried.last_mut()) {
                last.push_str(" (refused)");
            }
        }
    }
    // Sometimes a loop specialized for long extents, and the copy's innermost loop split and
    // its inner part factored into partial sums (`specialize`, `split`, `rfactor`). A stream
    // of its own again.
    let mut srng = crate::Rng::new(seed ^ 0x5bec_1a11);
    if srng.below(3) == 0 {
        if let Some((name, loops)) = random_block_loops(&mut sch, &mut srng) {
            let k = srng.below(loops.len());
            let n = [1, 2, 3, 5][srng.below(4)];
            tried.push(format!("specialize loop {k} of {name} from extent {n}"));
            let ok = match sch.specialize(loops[k], n) {
                Ok([long, _]) if srng.below(2) == 0 => {
                    let f = [2, 4][srng.below(2)];
                    tried.push(format!("split the copy by {f}, rfactor its inner part"));
                    sch.split(long, &[None, Some(f)]).and_then(|p| sch.rfactor(p[1], 0)).is_ok()
                }
                r => r.is_ok(),
            };
            if let (false, Some(last)) = (ok, tried.last_mut()) {
                last.push_str(" (refused)");
            }
        }
    }
    sch.lower_sparse_buffer().ok()?;
    Some((sch.into_func(), tried))
}

/// A block of `sch` drawn by `rng` and the loops around it, where it has some.
fn random_block_loops(sch: &mut Schedule, rng: &mut crate::Rng) -> Option<(String, Vec<LoopRv>)> {
    let mut blocks = Vec::new();
    sparsec::ir::walk_stmts(&sch.func().body, &mut |s| {
        if let sparsec::ir::StmtKind::Block(b) = &s.kind {
            blocks.push(b.name.clone());
        }
    });
    if blocks.is_empty() {
        return None;
    }
    let name = blocks[rng.below(blocks.len())].clone();
    let loops = sch.get_block(&name).and_then(|b| sch.get_loops(b)).unwrap_or_default();
    (!loops.is_empty()).then_some((name, loops))
}

/// [`random_schedule`] seeded by `f1`'s printed text, so a reproducer file replays it.
pub fn random_schedule_of(f1: &sparsec::ir::Func) -> Option<(sparsec::ir::Func, Vec<String>)> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    sparsec::ir::text::print_func(f1).hash(&mut h);
    random_schedule(f1, h.finish())
}
